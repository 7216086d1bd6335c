package python

// The flags of the Python bridge. pkg-config finds the python3-embed.pc of
// the CPython chosen at build time (the Makefile sets PKG_CONFIG_PATH and an
// rpath to that Python's LIBDIR, so the binary never loads another
// libpython of the same soname).

/*
#cgo pkg-config: python3-embed
#cgo CFLAGS: -O2 -Wall -Werror -Wno-unused-function
#cgo LDFLAGS: -lpthread
*/
import "C"

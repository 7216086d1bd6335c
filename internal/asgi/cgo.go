package asgi

/*
#cgo pkg-config: python3-embed
#cgo CFLAGS: -O2 -Wall -Werror -Wno-unused-function -I${SRCDIR}/../python
*/
import "C"

package wsgi

// The C of this package (job.c, environ.c, input.c, response.c,
// filewrapper.c) calls internal/python's C (tspy.h: ts_pool_submit and
// the pool's done list, the attach pair, ts_buf_*, ts_check_field,
// ts_log ...), which cgo compiles into that package, not this one. The Go
// import of turnstile/internal/python is what links it in, and it is a
// real one: Handler.Pool is a *python.Pool, watch.go reads python.Now.
// So `go list -deps` tells the truth about this package. A package whose
// C calls another package's C imports that package in Go, for use; it
// does not keep a blank use (var _ = pkg.X) alive for the linker alone.

/*
#cgo pkg-config: python3-embed
#cgo CFLAGS: -O2 -Wall -Werror -Wno-unused-function -I${SRCDIR}/../python
*/
import "C"

/* sample.c: read a Python thread's stack without the GIL.
 *
 * Versions: CPython 3.11, 3.12 and 3.13 with the GIL, the layouts below
 * switched on PY_VERSION_HEX; tspy.h refuses any other build at compile
 * time (a free-threaded one included).
 *
 * Notes about the implementation
 * ------------------------------
 * The watchdog must see where a stalled loop is stuck even when the loop
 * holds the GIL in C code (a regex, sum(range(10**10))): a sampler that
 * needs the GIL gets nothing. Like faulthandler's traceback dump, this walks
 * the thread's frame chain racing the thread it reads: the caller accepts
 * an occasional garbled frame. The frames and the code objects' headers
 * are copied with process_vm_readv (safe_read), so a pointer the race left
 * dangling ends the walk rather than the process; a code object is checked
 * for type before its line table and names are read. It is called from a Go goroutine through cgo, never
 * attaches and never allocates Python objects.
 *
 * The frame layout is private and changes by version (3.11 and 3.12:
 * tstate->cframe->current_frame and frame->f_code; 3.13:
 * tstate->current_frame and frame->f_executable), so this file alone builds
 * with Py_BUILD_CORE and the internal headers. _Py_DumpTraceback would do
 * the same, but 3.13 no longer exports it.
 */
#define Py_BUILD_CORE 1
#include "tspy.h"
#include "internal/pycore_frame.h"

#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define TS_MAX_FRAMES 128

/* safe_read copies n bytes at src into dst with process_vm_readv on this
 * process: an address the race left pointing at unmapped memory (a frame
 * being popped, a code object freed) fails with EFAULT instead of a
 * SIGSEGV, which Go's handler turns into the worker's death (seen: 400
 * threads starting while the watchdog sampled a stalled loop). 0, or -1
 * when the bytes cannot be read. */
static int
safe_read(void *dst, const void *src, size_t n)
{
    struct iovec local = {dst, n}, remote = {(void *)src, n};

    if (src == NULL) {
        return -1;
    }
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* copy_str appends the text of a str object read without the GIL: ASCII
 * and latin-1 as is, other kinds as '?' per character. Returns the new
 * length. */
static size_t
copy_str(char *out, size_t len, size_t cap, PyObject *s)
{
    Py_ssize_t n, i;
    int kind;
    const void *data;

    if (s == NULL || !PyUnicode_Check(s)) {
        const char *q = "?";
        if (len + 1 < cap) {
            out[len++] = *q;
        }
        return len;
    }
    n = PyUnicode_GET_LENGTH(s);
    kind = PyUnicode_KIND(s);
    data = PyUnicode_DATA(s);
    for (i = 0; i < n && len + 1 < cap; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        out[len++] = (c < 0x80 && c >= 0x20) ? (char)c : '?';
    }
    return len;
}

/* ts_sample_stack writes t's Python stack into out, innermost frame first,
 * one "filename\tline\tfunction\n" line per frame, and returns the length
 * (0 when the thread runs no Python). Any thread; no GIL. */
size_t
ts_sample_stack(PyThreadState *tstate, char *out, size_t cap)
{
    _PyInterpreterFrame *frame;
    _PyInterpreterFrame fc;  /* the current frame, copied (safe_read) */
    size_t len = 0;
    int depth;

    if (tstate == NULL || cap < 64) {
        return 0;
    }
#if PY_VERSION_HEX >= 0x030D0000
    if (safe_read(&frame, &tstate->current_frame, sizeof frame) < 0) {
        return 0;
    }
#else
    {
        _PyCFrame *cf;
        if (safe_read(&cf, &tstate->cframe, sizeof cf) < 0 || cf == NULL
            || safe_read(&frame, &cf->current_frame, sizeof frame) < 0) {
            return 0;
        }
    }
#endif
    for (depth = 0; frame != NULL && depth < TS_MAX_FRAMES; depth++, frame = fc.previous) {
        PyObject ob;             /* the code object's header, copied */
        PyCodeObject *code;
        int lasti, line;
        char num[16];
        size_t k;

        if (safe_read(&fc, frame, sizeof fc) < 0) {
            break;  /* the chain moved under us: what was read stands */
        }
#if PY_VERSION_HEX >= 0x030C0000
        if (fc.owner == FRAME_OWNED_BY_CSTACK) {
            continue;
        }
#endif
#if PY_VERSION_HEX >= 0x030D0000
        code = (PyCodeObject *)fc.f_executable;
#else
        code = fc.f_code;
#endif
        if (code == NULL || safe_read(&ob, code, sizeof ob) < 0 || ob.ob_type != &PyCode_Type) {
            continue;
        }
        lasti = _PyInterpreterFrame_LASTI(&fc);
        if (lasti < 0) {
            continue;  /* an incomplete frame: not started yet */
        }
        line = PyCode_Addr2Line(code, lasti * (int)sizeof(_Py_CODEUNIT));
        if (len + 64 >= cap) {
            break;
        }
        len = copy_str(out, len, cap - 40, code->co_filename);
        out[len++] = '\t';
        k = (size_t)snprintf(num, sizeof(num), "%d", line);
        memcpy(out + len, num, k);
        len += k;
        out[len++] = '\t';
        len = copy_str(out, len, cap - 2, code->co_qualname);
        out[len++] = '\n';
    }
    return len;
}

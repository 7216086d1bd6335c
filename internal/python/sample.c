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
 * the thread's frame chain with plain reads, racing the thread it reads: the
 * caller accepts an occasional garbled frame, and every pointer is checked
 * for type before use. It is called from a Go goroutine through cgo, never
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

#define TS_MAX_FRAMES 128

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
    size_t len = 0;
    int depth;

    if (tstate == NULL || cap < 64) {
        return 0;
    }
#if PY_VERSION_HEX >= 0x030D0000
    frame = tstate->current_frame;
#else
    if (tstate->cframe == NULL) {
        return 0;
    }
    frame = tstate->cframe->current_frame;
#endif
    for (depth = 0; frame != NULL && depth < TS_MAX_FRAMES; depth++, frame = frame->previous) {
        PyCodeObject *code;
        int lasti, line;
        char num[16];
        size_t k;

#if PY_VERSION_HEX >= 0x030C0000
        if (frame->owner == FRAME_OWNED_BY_CSTACK) {
            continue;
        }
#endif
#if PY_VERSION_HEX >= 0x030D0000
        code = (PyCodeObject *)frame->f_executable;
#else
        code = frame->f_code;
#endif
        if (code == NULL || Py_TYPE(code) != &PyCode_Type) {
            continue;
        }
        lasti = _PyInterpreterFrame_LASTI(frame);
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

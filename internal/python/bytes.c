/* bytes.c: buffers and header-field checks shared by the bridges.
 *
 * DESIGN.md, the bytes rule: what an app returns is validated in C before
 * it becomes bytes on the wire. Both the WSGI and the ASGI bridge check
 * header fields the same way, here.
 */
#include "tspy.h"

#include <stdlib.h>
#include <string.h>

int
ts_buf_reserve(char **buf, size_t *cap, size_t need)
{
    size_t c = *cap ? *cap : 64;
    char *p;

    if (need <= *cap) {
        return 0;
    }
    while (c < need) {
        c *= 2;
    }
    p = realloc(*buf, c);
    if (p == NULL) {
        return -1;
    }
    *buf = p;
    *cap = c;
    return 0;
}

int
ts_buf_grow(char **buf, size_t *cap, size_t len, size_t n, size_t bound)
{
    if (bound && len + n > bound) {
        PyErr_SetString(PyExc_ValueError, "turnstile: response head too large");
        return -1;
    }
    if (ts_buf_reserve(buf, cap, len + n) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

int
ts_is_tchar(unsigned char c)
{
    /* RFC 9110 section 5.6.2: tchar */
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
        return 1;
    }
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

const char *
ts_text_utf8(PyObject *s, Py_ssize_t *n, PyObject **hold)
{
    const char *p = PyUnicode_AsUTF8AndSize(s, n);

    *hold = NULL;
    if (p != NULL || !PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        return p;
    }
    PyErr_Clear();
    *hold = PyUnicode_AsEncodedString(s, "utf-8", "backslashreplace");
    if (*hold == NULL) {
        return NULL;
    }
    *n = PyBytes_GET_SIZE(*hold);
    return PyBytes_AS_STRING(*hold);
}

char *
ts_text_dup(PyObject *s)
{
    Py_ssize_t n;
    PyObject *hold;
    const char *p = PyUnicode_Check(s) ? ts_text_utf8(s, &n, &hold) : NULL;
    char *out;

    if (p == NULL) {
        PyErr_Clear();
        return strdup("(unprintable error)");
    }
    out = malloc(n + 1);
    if (out != NULL) {
        memcpy(out, p, n);
        out[n] = '\0';
    }
    Py_XDECREF(hold);
    return out;
}

int
ts_ascii_ieq(const char *a, Py_ssize_t n, const char *lit)
{
    Py_ssize_t i;

    if ((Py_ssize_t)strlen(lit) != n) {
        return 0;
    }
    for (i = 0; i < n; i++) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z') {
            c += 32;
        }
        if (c != lit[i]) {
            return 0;
        }
    }
    return 1;
}

int
ts_list_has_token(const char *v, Py_ssize_t n, const char *lit)
{
    Py_ssize_t i = 0;

    while (i < n) {
        Py_ssize_t a, b;
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) {
            i++;
        }
        a = i;
        while (i < n && v[i] != ',') {
            i++;
        }
        b = i;
        while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t')) {
            b--;
        }
        if (ts_ascii_ieq(v + a, b - a, lit)) {
            return 1;
        }
    }
    return 0;
}

int
ts_check_field(const char *name, Py_ssize_t nlen, const char *val, Py_ssize_t vlen,
               PyObject *name_obj, PyObject *val_obj)
{
    Py_ssize_t i;

    if (nlen == 0) {
        PyErr_SetString(PyExc_ValueError, "empty header name");
        return -1;
    }
    for (i = 0; i < nlen; i++) {
        if (!ts_is_tchar((unsigned char)name[i])) {
            /* ASCII-only format strings: PyErr_Format rejects others */
            PyErr_Format(PyExc_ValueError, "invalid header name %R (RFC 9110 section 5.1)", name_obj);
            return -1;
        }
    }
    for (i = 0; i < vlen; i++) {
        unsigned char c = (unsigned char)val[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            PyErr_Format(PyExc_ValueError,
                         "invalid byte 0x%02x in the value of header %R (RFC 9110 section 5.5)",
                         c, name_obj);
            return -1;
        }
    }
    (void)val_obj;  /* kept for symmetry; the value may be secret */
    return 0;
}

int
ts_parse_content_length(const char *val, Py_ssize_t vlen, int64_t *out)
{
    int64_t n = 0;
    Py_ssize_t i;

    if (vlen == 0 || vlen > 18) {
        PyErr_SetString(PyExc_ValueError, "invalid Content-Length header");
        return -1;
    }
    for (i = 0; i < vlen; i++) {
        if (val[i] < '0' || val[i] > '9') {
            PyErr_SetString(PyExc_ValueError, "invalid Content-Length header");
            return -1;
        }
        n = n * 10 + (val[i] - '0');
    }
    *out = n;
    return 0;
}

/* filewrapper.c: wsgi.file_wrapper (PEP 3333, "Optional Platform-Specific
 * File Handling").
 *
 * Notes about the implementation
 * ------------------------------
 * An app that returns wsgi.file_wrapper(f) over a regular file, after
 * start_response, has the file sent by Go with sendfile: the job hands Go
 * a dup'd descriptor from the file's logical position (tell(), since a
 * buffered file may have read ahead) and the pool thread moves on. Any
 * other file-like object is iterated in block_size reads like any body.
 */
#include "wsgi.h"

#include <fcntl.h>
#include <sys/stat.h>

typedef ts_wsgi_file_wrapper FileWrapper;

PyTypeObject *ts_wsgi_file_wrapper_type;
static PyObject *str_close, *str_fileno;

static PyObject *
file_wrapper_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"filelike", "block_size", NULL};
    PyObject *filelike;
    Py_ssize_t blksize = 8192;
    FileWrapper *self;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|n:file_wrapper", kwlist,
                                     &filelike, &blksize)) {
        return NULL;
    }
    self = (FileWrapper *)tp->tp_alloc(tp, 0);
    if (self == NULL) {
        return NULL;
    }
    self->filelike = Py_NewRef(filelike);
    self->blksize = blksize > 0 ? blksize : 8192;
    return (PyObject *)self;
}

static PyObject *
file_wrapper_iternext(FileWrapper *self)
{
    PyObject *data = PyObject_CallMethod(self->filelike, "read", "n", self->blksize);
    if (data == NULL) {
        return NULL;
    }
    if (PyBytes_Check(data) && PyBytes_GET_SIZE(data) == 0) {
        Py_DECREF(data);
        return NULL;
    }
    return data;
}

static PyObject *
file_wrapper_close(FileWrapper *self, PyObject *unused)
{
    if (PyObject_HasAttr(self->filelike, str_close)) {
        return PyObject_CallMethodNoArgs(self->filelike, str_close);
    }
    Py_RETURN_NONE;
}

static void
file_wrapper_dealloc(FileWrapper *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    Py_CLEAR(self->filelike);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef file_wrapper_methods[] = {
    {"close", (PyCFunction)file_wrapper_close, METH_NOARGS, "close the file"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot file_wrapper_slots[] = {
    {Py_tp_new, file_wrapper_new},
    {Py_tp_dealloc, file_wrapper_dealloc},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, file_wrapper_iternext},
    {Py_tp_methods, file_wrapper_methods},
    {Py_tp_doc, "wsgi.file_wrapper(filelike, block_size=8192): sent by the server with sendfile"},
    {0, NULL},
};

static PyType_Spec file_wrapper_spec = {
    "turnstile.FileWrapper", sizeof(FileWrapper), 0, Py_TPFLAGS_DEFAULT,
    file_wrapper_slots,
};

/* ts_wsgi_try_sendfile hands a file_wrapper over a regular file to Go: dup
 * its fd from the current position. Returns 1 if taken, 0 to iterate
 * instead; no exception set either way. Attached. */
int
ts_wsgi_try_sendfile(ts_wsgi_job *job, FileWrapper *fw)
{
    PyObject *r = PyObject_CallMethodNoArgs(fw->filelike, str_fileno);
    struct stat stt;
    long fd;
    off_t pos;
    int dupfd;
    int64_t count;

    if (r == NULL) {
        PyErr_Clear();
        return 0;
    }
    fd = PyLong_AsLong(r);
    Py_DECREF(r);
    if (fd < 0) {
        PyErr_Clear();
        return 0;
    }
    /* A buffered file object may hold read-ahead: use tell() for the
     * logical position. */
    r = PyObject_CallMethod(fw->filelike, "tell", NULL);
    if (r == NULL) {
        PyErr_Clear();
        return 0;
    }
    pos = (off_t)PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (pos < 0 || fstat((int)fd, &stt) < 0 || !S_ISREG(stt.st_mode)) {
        PyErr_Clear();
        return 0;
    }
    count = stt.st_size > pos ? (int64_t)(stt.st_size - pos) : 0;
    if (job->content_length >= 0 && job->content_length < count) {
        count = job->content_length;
    }
    dupfd = fcntl((int)fd, F_DUPFD_CLOEXEC, 0);
    if (dupfd < 0) {
        return 0;
    }
    job->file_fd = dupfd;
    job->file_offset = pos;
    job->file_count = count;
    job->result = TS_WSGI_FILE;
    return 1;
}

int
ts_wsgi_file_wrapper_setup(void)
{
    str_close = PyUnicode_InternFromString("close");
    str_fileno = PyUnicode_InternFromString("fileno");
    if (str_close == NULL || str_fileno == NULL) {
        return -1;
    }
    ts_wsgi_file_wrapper_type = (PyTypeObject *)PyType_FromSpec(&file_wrapper_spec);
    return ts_wsgi_file_wrapper_type == NULL ? -1 : 0;
}

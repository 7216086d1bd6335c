/* environ.c: the WSGI environ dict, built in one pass (PEP 3333,
 * "environ Variables").
 *
 * Notes about the implementation
 * ------------------------------
 * Go validated and wrote the request block (environ.go, the layout in
 * wsgi.h): here each entry becomes a key and a value of a copy of the
 * template, with no parsing. Keys Go knows by id are interned once at
 * setup (ts_wsgi_register_keys, then ts_wsgi_environ_setup), so a
 * request allocates only its values; "https" as wsgi.url_scheme is shared
 * too. Values are decoded as latin-1 (PEP 3333, "Unicode Issues").
 */
#include "wsgi.h"

#include <stdlib.h>
#include <string.h>

static const char **key_names;
static int key_count;
static PyObject **key_objs;          /* interned environ keys by id-1 */
static PyObject *environ_template;   /* wsgi.* constants */
static int url_scheme_id;            /* id of "wsgi.url_scheme", 0 if none */
static PyObject *str_https;          /* its value on TLS or behind a proxy */
static PyObject *errors_stream;

/* ENVIRON_PRESIZE is the number of entries an environ holds without
 * growing: the 8 wsgi.* constants, CGI's ~12 keys and ~20 header fields. */
#define ENVIRON_PRESIZE 40

void
ts_wsgi_register_keys(const char **names, int n)
{
    key_names = names;
    key_count = n;
}

/* ts_wsgi_environ returns a new dict: the template, then every entry of the
 * request block. New reference, or NULL with an exception set. Attached. */
PyObject *
ts_wsgi_environ(ts_wsgi_job *job)
{
    PyObject *env = PyDict_Copy(environ_template);
    const char *p = job->req;
    int i;

    if (env == NULL) {
        return NULL;
    }
    for (i = 0; i < job->nentries; i++) {
        ts_entry e;
        PyObject *key, *val;
        int rc;

        p = ts_entry_next(p, &e);
        if (e.id > 0 && e.id <= key_count) {
            key = Py_NewRef(key_objs[e.id - 1]);
        }
        else {
            key = PyUnicode_DecodeLatin1(e.key, e.klen, NULL);
        }
        if (e.id == url_scheme_id && e.id > 0 && e.vlen == 5 && memcmp(e.val, "https", 5) == 0) {
            val = Py_NewRef(str_https);
        }
        else {
            val = PyUnicode_DecodeLatin1(e.val, e.vlen, NULL);
        }
        if (key == NULL || val == NULL) {
            Py_XDECREF(key);
            Py_XDECREF(val);
            Py_DECREF(env);
            return NULL;
        }
        rc = PyDict_SetItem(env, key, val);
        Py_DECREF(key);
        Py_DECREF(val);
        if (rc < 0) {
            Py_DECREF(env);
            return NULL;
        }
    }
    return env;
}

/* ts_wsgi_environ_setup interns the known keys and builds the template
 * (the wsgi.* constants, wsgi.errors, wsgi.file_wrapper). 0, or -1 with
 * an exception set. Main thread, attached, after the types exist. */
int
ts_wsgi_environ_setup(void)
{
    int i;
    PyObject *version, *scheme;

    key_objs = calloc(key_count > 0 ? key_count : 1, sizeof(PyObject *));
    if (key_objs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (i = 0; i < key_count; i++) {
        key_objs[i] = PyUnicode_InternFromString(key_names[i]);
        if (key_objs[i] == NULL) {
            return -1;
        }
        if (strcmp(key_names[i], "wsgi.url_scheme") == 0) {
            url_scheme_id = i + 1;
        }
    }
    str_https = PyUnicode_InternFromString("https");
    if (str_https == NULL) {
        return -1;
    }
    errors_stream = PyObject_GetAttrString(ts_bootstrap, "wsgi_errors");
    if (errors_stream == NULL) {
        return -1;
    }
    /* Presized: PyDict_Copy clones the template's key table at its size,
     * so an environ of up to ENVIRON_PRESIZE entries never resizes while
     * the request's entries go in (two resizes per request otherwise). */
    environ_template = _PyDict_NewPresized(ENVIRON_PRESIZE);
    version = Py_BuildValue("(ii)", 1, 0);
    scheme = PyUnicode_InternFromString("http");
    if (environ_template == NULL || version == NULL || scheme == NULL) {
        return -1;
    }
    if (PyDict_SetItemString(environ_template, "wsgi.version", version) < 0
        || PyDict_SetItemString(environ_template, "wsgi.url_scheme", scheme) < 0
        || PyDict_SetItemString(environ_template, "wsgi.errors", errors_stream) < 0
        || PyDict_SetItemString(environ_template, "wsgi.multithread", Py_True) < 0
        || PyDict_SetItemString(environ_template, "wsgi.multiprocess",
                                ts_workers > 1 ? Py_True : Py_False) < 0
        || PyDict_SetItemString(environ_template, "wsgi.run_once", Py_False) < 0
        || PyDict_SetItemString(environ_template, "wsgi.input_terminated", Py_True) < 0
        || PyDict_SetItemString(environ_template, "wsgi.file_wrapper",
                                (PyObject *)ts_wsgi_file_wrapper_type) < 0) {
        return -1;
    }
    Py_DECREF(version);
    Py_DECREF(scheme);
    return 0;
}

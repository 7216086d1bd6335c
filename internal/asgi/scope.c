/* scope.c: the HTTP and WebSocket connection scopes (ASGI HTTP and
 * WebSocket, "Connection Scope").
 *
 * Notes about the implementation
 * ------------------------------
 * Go writes the request block (reqblock layout, TS_SC_* entry ids) into
 * the slot before it pushes TS_EV_NEW or TS_EV_WS_NEW; the loop thread
 * builds the scope dict from it in one pass. Keys, constant values and
 * the common methods are interned once per process (ts_scope_setup) and
 * shared by the loops; the lifespan state copied into each scope is the
 * loop's own (ts_loop.state).
 */
#include "asgi.h"

#include <string.h>

static PyObject *s_type, *s_http, *s_asgi, *asgi_template, *s_http_version,
    *s_method, *s_scheme, *s_path, *s_raw_path, *s_query_string, *s_root_path,
    *s_headers, *s_client, *s_server, *s_state, *s_extensions, *s_http_scheme,
    *s_v11, *s_v10, *s_v2, *s_v3, *extensions_template;
static PyObject *s_https_scheme, *s_wss_scheme;
static PyObject *s_tls, *s_tls_version, *s_cipher_suite, *s_server_cert, *s_client_cert_chain,
    *s_client_cert_name, *s_client_cert_error;
static PyObject *s_websocket, *s_ws_scheme, *s_subprotocols, *ws_asgi_template,
    *ws_extensions_template;
static PyObject *methods[8];
static const char *method_names[8] = {"GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS", NULL};


static PyObject *
method_str(const char *p, size_t n)
{
    int i;
    for (i = 0; method_names[i] != NULL; i++) {
        if (strlen(method_names[i]) == n && memcmp(method_names[i], p, n) == 0) {
            return Py_NewRef(methods[i]);
        }
    }
    return PyUnicode_DecodeLatin1(p, n, NULL);
}

static PyObject *
port_obj(const char *p, size_t n)
{
    long v = 0;
    size_t i;
    if (n == 0) {
        Py_RETURN_NONE;
    }
    for (i = 0; i < n; i++) {
        v = v * 10 + (p[i] - '0');
    }
    return PyLong_FromLong(v);
}

/* untracked takes a new tuple of strings, bytes and ints (or NULL) out of
 * the cycle collector, as the collector itself would at its first pass
 * (such a tuple can be in no cycle): a request's scope holds several, and
 * while many requests are in flight each collection would walk them. */
static PyObject *
untracked(PyObject *t)
{
    if (t != NULL) {
        PyObject_GC_UnTrack(t);
    }
    return t;
}

/* tls_set sets d[k] = v, stealing v (NULL: an error is set). */
static int
tls_set(PyObject *d, PyObject *k, PyObject *v)
{
    int rc;
    if (v == NULL) {
        return -1;
    }
    rc = PyDict_SetItem(d, k, v);
    Py_DECREF(v);
    return rc;
}

/* bytes_pair returns the header tuple (name, value), untracked. */
static PyObject *
bytes_pair(const char *k, size_t klen, const char *v, size_t vlen)
{
    PyObject *t = PyTuple_New(2), *b;

    if (t == NULL) {
        return NULL;
    }
    if ((b = PyBytes_FromStringAndSize(k, (Py_ssize_t)klen)) == NULL) {
        Py_DECREF(t);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, b);
    if ((b = PyBytes_FromStringAndSize(v, (Py_ssize_t)vlen)) == NULL) {
        Py_DECREF(t);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 1, b);
    return untracked(t);
}

/* ts_build_scope returns a new scope dict for s's request block on loop: the HTTP
 * connection scope, or with websocket the WebSocket one (ASGI WebSocket,
 * "Connection Scope": no method; subprotocols from TS_SC_SUBPROTOCOL
 * entries; the denial response extension). */
PyObject *
ts_build_scope(ts_loop *loop, ts_asgi_slot *s, int websocket)
{
    /* presized for the ~14 keys below (no two resizes per request) */
    PyObject *scope = _PyDict_NewPresized(16), *headers = PyList_New(0), *v;
    PyObject *chost = NULL, *cport = NULL, *shost = NULL, *sport = NULL;
    PyObject *subprotocols = NULL, *tls = NULL, *chain = NULL, *ext = NULL;
    const char *p = s->req;
    int i, rc = 0;

    s->head_request = 0;  /* set below from the method; a slot serves many requests */
    if (scope == NULL || headers == NULL) {
        goto error;
    }
#define SET(k, val) do { v = (val); if (v == NULL || PyDict_SetItem(scope, (k), v) < 0) { Py_XDECREF(v); goto error; } Py_DECREF(v); } while (0)
    if (websocket) {
        subprotocols = PyList_New(0);
        if (subprotocols == NULL) {
            goto error;
        }
        SET(s_type, Py_NewRef(s_websocket));
        SET(s_asgi, PyDict_Copy(ws_asgi_template));
        SET(s_scheme, Py_NewRef(s_ws_scheme));
    }
    else {
        SET(s_type, Py_NewRef(s_http));
        SET(s_asgi, PyDict_Copy(asgi_template));
        SET(s_scheme, Py_NewRef(s_http_scheme));
    }
    for (i = 0; i < s->nentries; i++) {
        ts_entry e;
        const char *key, *val;
        size_t klen, vlen;

        p = ts_entry_next(p, &e);
        key = e.key;
        klen = e.klen;
        val = e.val;
        vlen = e.vlen;
        switch (e.id) {
        case 0: {
            PyObject *pair = bytes_pair(key, klen, val, vlen);
            if (pair == NULL) {
                goto error;
            }
            rc = PyList_Append(headers, pair);
            Py_DECREF(pair);
            if (rc < 0) {
                goto error;
            }
            break;
        }
        case TS_SC_METHOD:
            if (!websocket) {  /* the websocket scope has no method */
                SET(s_method, method_str(val, vlen));
                s->head_request = vlen == 4 && memcmp(val, "HEAD", 4) == 0;
            }
            break;
        case TS_SC_PATH:
            SET(s_path, PyUnicode_DecodeUTF8(val, vlen, "replace"));
            break;
        case TS_SC_RAW_PATH:
            SET(s_raw_path, PyBytes_FromStringAndSize(val, vlen));
            break;
        case TS_SC_QUERY:
            SET(s_query_string, PyBytes_FromStringAndSize(val, vlen));
            break;
        case TS_SC_ROOT_PATH:
            SET(s_root_path, PyUnicode_DecodeUTF8(val, vlen, "replace"));
            break;
        case TS_SC_HTTP_VERSION:
            SET(s_http_version, Py_NewRef(vlen == 1 ? (val[0] == '3' ? s_v3 : s_v2) /* HTTP/3, HTTP/2 */
                                          : vlen == 3 && val[2] == '0' ? s_v10 : s_v11));
            break;
        case TS_SC_CLIENT_HOST:
            chost = PyUnicode_DecodeLatin1(val, vlen, NULL);
            break;
        case TS_SC_CLIENT_PORT:
            cport = port_obj(val, vlen);
            break;
        case TS_SC_SERVER_HOST:
            shost = PyUnicode_DecodeLatin1(val, vlen, NULL);
            break;
        case TS_SC_SERVER_PORT:
            sport = port_obj(val, vlen);
            break;
        case TS_SC_SCHEME:  /* sent only for https (TLS or a trusted proxy) */
            if (vlen == 5 && memcmp(val, "https", 5) == 0) {
                SET(s_scheme, Py_NewRef(websocket ? s_wss_scheme : s_https_scheme));
            }
            break;
        case TS_SC_SUBPROTOCOL:
            if (subprotocols != NULL) {
                PyObject *proto = PyUnicode_DecodeLatin1(val, vlen, NULL);
                if (proto == NULL) {
                    goto error;
                }
                rc = PyList_Append(subprotocols, proto);
                Py_DECREF(proto);
                if (rc < 0) {
                    goto error;
                }
            }
            break;
        case TS_SC_TLS_VERSION:
            if (tls == NULL) {
                chain = PyList_New(0);
                tls = chain == NULL ? NULL
                    : Py_BuildValue("{O:O,O:O,O:O,O:O,O:O,O:i}", s_server_cert, Py_None,
                                    s_client_cert_chain, chain, s_client_cert_name, Py_None,
                                    s_client_cert_error, Py_None, s_cipher_suite, Py_None,
                                    s_tls_version, 0);
                if (tls == NULL) {
                    goto error;
                }
            }
            if (tls_set(tls, s_tls_version, port_obj(val, vlen)) < 0) {
                goto error;
            }
            break;
        case TS_SC_TLS_CIPHER:
            if (tls != NULL && tls_set(tls, s_cipher_suite, port_obj(val, vlen)) < 0) {
                goto error;
            }
            break;
        case TS_SC_TLS_SERVER_CERT:
            if (tls != NULL && tls_set(tls, s_server_cert, PyUnicode_DecodeLatin1(val, vlen, NULL)) < 0) {
                goto error;
            }
            break;
        case TS_SC_TLS_CLIENT_CERT:
            if (chain != NULL) {
                PyObject *pem = PyUnicode_DecodeLatin1(val, vlen, NULL);
                if (pem == NULL) {
                    goto error;
                }
                rc = PyList_Append(chain, pem);
                Py_DECREF(pem);
                if (rc < 0) {
                    goto error;
                }
            }
            break;
        case TS_SC_TLS_CLIENT_NAME:
            if (tls != NULL && tls_set(tls, s_client_cert_name, PyUnicode_DecodeUTF8(val, vlen, "replace")) < 0) {
                goto error;
            }
            break;
        default:
            break;
        }
    }
    SET(s_headers, Py_NewRef(headers));
    if (subprotocols != NULL) {
        SET(s_subprotocols, Py_NewRef(subprotocols));
    }
    if (chost != NULL && cport != NULL && cport != Py_None) {
        SET(s_client, untracked(PyTuple_Pack(2, chost, cport)));
    }
    else {
        SET(s_client, Py_NewRef(Py_None));  /* a Unix socket peer has no address */
    }
    if (shost != NULL && sport != NULL) {
        SET(s_server, untracked(PyTuple_Pack(2, shost, sport)));
    }
    if (loop->state != NULL) {
        SET(s_state, PyDict_Copy(loop->state));
    }
    ext = PyDict_Copy(websocket ? ws_extensions_template : extensions_template);
    if (ext == NULL || (tls != NULL && PyDict_SetItem(ext, s_tls, tls) < 0)) {
        goto error;
    }
    SET(s_extensions, Py_NewRef(ext));
#undef SET
    Py_DECREF(ext);
    Py_XDECREF(tls);
    Py_XDECREF(chain);
    Py_XDECREF(chost);
    Py_XDECREF(cport);
    Py_XDECREF(shost);
    Py_XDECREF(sport);
    Py_XDECREF(subprotocols);
    Py_DECREF(headers);
    return scope;

error:
    Py_XDECREF(ext);
    Py_XDECREF(tls);
    Py_XDECREF(chain);
    Py_XDECREF(subprotocols);
    Py_XDECREF(chost);
    Py_XDECREF(cport);
    Py_XDECREF(shost);
    Py_XDECREF(sport);
    Py_XDECREF(headers);
    Py_XDECREF(scope);
    return NULL;
}

/* ts_scope_setup creates the scope's interned keys and templates, once per
 * process (under ts_asgi_setup). 0, or -1 with an exception. */
int
ts_scope_setup(void)
{
    PyObject *v;
    int i;

#define INTERN(var, text) do { var = PyUnicode_InternFromString(text); if (var == NULL) return -1; } while (0)
    INTERN(s_type, "type");
    INTERN(s_http, "http");
    INTERN(s_asgi, "asgi");
    INTERN(s_http_version, "http_version");
    INTERN(s_method, "method");
    INTERN(s_scheme, "scheme");
    INTERN(s_path, "path");
    INTERN(s_raw_path, "raw_path");
    INTERN(s_query_string, "query_string");
    INTERN(s_root_path, "root_path");
    INTERN(s_headers, "headers");
    INTERN(s_client, "client");
    INTERN(s_server, "server");
    INTERN(s_state, "state");
    INTERN(s_extensions, "extensions");
    INTERN(s_http_scheme, "http");
    INTERN(s_v11, "1.1");
    INTERN(s_v10, "1.0");
    INTERN(s_v2, "2");
    INTERN(s_v3, "3");
    INTERN(s_tls, "tls");
    INTERN(s_tls_version, "tls_version");
    INTERN(s_cipher_suite, "cipher_suite");
    INTERN(s_server_cert, "server_cert");
    INTERN(s_client_cert_chain, "client_cert_chain");
    INTERN(s_client_cert_name, "client_cert_name");
    INTERN(s_client_cert_error, "client_cert_error");
    INTERN(s_websocket, "websocket");
    INTERN(s_ws_scheme, "ws");
    INTERN(s_https_scheme, "https");
    INTERN(s_wss_scheme, "wss");
    INTERN(s_subprotocols, "subprotocols");
#undef INTERN
    for (i = 0; method_names[i] != NULL; i++) {
        methods[i] = PyUnicode_InternFromString(method_names[i]);
        if (methods[i] == NULL) {
            return -1;
        }
    }
    asgi_template = Py_BuildValue("{s:s,s:s}", "version", "3.0", "spec_version", "2.4");
    /* 2.5: websocket.disconnect carries reason */
    ws_asgi_template = Py_BuildValue("{s:s,s:s}", "version", "3.0", "spec_version", "2.5");
    ws_extensions_template = Py_BuildValue("{s:{}}", "websocket.http.response");
    extensions_template = PyDict_New();
    if (asgi_template == NULL || extensions_template == NULL || ws_asgi_template == NULL
        || ws_extensions_template == NULL) {
        return -1;
    }
    v = PyDict_New();
    if (v == NULL || PyDict_SetItemString(extensions_template, "http.response.pathsend", v) < 0) {
        Py_XDECREF(v);
        return -1;
    }
    Py_DECREF(v);
    v = PyDict_New();  /* send.c: a 103 Early Hints before the head */
    if (v == NULL || PyDict_SetItemString(extensions_template, "http.response.early_hint", v) < 0) {
        Py_XDECREF(v);
        return -1;
    }
    Py_DECREF(v);
    v = PyDict_New();  /* send.c: a trailer section after the body */
    if (v == NULL || PyDict_SetItemString(extensions_template, "http.response.trailers", v) < 0) {
        Py_XDECREF(v);
        return -1;
    }
    Py_DECREF(v);
    return 0;
}

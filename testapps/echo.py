"""Echo app for the HTTP/1.1 conformance tests: answers, as JSON, the
request facts a case needs, and prints "APP-SEEN <path>" for every request
it sees so a test can prove a smuggled request never reached the app.
A query "connection=V" adds the response header Connection: V
(tests/http1_test.go, TestHTTP1_AppConnectionClose)."""

import json


def app(environ, start_response):
    path = environ["PATH_INFO"]
    print("APP-SEEN", path, flush=True)
    body = environ["wsgi.input"].read()
    headers = {k: v for k, v in environ.items() if k.startswith("HTTP_")}
    out = json.dumps(
        {
            "method": environ["REQUEST_METHOD"],
            "path": path,
            "query": environ["QUERY_STRING"],
            "headers": headers,
            "body_len": len(body),
        }
    ).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(out)))]
    if environ["QUERY_STRING"].startswith("connection="):
        headers.append(("Connection", environ["QUERY_STRING"][len("connection="):].replace("%20", " ")))
    start_response("200 OK", headers)
    return [out]

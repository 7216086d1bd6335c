"""Case B34 (GIL convoy): /cpu runs a pure-Python loop of about 3 s of CPU
(time.thread_time advanced by 3 s; ?s= changes it), /io answers ok."""
import time
from urllib.parse import parse_qs


def app(environ, start_response):
    if environ.get("PATH_INFO") == "/cpu":
        s = float(parse_qs(environ.get("QUERY_STRING", "")).get("s", ["3"])[0])
        end = time.thread_time() + s
        n = 0
        while time.thread_time() < end:
            n += 1
        body = b"cpu %d\n" % n
    else:
        body = b"ok\n"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

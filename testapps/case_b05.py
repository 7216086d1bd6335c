"""B05: unicode in the path. Answers PATH_INFO as UTF-8 text and RAW_URI."""

import json


def app(environ, start_response):
    raw = environ["PATH_INFO"]
    try:
        path = raw.encode("latin-1").decode("utf-8")
    except UnicodeError as exc:  # reported, so the test can say what was wrong
        path = f"not latin-1 bytes-in-str: {exc}"
    body = json.dumps({"path": path, "path_info_latin1": raw.encode("latin-1", "replace").hex(),
                       "raw_uri": environ.get("RAW_URI")}, ensure_ascii=False).encode("utf-8")
    start_response("200 OK", [("Content-Type", "application/json; charset=utf-8")])
    return [body]

"""An ASGI 2 application class (tests/asgi_test.go, TestASGI_ASGI2Class):
instantiated with the scope, then called with receive and send."""


class App:
    def __init__(self, scope):
        assert scope["type"] == "http", "asgi2_app only speaks http"
        self.scope = scope

    async def __call__(self, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"asgi2 " + self.scope["path"].encode()})

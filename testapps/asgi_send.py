"""The ways apps call send() (tests/asgi_test.go, TestASGI_SendForms).

turnstile's send is a C callable returning a finished awaitable, not a
coroutine function: each route answers 200 with its name when send() works
the way an app uses it.

/await      await send(message)
/task       asyncio.create_task(send(message)), then await the task
/gather     asyncio.gather(send(start)), asyncio.wait_for(send(body), 5)
/mapping    the messages are a Mapping that is not a dict
/kwargs     send(message=...), as for an async def send(message); send(x=...)
            raises TypeError
/check      asyncio.iscoroutine and inspect.isawaitable of a send's result
"""

import asyncio
import inspect
from collections.abc import Mapping


class Message(Mapping):
    def __init__(self, **kw):
        self._d = kw

    def __getitem__(self, key):
        return self._d[key]

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)


def start():
    return {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}


def body(text):
    return {"type": "http.response.body", "body": text.encode()}


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    route = scope["path"].strip("/")
    if route == "await":
        await send(start())
        await send(body(route))
    elif route == "task":
        await asyncio.create_task(send(start()))
        await asyncio.ensure_future(send(body(route)))
    elif route == "gather":
        await asyncio.gather(send(start()))
        await asyncio.wait_for(send(body(route)), 5)
    elif route == "mapping":
        await send(Message(type="http.response.start", status=200, headers=[(b"content-type", b"text/plain")]))
        await send(Message(type="http.response.body", body=route.encode()))
    elif route == "kwargs":
        try:
            await send(x=start())
        except TypeError:
            pass
        else:
            raise AssertionError("send(x=...) was accepted")
        await send(message=start())
        await send(message=body(route))
    elif route == "check":
        sent = send(start())
        text = "%s %s" % (asyncio.iscoroutine(sent), inspect.isawaitable(sent))
        await sent
        await send(body(text))

import os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djust_site.settings")
from django.core.asgi import get_asgi_application
http_app = get_asgi_application()
if os.environ.get("DJUST_POOLED_HTTP"):  # djust 1.3's own HTTP pool (tests/asgi_pools_test.go)
    from djust.worker_pool import PooledHTTP
    http_app = PooledHTTP(http_app, threads=int(os.environ["DJUST_POOLED_HTTP"]))
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.auth import AuthMiddlewareStack
from django.urls import path
from djust.websocket import LiveViewConsumer
application = ProtocolTypeRouter({
    "http": http_app,
    "websocket": AuthMiddlewareStack(URLRouter([path("ws/live/", LiveViewConsumer.as_asgi())])),
})

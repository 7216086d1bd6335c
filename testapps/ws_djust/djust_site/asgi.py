import os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djust_site.settings")
from django.core.asgi import get_asgi_application
http_app = get_asgi_application()
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.auth import AuthMiddlewareStack
from django.urls import path
from djust.websocket import LiveViewConsumer
application = ProtocolTypeRouter({
    "http": http_app,
    "websocket": AuthMiddlewareStack(URLRouter([path("ws/live/", LiveViewConsumer.as_asgi())])),
})

"""ASGI entry point: asgi_django.asgi:application."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "asgi_django.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

application = get_asgi_application()

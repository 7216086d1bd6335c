"""A single-file Django project: one view rendering a tiny template.

Settings are configured in code; no database, no installed apps. The
template comes from the in-memory loader, so the file stands alone.
Serve it as `djangoapp:app`.
"""

from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="bench-only-not-secret",
    ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    ROOT_URLCONF=__name__,
    DATABASES={},
    INSTALLED_APPS=[],
    MIDDLEWARE=[
        "django.middleware.security.SecurityMiddleware",
        "django.middleware.common.CommonMiddleware",
    ],
    USE_TZ=True,
    TEMPLATES=[
        {
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "OPTIONS": {
                "loaders": [
                    (
                        "django.template.loaders.locmem.Loader",
                        {
                            "hello.html": (
                                "<!doctype html><title>{{ title }}</title>"
                                "<h1>{{ greeting }}, {{ name }}!</h1>"
                                "<ul>{% for item in items %}<li>{{ item }}</li>{% endfor %}</ul>"
                            ),
                        },
                    )
                ],
            },
        }
    ],
)

import django  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.shortcuts import render  # noqa: E402
from django.urls import path  # noqa: E402


def hello(request):
    return render(
        request,
        "hello.html",
        {"title": "bench", "greeting": "Hello", "name": "World", "items": [1, 2, 3]},
    )


urlpatterns = [path("", hello)]

django.setup()
app = get_wsgi_application()

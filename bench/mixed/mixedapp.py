"""Issue 4's mixed workload: a single-file Django project (settings in code,
no database; same shape as bench/apps/djangoapp.py) with a fast view and
two slow ones.

/           fast: renders a tiny template (as djangoapp.py)
/slow-sleep time.sleep(0.2): releases the GIL
/slow-cpu   200 ms of pure-Python CPU (time.thread_time advanced by 0.2 s)
"""

import time

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
    TEMPLATES=[{
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "OPTIONS": {"loaders": [(
            "django.template.loaders.locmem.Loader",
            {"hello.html": "<!doctype html><title>{{ title }}</title>"
                           "<h1>{{ greeting }}, {{ name }}!</h1>"
                           "<ul>{% for item in items %}<li>{{ item }}</li>{% endfor %}</ul>"},
        )]},
    }],
)

import django  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.shortcuts import render  # noqa: E402
from django.urls import path  # noqa: E402


def fast(request):
    return render(request, "hello.html",
                  {"title": "bench", "greeting": "Hello", "name": "World", "items": [1, 2, 3]})


def slow_sleep(request):
    time.sleep(0.2)
    return HttpResponse(b"slept\n", content_type="text/plain")


def slow_cpu(request):
    end = time.thread_time() + 0.2
    n = 0
    while time.thread_time() < end:
        n += 1
    return HttpResponse(b"cpu %d\n" % n, content_type="text/plain")


urlpatterns = [path("", fast), path("slow-sleep", slow_sleep), path("slow-cpu", slow_cpu)]

django.setup()
app = get_wsgi_application()

"""A minimal djust (Django LiveView over Channels) site for tests/websocket_test.go: TestWS_Djust.

Serve djust_site.asgi:application with --app-dir testapps/ws_djust. Sessions
are signed cookies and the database is in memory: nothing touches disk.
"""
import os
SECRET_KEY = "test-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "channels",
    "djust",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "djust_site.urls"
ASGI_APPLICATION = "djust_site.asgi.application"
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# turnstile's own layer (tests/chlayer_test.go, TestChannelLayer_DjustPush)
if os.environ.get("DJUST_LAYER") == "turnstile":
    CHANNEL_LAYERS = {"default": {"BACKEND": "turnstile.channels.ChannelLayer"}}
# djust's own layer for several loops (tests/chlayer_loops_test.go)
if os.environ.get("DJUST_LAYER") == "multiloop":
    CHANNEL_LAYERS = {"default": {"BACKEND": "djust.layers.MultiLoopInMemoryChannelLayer"}}
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "DIRS": [], "APP_DIRS": True,
              "OPTIONS": {"context_processors": ["django.template.context_processors.request"]}}]
USE_TZ = True
LIVEVIEW_ALLOWED_MODULES = ["djust_site"]
# djust 1.3's own WebSocket pool (tests/asgi_pools_test.go): DJUST_WORKER_THREADS=N
import os as _os
if _os.environ.get("DJUST_WORKER_THREADS"):
    LIVEVIEW_CONFIG = {"worker_threads": int(_os.environ["DJUST_WORKER_THREADS"])}

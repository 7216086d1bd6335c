"""A tiny Django project served through Django's ASGI handler
(get_asgi_application) for tests/asgi_frameworks_test.go
(TestDjangoASGI_*). No database: sessions are not used and flash messages
live in a cookie."""

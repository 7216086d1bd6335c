"""A tiny Django project for the end-to-end tests (tests/frameworks_test.go).

Settings live in code (settings.py). The database is the SQLite file named
by $TURNSTILE_TEST_DB; tests that need tables run `migrate` into a temporary
file first. Without it the database is in memory and empty, which is enough
for every view except the admin's.
"""

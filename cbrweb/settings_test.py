"""Test settings: the real settings, with fast password hashing. Storage paths are set per test
by fixtures (tests/conftest.py); databases and Redis come from DATABASE_URL / REDIS_URL."""

from cbrweb.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# A worker started by the integration tests must see the test database: for SQLite that needs a
# file, not pytest-django's default in-memory database.
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}  # noqa: F405

# The live server's thread must not hold a connection past its requests: the test database is
# dropped at the end of the run.
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405

# Failed sign-ins are counted per test process (a test clears them); the real settings share
# the count through Redis.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

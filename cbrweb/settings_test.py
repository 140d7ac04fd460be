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

# What reads and acks remember of their group (groups/consuming/floors.py GROUPS_READ) is kept only
# while the process's listener is subscribed, which an earlier test of this process may or may not
# have started: off here, so that what a request asks the database does not depend on that. Its
# own tests turn it on (tests/api/test_group_lookup_memo.py), and the servers the integration
# tests start run the real settings, with it on.
CBR_GROUP_CACHE_S = 0

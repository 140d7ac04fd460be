"""Test settings: the real settings, with fast password hashing. Storage paths are set per test
by fixtures (tests/conftest.py); databases and Redis come from DATABASE_URL / REDIS_URL."""

from .settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = False

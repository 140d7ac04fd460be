"""The process's Redis client for REDIS_URL (one connection pool per URL)."""

from __future__ import annotations

import functools

import redis
from django.conf import settings


@functools.cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def get_redis() -> redis.Redis:
    return _client(settings.REDIS_URL)

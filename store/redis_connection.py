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


def as_text(reply: bytes | str) -> str:
    """A reply as text. This client does not decode its replies (they are bytes); the stubs also
    allow for a client that does."""
    return reply.decode() if isinstance(reply, bytes) else reply


def as_bytes(reply: bytes | str) -> bytes:
    """A reply as bytes (see `as_text`)."""
    return reply if isinstance(reply, bytes) else reply.encode()

"""API credentials' lookups remembered per web process: `Authorization: Token <key>` (DRF's
token authentication) and `Api-Key` keys (access/authentication.py). Consumers send a read and an
ack per batch, and the lookup was ~1 ms of each. It must never let a revoked credential or a
deactivated user in: a token, key or user saved or deleted anywhere (through the ORM) moves a
generation counter in Redis, and a remembered lookup counts only while the counter is the one it
was made under (one Redis GET per request, ~20x cheaper than the lookup), and for at most
`CBR_TOKEN_CACHE_S` seconds, the bound for changes that bypass saves (`QuerySet.update`). Without
Redis nothing is remembered. Failed lookups are never remembered."""

from __future__ import annotations

import copy
import threading
import time

import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

from access.models import ApiKey
from store.redis_connection import as_bytes, get_redis

MAX_KEYS = 1024  # a bound, not a tuning: past it the cache starts again empty

GENERATION = "cbr:credentials:generation"

# key → (valid until, the generation it was made under, user or None, token or API key)
_known: dict[str, tuple[float, bytes, object, object]] = {}
_lock = threading.Lock()


def _generation() -> bytes | None:
    """The credentials' generation now; None when Redis does not answer (nothing is trusted)."""
    if settings.CBR_TOKEN_CACHE_S <= 0:
        return None
    try:
        return as_bytes(get_redis().get(GENERATION) or b"0")
    except redis.RedisError:
        return None


def _hit(key: str) -> tuple[tuple | None, bytes | None]:
    """(the remembered (user, credential) or None, the generation now)."""
    entry = _known.get(key)
    if entry is None:
        return None, _generation()
    generation = _generation()
    if generation is not None and entry[1] == generation and entry[0] > time.monotonic():
        return (entry[2], entry[3]), generation
    return None, generation


def _keep(key: str, generation: bytes | None, user, credential) -> None:
    if generation is None:
        return
    with _lock:
        if len(_known) >= MAX_KEYS:
            _known.clear()
        _known[key] = (time.monotonic() + settings.CBR_TOKEN_CACHE_S, generation, user, credential)


class RememberedApiKeys:
    """For access/authentication.py: `find(key)` → (the API key or None, a ticket for `keep`)."""

    @staticmethod
    def find(key: str):
        hit, generation = _hit("api-key:" + key)
        return (hit[1] if hit else None), generation

    @staticmethod
    def keep(key: str, generation, api_key) -> None:
        _keep("api-key:" + key, generation, None, api_key)


class CachedTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key):
        hit, generation = _hit("token:" + key)
        if hit is not None:
            user, token = hit
        else:
            user, token = super().authenticate_credentials(key)  # 401 for unknown keys and inactive users
            _keep("token:" + key, generation, user, token)
        # a copy per request: whatever a request notes on its user (a role, say) stays its own
        return copy.copy(user), token


def forget_tokens(**_kwargs) -> None:
    """Every process stops trusting what it remembers (this one at once, even without Redis)."""
    with _lock:
        _known.clear()
    _move_generation()
    # again once the change is committed: a lookup made in between read the old row
    transaction.on_commit(_move_generation)


def _move_generation() -> None:
    try:
        get_redis().incr(GENERATION)
    except redis.RedisError:
        pass  # the others' lookups run out within CBR_TOKEN_CACHE_S


post_delete.connect(forget_tokens, sender=Token, dispatch_uid="cbr-token-cache-token-deleted")
post_save.connect(forget_tokens, sender=Token, dispatch_uid="cbr-token-cache-token-saved")
post_save.connect(forget_tokens, sender=get_user_model(), dispatch_uid="cbr-token-cache-user-saved")
post_delete.connect(forget_tokens, sender=get_user_model(), dispatch_uid="cbr-token-cache-user-deleted")
post_save.connect(forget_tokens, sender=ApiKey, dispatch_uid="cbr-token-cache-key-saved")
post_delete.connect(forget_tokens, sender=ApiKey, dispatch_uid="cbr-token-cache-key-deleted")
m2m_changed.connect(forget_tokens, sender=ApiKey.streams.through, dispatch_uid="cbr-token-cache-key-streams")

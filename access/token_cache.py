"""`Authorization: Token <key>` (DRF's token authentication) with each key's lookup remembered
for `CBR_TOKEN_CACHE_S` seconds per web process: consumers send a read and an ack per batch, and
the key's query was ~1 ms of each. It must never let a revoked token or a deactivated user in for
longer than that: a token deleted or a user saved in this process empties the cache at once,
other processes follow within `CBR_TOKEN_CACHE_S`. Failed lookups are never remembered."""

from __future__ import annotations

import copy
import threading
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

MAX_KEYS = 1024  # a bound, not a tuning: past it the cache starts again empty

_known: dict[str, tuple[float, object, Token]] = {}  # key → (valid until, user, token)
_lock = threading.Lock()
_generation = 0  # moves on each `forget_tokens`: a lookup that began before one is not kept


class CachedTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key):
        ttl = settings.CBR_TOKEN_CACHE_S
        now = time.monotonic()
        hit = _known.get(key)
        if hit is not None and hit[0] > now:
            user, token = hit[1], hit[2]
        else:
            generation = _generation
            user, token = super().authenticate_credentials(key)  # 401 for unknown keys and inactive users
            if ttl > 0:
                with _lock:
                    if len(_known) >= MAX_KEYS:
                        _known.clear()
                    # a token deleted or a user saved during the lookup: it may have seen the row
                    # before that change, so it answers this request only
                    if generation == _generation:
                        _known[key] = (now + ttl, user, token)
        # a copy per request: whatever a request notes on its user (a role, say) stays its own
        return copy.copy(user), token


def forget_tokens(**_kwargs) -> None:
    _forget()
    # the signal comes before its transaction commits (the admin saves in one): a lookup in
    # between still reads the old row, so the cache is emptied again once the change is visible
    transaction.on_commit(_forget)


def _forget() -> None:
    global _generation
    with _lock:
        _generation += 1
        _known.clear()


post_delete.connect(forget_tokens, sender=Token, dispatch_uid="cbr-token-cache-token-deleted")
post_save.connect(forget_tokens, sender=Token, dispatch_uid="cbr-token-cache-token-saved")
post_save.connect(forget_tokens, sender=get_user_model(), dispatch_uid="cbr-token-cache-user-saved")
post_delete.connect(forget_tokens, sender=get_user_model(), dispatch_uid="cbr-token-cache-user-deleted")

"""API credentials' lookups remembered per web process: `Authorization: Token <key>` (DRF's
token authentication) and `Api-Key` keys (access/authentication.py). Consumers send a read and an
ack per batch, and the lookup was ~1 ms of each. It must never let a revoked credential or a
deactivated user in: a token, key or user saved or deleted anywhere (through the ORM) makes every
process forget what it remembered (`streams.memo`: this one at once, the others as soon as their
listener hears it, with no round trip per request), and an entry counts for at most
`CBR_TOKEN_CACHE_S` seconds, the bound for changes that bypass saves (`QuerySet.update`). Without
Redis nothing is remembered. Failed lookups are never remembered."""

from __future__ import annotations

import copy

from django.contrib.auth import get_user_model
from django.db.models.signals import m2m_changed, post_delete, post_save
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

from access.models import ApiKey
from streams.memo import Memo

CREDENTIALS = Memo("credentials", "CBR_TOKEN_CACHE_S")


class RememberedApiKeys:
    """For access/authentication.py: `find(key)` → (the API key or None, a ticket for `keep`)."""

    @staticmethod
    def find(key: str):
        return CREDENTIALS.get("api-key:" + key)

    @staticmethod
    def keep(key: str, ticket, api_key) -> None:
        CREDENTIALS.keep("api-key:" + key, ticket, api_key)


class CachedTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key):
        hit, ticket = CREDENTIALS.get("token:" + key)
        if hit is not None:
            user, token = hit
        else:
            user, token = super().authenticate_credentials(key)  # 401 for unknown keys and inactive users
            CREDENTIALS.keep("token:" + key, ticket, (user, token))
        # a copy per request: whatever a request notes on its user (a role, say) stays its own
        return copy.copy(user), token


forget_tokens = CREDENTIALS.forget  # every process stops trusting what it remembers


post_delete.connect(forget_tokens, sender=Token, dispatch_uid="cbr-token-cache-token-deleted")
post_save.connect(forget_tokens, sender=Token, dispatch_uid="cbr-token-cache-token-saved")
post_save.connect(forget_tokens, sender=get_user_model(), dispatch_uid="cbr-token-cache-user-saved")
post_delete.connect(forget_tokens, sender=get_user_model(), dispatch_uid="cbr-token-cache-user-deleted")
post_save.connect(forget_tokens, sender=ApiKey, dispatch_uid="cbr-token-cache-key-saved")
post_delete.connect(forget_tokens, sender=ApiKey, dispatch_uid="cbr-token-cache-key-deleted")
m2m_changed.connect(forget_tokens, sender=ApiKey.streams.through, dispatch_uid="cbr-token-cache-key-streams")

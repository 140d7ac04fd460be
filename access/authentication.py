"""`Authorization: Api-Key <prefix>.<secret>` for programs (DRF). A revoked, expired or unknown
key is refused with 401; a used key's last-used time moves at most once a minute. A key's
lookup is remembered as a token's is (access/token_cache.py)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework import authentication, exceptions

from access.models import ApiKey
from access.principals import KeyHolder
from access.token_cache import RememberedApiKeys

KEYWORD = "Api-Key"
LAST_USED_EVERY = timedelta(minutes=1)


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode("latin-1").lower() != KEYWORD.lower():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(f"the {KEYWORD} header takes one key: {KEYWORD} <key>")
        try:
            key = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("an API key is ASCII") from None
        api_key = self._usable(key)
        now = timezone.now()
        if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_EVERY:
            ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
            api_key.last_used_at = now
        return KeyHolder(api_key), api_key

    def authenticate_header(self, request):
        return KEYWORD

    @staticmethod
    def _usable(key: str) -> ApiKey:
        # a hit is a key that matched and has not been saved or deleted since (the hash check
        # and three queries otherwise); its expiry is checked on every request still
        api_key, ticket = RememberedApiKeys.find(key)
        if api_key is None:
            api_key = ApiKeyAuthentication._look_up(key)
            RememberedApiKeys.keep(key, ticket, api_key)
        if api_key.expired:
            raise exceptions.AuthenticationFailed("this API key has expired")
        return api_key

    @staticmethod
    def _look_up(key: str) -> ApiKey:
        prefix, _, _ = key.partition(".")
        api_key = (
            ApiKey.objects.usable()
            .filter(prefix=prefix)
            .select_related("reader_group__scope")
            .prefetch_related("streams__scope")
            .first()
        )
        if api_key is None or not api_key.matches(key):
            raise exceptions.AuthenticationFailed("unknown or revoked API key")
        return api_key

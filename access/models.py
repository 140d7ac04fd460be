"""API keys scoped to one reader group or to publishing on named streams (docs/security.md).
A key is `<prefix>.<secret>` (8 + 32 random letters and digits, ~190 bits), made, hashed
(SHA-512) and verified in constant time by djangorestframework-api-key's KeyGenerator; only the
prefix and the hash are stored, so a key is shown once, when it is made."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from rest_framework_api_key.crypto import KeyGenerator

from access.rules import KeyKind, KeyScope

GENERATOR = KeyGenerator()


class ApiKeyQuerySet(models.QuerySet):
    def usable(self):
        return self.filter(revoked_at__isnull=True)


class ApiKey(models.Model):
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    hashed_key = models.CharField(max_length=200, editable=False)
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=[(k.value, k.value) for k in KeyKind])
    reader_group = models.ForeignKey(
        "groups.ReaderGroup", null=True, blank=True, on_delete=models.CASCADE, related_name="api_keys"
    )
    streams = models.ManyToManyField("streams.Stream", blank=True, related_name="api_keys")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix})"

    def assign_secret(self) -> str:
        """Give the key a new secret; answers the whole key, which is never stored."""
        key, self.prefix, self.hashed_key = GENERATOR.generate()
        return key

    def matches(self, key: str) -> bool:
        return GENERATOR.verify(key, self.hashed_key)

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def state(self) -> str:
        return "revoked" if self.revoked_at else "expired" if self.expired else "active"

    def scope(self) -> KeyScope:
        if self.kind == KeyKind.READER_GROUP:
            group = self.reader_group
            # made with its group, deleted with it; a key without one (a row edited by hand) grants nothing
            names = set() if group is None else {f"{group.scope.name}/{group.name}"}
        else:
            names = {s.full_name for s in self.streams.all()}
        return KeyScope(KeyKind(self.kind), frozenset(names))

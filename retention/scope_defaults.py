"""A scope's defaults for its streams (`domain.scope_defaults`): set, read and removed, and carried
to every stream of the scope that inherits them, in the same transaction. Retention's to do
because a default retention policy becomes each inheriting stream's policy row."""

from __future__ import annotations

from django.db import transaction
from django.shortcuts import get_object_or_404

from domain.policy_spec import parse_policy
from domain.scope_defaults import COMPACTION_DEFAULTS, RETENTION_POLICY, SETTINGS, parse_defaults
from retention.models import RetentionPolicy
from streams.models import Scope, ScopeDefaults, Stream


def scope_defaults(scope: Scope) -> dict[str, object]:
    """Every setting the scope gives its streams (null: none)."""
    row = ScopeDefaults.objects.filter(scope=scope).first()
    return {name: getattr(row, name) if row is not None else None for name in SETTINGS}


def defaults_of(scope_name: str) -> dict[str, object]:
    """The scope's defaults by name, only those set (a scope that does not exist has none)."""
    row = ScopeDefaults.objects.filter(scope__name=scope_name).first()
    if row is None:
        return {}
    return {name: getattr(row, name) for name in SETTINGS if getattr(row, name) is not None}


def get_scope(name: str) -> Scope:
    return get_object_or_404(Scope, name=name)


def do_set_scope_defaults(scope_name: str, body: object, user=None) -> Scope:
    """Replace the scope's defaults with `body` (a setting it leaves out has none), and carry them
    to the streams that inherit them. Makes the scope if it has no stream yet, so that defaults
    can be set before its first stream."""
    settings = parse_defaults(body)
    with transaction.atomic():
        scope, _ = Scope.objects.get_or_create(name=scope_name)
        ScopeDefaults.objects.update_or_create(scope=scope, defaults={n: settings.get(n) for n in SETTINGS})
        _carry(scope, settings, user)
    return scope


def do_clear_scope_defaults(scope: Scope, user=None) -> None:
    """Remove the scope's defaults: its inheriting streams go back to the built-in defaults (no
    retention policy, `delete`, …), and would take new defaults again if some are set."""
    with transaction.atomic():
        ScopeDefaults.objects.filter(scope=scope).delete()
        _carry(scope, {}, user)


def _carry(scope: Scope, settings: dict[str, object], user) -> None:
    streams = list(Stream.objects.select_for_update().filter(scope=scope).select_related("scope"))
    for stream in streams:
        changed = []
        for name in COMPACTION_DEFAULTS:
            if name in stream.inherited:
                value = settings.get(name, COMPACTION_DEFAULTS[name])
                if getattr(stream, name) != value:
                    setattr(stream, name, value)
                    changed.append(name)
        if changed:
            stream.save(update_fields=[*changed, "updated_at"])
        if RETENTION_POLICY in stream.inherited:
            apply_inherited_policy(stream, settings.get(RETENTION_POLICY), user)


def apply_inherited_policy(stream: Stream, policy: object, user=None) -> None:
    """An inheriting stream's policy row made, changed or removed to match the scope's default."""
    if policy is None:
        RetentionPolicy.objects.filter(stream=stream).delete()
        return
    RetentionPolicy.save_for(stream, parse_policy(policy, prefix=f"{RETENTION_POLICY}."), user)

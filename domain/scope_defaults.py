"""A scope's defaults for its streams (Pulsar's namespace policies, Pravega's scope-wide
settings), as plain Python: which settings there are, what a request may say of them, and what a
stream takes. A stream inherits each setting it does not set itself; it follows the scope's value
as it changes, and falls back on the built-in default when the scope's is removed. Setting its
own value (on creation or later) ends the inheritance of that setting."""

from __future__ import annotations

from collections.abc import Mapping

from domain.compaction import COMPACTION_FIELDS
from domain.errors import FieldError
from domain.fields import defaults
from domain.policy_spec import parse_policy

RETENTION_POLICY = "retention_policy"
# the compaction settings with their built-in defaults (a stream that inherits one goes back to
# this when its scope's default is removed): a scope's default is checked as a stream's own is
COMPACTION_DEFAULTS: dict[str, object] = defaults(COMPACTION_FIELDS)
SETTINGS = (RETENTION_POLICY, *COMPACTION_DEFAULTS)


def parse_defaults(body: object) -> dict[str, object]:
    """A `PUT /scopes/{scope}/defaults/` body: any of the settings, each checked as a stream's
    own is (a retention policy as `PUT …/retention-policy/` takes it, the compaction settings by
    `COMPACTION_FIELDS`); a setting left out or null has no default. Returns the settings given,
    parsed (the policy as sent, checked)."""
    if not isinstance(body, dict):
        raise FieldError("body", "must be a JSON object")
    unknown = sorted(set(body) - set(SETTINGS))
    if unknown:
        raise FieldError(unknown[0], "is not a setting a scope gives its streams")
    out: dict[str, object] = {}
    for name, value in body.items():
        if value is None:
            continue
        if name == RETENTION_POLICY:
            parse_policy(value, prefix=f"{RETENTION_POLICY}.")
            out[name] = dict(value)
        else:
            out[name] = COMPACTION_FIELDS[name].check(value, name)
    return out


def inherited_settings(own: set[str], defaults: Mapping[str, object]) -> list[str]:
    """The settings a new stream takes from its scope: those the scope defaults that the stream
    does not set itself, in `SETTINGS` order."""
    return [name for name in SETTINGS if name not in own and defaults.get(name) is not None]

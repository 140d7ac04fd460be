"""Who may do what (docs/security.md), as plain Python: roles and the actions they
allow, and what an API key scoped to one reader group or to publishing on named streams allows.
Every API view and console page asks this one module; nothing here touches a request or the ORM,
and nothing outside it decides access."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    ADMIN = "admin"
    OPERATOR = "operator"
    VIEWER = "viewer"


class Action(StrEnum):
    VIEW = "view"  # any read: streams, groups, history, metrics
    MANAGE_STREAMS = "manage streams"  # create and change streams and their policies
    DELETE_STREAM = "delete streams"
    TRUNCATE = "truncate streams by hand"
    PUBLISH = "publish"
    MANAGE_READER_GROUPS = "manage reader groups"
    CONSUME = "consume"  # read, ack, nack, checkpoints, cuts of a group
    RUN_JOBS = "run jobs"  # retention cycles, compactions
    MANAGE_KEYS = "manage API keys"


class KeyKind(StrEnum):
    READER_GROUP = "reader_group"
    PUBLISH = "publish"


class TargetKind(StrEnum):
    STREAM = "stream"
    READER_GROUP = "reader_group"


_OPERATOR = frozenset(Action) - {Action.DELETE_STREAM, Action.TRUNCATE}
ROLE_ACTIONS: dict[Role, frozenset[Action]] = {
    Role.ADMIN: frozenset(Action),
    Role.OPERATOR: _OPERATOR,
    Role.VIEWER: frozenset({Action.VIEW}),
}
# A key is for a program, not a person: it does one job on one thing.
KEY_ACTIONS: dict[KeyKind, frozenset[Action]] = {
    KeyKind.READER_GROUP: frozenset({Action.VIEW, Action.CONSUME}),
    KeyKind.PUBLISH: frozenset({Action.PUBLISH}),
}
KEY_TARGETS = {KeyKind.READER_GROUP: TargetKind.READER_GROUP, KeyKind.PUBLISH: TargetKind.STREAM}


@dataclass(frozen=True)
class Target:
    """The one stream or reader group a request is about (`scope/name`), when it is about one."""

    kind: TargetKind
    name: str


@dataclass(frozen=True)
class KeyScope:
    kind: KeyKind
    names: frozenset[str]  # the reader group (one) or the streams a key is for, as scope/name


@dataclass(frozen=True)
class Principal:
    """Who asks: a person with a role, or a program with a scoped key (never both)."""

    role: Role | None = None
    key: KeyScope | None = None


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def strongest(roles) -> Role | None:
    """A user in several role groups has the strongest of them."""
    roles = set(roles)
    for role in (Role.ADMIN, Role.OPERATOR, Role.VIEWER):
        if role in roles:
            return role
    return None


def decide(principal: Principal, action: Action, target: Target | None) -> Decision:
    if principal.key is not None:
        return _decide_for_key(principal.key, action, target)
    if principal.role is None:
        return Decision(False, "authentication is required")
    if action in ROLE_ACTIONS[principal.role]:
        return Decision(True)
    return Decision(False, f"your role ({principal.role}) may not {action}")


def _decide_for_key(key: KeyScope, action: Action, target: Target | None) -> Decision:
    if action not in KEY_ACTIONS[key.kind]:
        return Decision(False, f"an API key for {key.kind.replace('_', ' ')} may not {action}")
    if target is None or target.kind != KEY_TARGETS[key.kind] or target.name not in key.names:
        what = "reader group" if key.kind == KeyKind.READER_GROUP else "streams"
        return Decision(False, f"this API key is for the {what} {', '.join(sorted(key.names))} only")
    return Decision(True)

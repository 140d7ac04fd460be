"""Scope and stream names (docs/api.md): `[A-Za-z0-9_.-]{1,128}`, and never `.` or `..`,
which are valid by that pattern but name directories, not streams."""

from __future__ import annotations

import re

from domain.errors import FieldError

NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def check_name(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise FieldError(field, "must be a string")
    if not NAME_PATTERN.fullmatch(value):
        raise FieldError(field, "must be 1 to 128 characters of A-Z, a-z, 0-9, '_', '.', '-'")
    if value in (".", ".."):
        raise FieldError(field, "may not be '.' or '..'")
    return value


def split_stream_name(value: object, field: str) -> tuple[str, str]:
    """`"scope/name"` → (scope, name)."""
    if not isinstance(value, str) or value.count("/") != 1:
        raise FieldError(field, "must be 'scope/name'")
    scope, name = value.split("/")
    return check_name(scope, field), check_name(name, field)

"""Tags on streams and reader groups (PDP-47's M4, `tags: {"key": "value", …}`): free-form labels
people and programs filter lists by. Plain Python: what a tag may be, and a list filter read
from `?tag=key:value`. Tags never become metric labels: their number and values are unbounded.
"""

from __future__ import annotations

import re

from domain.errors import FieldError

KEY = re.compile(r"[a-z0-9_.-]{1,63}")
VALUE = re.compile(r"[^\x00-\x1f\x7f]{0,256}")  # any printable text, at most 256 characters
MAX_TAGS = 32


def check_tags(value: object, field: str = "tags") -> dict[str, str]:
    """The tags as given, or a FieldError naming the field (`tags`, or `tags.<key>` for one)."""
    if not isinstance(value, dict):
        raise FieldError(field, 'must be an object of tags: {"team": "payments", …}')
    if len(value) > MAX_TAGS:
        raise FieldError(field, f"at most {MAX_TAGS} tags ({len(value)} given)")
    for key, tag in value.items():
        if not KEY.fullmatch(key):
            raise FieldError(f"{field}.{key}"[:200], "a tag's key is 1 to 63 of a-z, 0-9, '_', '.' and '-'")
        if not isinstance(tag, str) or not VALUE.fullmatch(tag):
            raise FieldError(f"{field}.{key}", "a tag's value is text of at most 256 characters, no control character")
    return dict(value)


def parse_tag_filter(raw: str) -> tuple[str, str | None]:
    """`?tag=key:value` (that value) or `?tag=key` (any value): (key, value or None). A FieldError
    naming `tag` otherwise."""
    key, colon, value = raw.partition(":")
    if not KEY.fullmatch(key):
        raise FieldError("tag", f"{raw!r}: key:value, the key 1 to 63 of a-z, 0-9, '_', '.' and '-'")
    if colon and not VALUE.fullmatch(value):
        raise FieldError("tag", f"{raw!r}: a tag's value is text of at most 256 characters, no control character")
    return key, (value if colon else None)

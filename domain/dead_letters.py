"""What a dead letter's `cbr-dlq-*` headers say: the reason, and where the event came from (its
stream, segment and offset, the group and how many deliveries it had). Plain Python.

The headers are read as untrusted, never assumed well formed: a publish may not set a `cbr-`
header (`domain.events`), but events written before that rule hold whatever their publisher put
there. An event whose origin does not parse is no dead letter: its `cbr-dlq-*` headers are plain
headers, shown as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from domain.errors import FieldError
from domain.names import split_stream_name

PREFIX = "cbr-dlq-"
# the headers `groups.consuming.dead_letters` writes, without the prefix
KNOWN = ("reason", "stream", "segment", "offset", "reader-group", "deliveries", "at")
_SEGMENT = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_COUNT = re.compile(r"[0-9]{1,18}")  # below 2**63 (and ASCII only): an offset, a count, epoch ms


@dataclass(frozen=True, slots=True)
class DeadLetter:
    stream: str  # "scope/name", checked
    segment: str
    offset: int
    reason: str
    reader_group: str
    deliveries: int | None
    at_ms: int | None


def read_dead_letter(headers: Mapping[str, object] | None) -> tuple[DeadLetter | None, dict[str, object]]:
    """The dead letter the headers describe (None when they describe none, or nonsense), and the
    headers left to show as they are: every header but the parsed `cbr-dlq-*` ones."""
    headers = dict(headers or {})
    given = {k.removeprefix(PREFIX): v for k, v in headers.items() if k.startswith(PREFIX)}
    if not given:
        return None, headers
    stream, segment, offset = given.get("stream"), given.get("segment"), given.get("offset")
    if not (_is_stream(stream) and _matches(_SEGMENT, segment) and _matches(_COUNT, offset)):
        return None, headers
    reason, group = given.get("reason"), given.get("reader-group")
    dead = DeadLetter(
        stream=str(stream),
        segment=str(segment),
        offset=int(str(offset)),
        reason=reason if isinstance(reason, str) else "",
        reader_group=group if isinstance(group, str) else "",
        deliveries=_count(given.get("deliveries")),
        at_ms=_count(given.get("at")),
    )
    parsed = {f"{PREFIX}{k}" for k in KNOWN if k in given and _shown_in(dead, k, given[k])}
    return dead, {k: v for k, v in headers.items() if k not in parsed}


def _shown_in(dead: DeadLetter, name: str, value: object) -> bool:
    """Whether `DeadLetter` carries header `name` (a count that does not parse stays a header)."""
    if name == "deliveries":
        return dead.deliveries is not None
    if name == "at":
        return dead.at_ms is not None
    return isinstance(value, str)


def _is_stream(value: object) -> bool:
    try:
        split_stream_name(value, "stream")
    except FieldError:
        return False
    return True


def _matches(pattern: re.Pattern, value: object) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def _count(value: object) -> int | None:
    return int(value) if isinstance(value, str) and _COUNT.fullmatch(value) else None

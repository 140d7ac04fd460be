"""`Range: bytes=…` on a payload's bytes (RFC 9110, §14): one range, `first-last`, `first-` or
`-suffix`; what a server may ignore (several ranges, another unit, a malformed header) gets the
whole payload, as the RFC lets a server answer; a range that starts past the end is refused (416).
Plain Python."""

from __future__ import annotations

import re

from domain.errors import FieldError

_ONE_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The bytes `(first, last)` (inclusive) of a payload of `size` bytes that `header` asks for,
    None for the whole payload; `FieldError` (`range_not_satisfiable`, field `Range`) when it
    asks for none of them."""
    if not header:
        return None
    found = _ONE_RANGE.match(header)
    if found is None:
        return None  # several ranges, another unit, or not a range: the whole payload
    start, end = found.groups()
    if not start and not end:
        return None
    if not start:  # the last `end` bytes
        suffix = int(end)
        if suffix == 0 or size == 0:
            raise _not_satisfiable(size)
        return max(0, size - suffix), size - 1
    first = int(start)
    last = size - 1 if not end else min(int(end), size - 1)
    if end and int(end) < first:
        return None  # malformed (last before first): ignored, as the RFC says
    if first >= size:
        raise _not_satisfiable(size)
    return first, last


def content_range(first: int, last: int, size: int) -> str:
    return f"bytes {first}-{last}/{size}"


def _not_satisfiable(size: int) -> FieldError:
    return FieldError(
        "Range",
        f"asks for no byte of this payload of {size} bytes",
        code="range_not_satisfiable",
        details={"size": size},
    )

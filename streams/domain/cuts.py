"""Stream cuts: `{"<segment id>": offset, …}`, parsed and checked against a stream's segments.

A cut is always at an event boundary because offsets count events. Comparison of cuts (before,
equal_or_after, overlaps) belongs to the retention rules and lives in retention/.
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from streams.domain.errors import FieldError

StreamCut = dict[str, int]


def parse_cut_json(raw: str, field: str) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise FieldError(field, "must be a JSON object of segment id to offset") from None


def check_cut(
    value: object,
    field: str,
    segment_ids: list[str],
    *,
    complete: bool,
    tail: Mapping[str, int] | None = None,
    head: Mapping[str, int] | None = None,
) -> StreamCut:
    """Validate a cut. `complete` demands every segment; `tail`/`head` bound the offsets."""
    if not isinstance(value, dict):
        raise FieldError(field, "must be an object of segment id to offset, e.g. {\"0\": 12}")
    known = set(segment_ids)
    cut: StreamCut = {}
    for seg, offset in value.items():
        if seg not in known:
            raise FieldError(f"{field}.{seg}", f"is not a segment of this stream ({sorted(known)})")
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise FieldError(f"{field}.{seg}", "offset must be an integer")
        if offset < 0:
            raise FieldError(f"{field}.{seg}", "offset must not be negative")
        if tail is not None and offset > tail[seg]:
            raise FieldError(f"{field}.{seg}", f"offset {offset} is past the tail {tail[seg]}")
        if head is not None and offset < head[seg]:
            raise FieldError(f"{field}.{seg}", f"offset {offset} is before the head {head[seg]}")
        cut[seg] = offset
    if complete:
        missing = [s for s in segment_ids if s not in cut]
        if missing:
            raise FieldError(field, f"must name every segment; missing {missing}")
    return cut

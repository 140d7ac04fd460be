"""Stream cuts: `{"<segment id>": offset, …}`: parsed and checked against a stream's segments,
and compared (docs/design/retention.md). Plain Python.

A cut is always at an event boundary because offsets count events. Cuts on several segments are
only partly ordered, so a comparison has three answers: `equal_or_after` (every segment at or
after), `before` (some behind, none ahead) and `overlaps` (some ahead, some behind).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum

import orjson

from domain.errors import FieldError

StreamCut = dict[str, int]
Cut = Mapping[str, int]


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
        raise FieldError(field, 'must be an object of segment id to offset, e.g. {"0": 12}')
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


# -- comparison ----------------------------------------------------------------------------


class Order(Enum):
    EQUAL_OR_AFTER = "equal_or_after"
    BEFORE = "before"
    OVERLAPS = "overlaps"


def compare(a: Cut, b: Cut) -> Order:
    """How cut `a` stands to cut `b`. A segment a cut does not name stands at 0 in it: the cut
    was taken before the segment was made (a scale), when it held nothing."""
    ahead = behind = False
    for seg, offset in a.items():
        other = b.get(seg, 0)
        if offset > other:
            ahead = True
        elif offset < other:
            behind = True
    if len(b) != len(a) or b.keys() != a.keys():
        for seg, other in b.items():
            if seg not in a and other > 0:
                behind = True
    if behind:
        return Order.OVERLAPS if ahead else Order.BEFORE
    return Order.EQUAL_OR_AFTER


def is_at_or_after(a: Cut, b: Cut) -> bool:
    """`compare(a, b) is EQUAL_OR_AFTER`, without classifying the rest: a cycle asks it ~25 times
    a stream (dropping retention-set records after a truncation)."""
    for seg, offset in a.items():
        if offset < b.get(seg, 0):
            return False
    if len(b) != len(a) or b.keys() != a.keys():
        return all(other <= 0 for seg, other in b.items() if seg not in a)
    return True


def lower_bound(cuts: Iterable[Cut]) -> dict[str, int]:
    """Per segment, the smallest offset: the subscriber lower bound of these cuts (a segment a
    cut does not name is at 0 in it)."""
    cuts = list(cuts)
    bound: dict[str, int] = {}
    for cut in cuts:
        for seg, offset in cut.items():
            if seg not in bound or offset < bound[seg]:
                bound[seg] = offset
    for seg in bound:
        if any(seg not in cut for cut in cuts):
            bound[seg] = 0
    return bound


def moves_head(target: Cut, head: Cut) -> bool:
    """A truncation at `target` happens only when it is strictly ahead of the head on some
    segment and behind it on none; anything else is a silent no-op."""
    return compare(target, head) is Order.EQUAL_OR_AFTER and any(target[s] > head.get(s, 0) for s in target)


def checkpoint_expired(cuts: Mapping[str, Cut], heads: Mapping[str, Cut]) -> bool:
    """PDP-47: a persisted checkpoint has expired once it lies wholly before the streams' heads:
    on every stream it names that still exists (`heads`, by name), every segment's offset is
    behind that segment's head, so it records no position that is still readable. One that
    names no stream that still exists has expired too. (A checkpoint behind the head on some
    segments only is still worth keeping: released, those offsets count as at the head.)"""
    known = [(cut, heads[name]) for name, cut in cuts.items() if name in heads]
    return all(all(int(cut.get(s, 0)) < h for s, h in head.items()) for cut, head in known)

"""Stream cuts over segments of several epochs (docs/design/stream-scaling.md): validation, the three-way
comparison, the subscriber lower bound, bytes between two cuts and what a truncation deletes.
Plain Python, one implementation for the API, the retention cycle and Spark.

A cut maps segment ids to offsets and may mix epochs. A successor at offset 0 may share keys with
the predecessors it waits for (it is *future*: its reader is still in a predecessor); started
segments never share keys, and together the cut's segments hold every key of `[0, 1)`.

Everything here reads a cut key by key: at each key, a cut's **position** is the segment of the
cut that holds the key and was made in the earliest epoch (with a future successor beside its
predecessor, the reader is in the predecessor), with its offset. Two positions at one key are in
one segment (compare offsets) or in two, one made after the other (the later one is ahead).
Between any two boundaries of the segments involved every key has the same positions, so one key
per such interval is enough.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from domain.cuts import Order, check_cut
from domain.errors import FieldError
from domain.segment_layout import Layout, Segment, union_of

Cut = Mapping[str, int]
END = -1  # `Position.offset` of a segment the cut has passed (read to its end)


def normalized(cut: Mapping[str, int]) -> dict[str, int]:
    """A cut as CBR writes it: a future successor at 0 (Pravega writes -1; accepted as 0)."""
    return {sid: 0 if offset == -1 else offset for sid, offset in cut.items()}


def check_epoch_cut(layout: Layout, cut: Cut, field: str) -> dict[str, int]:
    """The cut, if it is one of this layout: every segment known, started segments sharing no
    key, a segment sharing keys with another only as its future successor (at offset 0), and
    every key of `[0, 1)` held. Refusals name `field` and say which segments or keys."""
    cut = normalized(cut)
    unknown = sorted(sid for sid in cut if sid not in layout)
    if unknown:
        raise FieldError(field, f"no such segment in this stream: {', '.join(unknown)}")
    negative = sorted(sid for sid, offset in cut.items() if offset < 0)
    if negative:
        raise FieldError(field, f"offsets must be 0 or more (-1 only for a future segment): {', '.join(negative)}")
    segments = [layout[sid] for sid in cut]
    for i, a in enumerate(segments):
        for b in segments[i + 1 :]:
            if not a.overlaps(b):
                continue
            earlier, later = (a, b) if a.epoch < b.epoch else (b, a)
            if not layout.is_after(later.id, earlier.id) or cut[later.id] != 0:
                raise FieldError(
                    field,
                    f"segments {earlier.id} and {later.id} share keys: only a successor not yet started "
                    f"(at offset 0) may name keys its predecessor still holds",
                )
    gaps = _gaps(union_of((s.lo, s.hi) for s in segments))
    if gaps:
        where = ", ".join(f"[{lo:g}, {hi:g})" for lo, hi in gaps)
        raise FieldError(field, f"does not hold every key of [0, 1): nothing holds {where}")
    return cut


def _gaps(covered: list[tuple[float, float]]) -> list[tuple[float, float]]:
    gaps, at = [], 0.0
    for lo, hi in covered:
        if lo > at:
            gaps.append((at, lo))
        at = max(at, hi)
    if at < 1.0:
        gaps.append((at, 1.0))
    return gaps


# -- positions key by key ------------------------------------------------------------------------


def _intervals(layout: Layout, cuts: Iterable[Cut]) -> list[float]:
    """One key per interval between the boundaries of every segment these cuts name."""
    bounds = {0.0}
    for cut in cuts:
        for sid in cut:
            s = layout[sid]
            bounds.update((s.lo, s.hi))
    return sorted(b for b in bounds if b < 1.0)


def _position(layout: Layout, cut: Cut, key: float) -> Segment:
    """The segment of `cut` at `key`: the earliest-made of those holding it."""
    holding = [layout[sid] for sid in cut if layout[sid].lo <= key < layout[sid].hi]
    return min(holding, key=lambda s: s.epoch)


def _later(a: tuple[Segment, int], b: tuple[Segment, int]) -> int:
    """1 when position `a` is ahead of `b`, -1 when behind, 0 when equal."""
    (sa, oa), (sb, ob) = a, b
    if sa.id == sb.id:
        return (oa > ob) - (oa < ob)
    return 1 if sa.epoch > sb.epoch else -1


def compare(layout: Layout, a: Cut, b: Cut) -> Order:
    """How cut `a` stands to cut `b`, key by key: `EQUAL_OR_AFTER` when at no key behind,
    `BEFORE` when behind at some and ahead at none, `OVERLAPS` when both."""
    ahead = behind = False
    for key in _intervals(layout, (a, b)):
        pa, pb = _position(layout, a, key), _position(layout, b, key)
        order = _later((pa, a[pa.id]), (pb, b[pb.id]))
        ahead, behind = ahead or order > 0, behind or order < 0
    if behind:
        return Order.OVERLAPS if ahead else Order.BEFORE
    return Order.EQUAL_OR_AFTER


def lower_bound(layout: Layout, cuts: Iterable[Cut]) -> dict[str, int]:
    """The subscriber lower bound: at every key, the position of the cut furthest behind, as one
    valid cut. Where the segment furthest behind at one key is started and an earlier segment
    holds some of its keys further behind at another, it is taken at offset 0 (a future
    successor: never ahead of any of the cuts)."""
    cuts = [normalized(c) for c in cuts]
    if not cuts:
        return {}
    bound: dict[str, int] = {}
    for key in _intervals(layout, cuts):
        slowest: tuple[Segment, int] | None = None
        for cut in cuts:
            s = _position(layout, cut, key)
            here = (s, cut[s.id])
            if slowest is None or _later(here, slowest) < 0:
                slowest = here
        assert slowest is not None
        s, offset = slowest
        bound[s.id] = min(offset, bound.get(s.id, offset))
    # a started segment beside an earlier one in the bound waits for it (a segment is chosen
    # only where no earlier one of the bound holds the key, so none is wholly covered)
    chosen = [layout[sid] for sid in bound]
    for s in chosen:
        if any(t.epoch < s.epoch and t.overlaps(s) for t in chosen):
            bound[s.id] = 0
    return bound


# -- what lies between cuts ----------------------------------------------------------------------


def start_in(layout: Layout, cut: Cut, segment_id: str) -> int:
    """Where a cut stands in one segment: its offset when it names it; `END` when it passed it
    (a started segment of the cut holding some of its keys was made after it, or only future
    successors hold its keys: its predecessors are wholly behind); 0 when it has not reached it
    (an earlier segment of the cut holds some of its keys)."""
    if segment_id in cut:
        return cut[segment_id]
    s = layout[segment_id]
    sharing = [layout[sid] for sid in cut if layout[sid].overlaps(s)]
    if any(t.epoch > s.epoch and cut[t.id] > 0 for t in sharing):
        return END
    if any(t.epoch < s.epoch for t in sharing):
        return 0
    return END


def bytes_between(
    layout: Layout,
    earlier: Cut,
    later: Cut,
    size: Callable[[str, int, int], int],
    segments: Iterable[str] | None = None,
) -> int:
    """Payload bytes from cut `earlier` to cut `later`: per segment, the part of it between
    where each cut stands in it (`start_in`): both name it, `to - from`; only the earlier,
    from its offset to its end; only the later, from its start; neither, all of it when it lies
    wholly between them. `size(segment, from, to)`: the bytes of a segment between two offsets,
    `to` `END` for its end. `segments`: those to count (every segment of the layout)."""
    total = 0
    for sid in layout.segments if segments is None else segments:
        start, stop = start_in(layout, earlier, sid), start_in(layout, later, sid)
        if start == END or stop == 0 or (stop != END and stop <= start):
            continue
        total += size(sid, start, stop)
    return total


def wholly_before(layout: Layout, cut: Cut) -> list[str]:
    """The segments a truncation at `cut` deletes whole: those it does not name whose every key
    it has passed (every segment of the cut sharing keys with one was made after it)."""
    out = []
    for s in layout.segments.values():
        if s.id in cut:
            continue
        sharing = [layout[sid] for sid in cut if layout[sid].overlaps(s)]
        if sharing and all(t.epoch > s.epoch for t in sharing):
            out.append(s.id)
    return sorted(out, key=lambda sid: (layout[sid].epoch, sid))


def tail_cut(layout: Layout, tails: Mapping[str, int]) -> dict[str, int]:
    """The stream's tail: every active segment at its tail (`tails` by id; 0 for one without)."""
    return {s.id: tails.get(s.id, 0) for s in layout.active}


# -- the two forms of a cut ----------------------------------------------------------------------
#
# Inside CBR a cut names every segment of the layout (`full_cut`): a sealed segment the cut has
# passed at its end, a successor it has not reached at 0. Reads, truncations and the subscriber
# lower bound then work segment by segment, as on a stream that never scaled. What the API shows
# and takes is Pravega's form (`epoch_cut`): only the segments the cut is in, or waits at.


def full_cut(layout: Layout, cut: Cut, ends: Mapping[str, int]) -> dict[str, int]:
    """Every segment of the layout with where a valid cut stands in it (`start_in`), a segment it
    has passed at its end (`ends`: the sealed segments' ends)."""
    out = {}
    for sid in layout.ids:
        at = start_in(layout, cut, sid)
        out[sid] = ends[sid] if at == END else at
    return out


def epoch_cut(layout: Layout, full: Cut, ends: Mapping[str, int]) -> dict[str, int]:
    """A full cut in Pravega's form: the segments not read to their end whose keys it does not
    hold in an earlier segment (a successor some of whose keys it still reads in a predecessor
    is named at 0, beside it). The inverse of `full_cut` for the cuts CBR makes."""

    def finished(sid: str) -> bool:
        return sid in ends and full.get(sid, 0) >= ends[sid]

    out = {}
    for sid in layout.ids:
        if finished(sid):
            continue
        preds = layout[sid].predecessors
        if not preds or any(p not in layout or finished(p) for p in preds):
            out[sid] = full.get(sid, 0)
    return out


def check_stream_cut(
    value: object,
    field: str,
    layout: Layout,
    ends: Mapping[str, int],
    *,
    complete: bool,
    tail: Mapping[str, int] | None = None,
    head: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """A cut from outside, checked and in its full form. On a stream that never scaled it is
    `domain.cuts.check_cut` (with `complete=False`, the segments it leaves out start at their
    head). On a scaled stream a cut that names anything must be a cut of the layout
    (`check_epoch_cut`: it holds every key), in Pravega's form; every offset is checked as
    `check_cut` does."""
    if not ends:
        return check_cut(value, field, layout.ids, complete=complete, tail=tail, head=head)
    if isinstance(value, dict) and all(type(v) is int for v in value.values()):
        value = normalized(value)  # Pravega's -1 for a successor not started
    cut = check_cut(value, field, layout.ids, complete=False, tail=tail)
    if not cut and not complete:
        return {}
    full = full_cut(layout, check_epoch_cut(layout, cut, field), ends)
    if head is not None:
        behind = [s for s in cut if full[s] < head.get(s, 0)]
        if behind:
            raise FieldError(f"{field}.{behind[0]}", f"offset {full[behind[0]]} is before the head {head[behind[0]]}")
    return full

"""A stream's segments across scale events: each segment's key range on `[0, 1)`, the epoch that
made it and the sealed segments it replaced (docs/design/stream-scaling.md). Plain Python.

A stream starts in epoch 0 with equal ranges. A scale seals some active segments and makes
successors that cover exactly the sealed segments' keys (a split, a merge, or both in one step):
the next epoch. Segment ids stay opaque strings; "later" means "made in a later epoch" (two
segments made in one epoch never share a key). Nothing here knows where events are stored.
"""

from __future__ import annotations

import functools
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from domain.errors import FieldError


@dataclass(frozen=True)
class Segment:
    id: str
    lo: float  # its keys: [lo, hi)
    hi: float
    epoch: int  # the epoch that made it
    predecessors: tuple[str, ...] = ()  # the sealed segments it replaced (those sharing keys with it)
    # a sealed segment retention has passed whole: its end (offset, cumulative payload bytes) and
    # when it retired; its data and state are gone, and cuts name it at its end
    retired: tuple[int, int, int] | None = None  # … and when (epoch seconds)

    def overlaps(self, other: Segment) -> bool:
        return self.lo < other.hi and other.lo < self.hi


@dataclass(frozen=True)
class Scaled:
    """What a scale makes: the layout after it, and its new segments."""

    layout: Layout
    created: list[Segment]


class Layout:
    """Every segment a stream has had that still matters (active, or sealed and holding data), by
    id. Sealed means replaced by a later epoch's segments (`successors`)."""

    def __init__(self, segments: Iterable[Segment]):
        self.segments: dict[str, Segment] = {s.id: s for s in segments}
        self._successors: dict[str, list[str]] = {sid: [] for sid in self.segments}
        for s in self.segments.values():
            for p in s.predecessors:
                if p in self._successors:
                    self._successors[p].append(s.id)
        self.epoch = max((s.epoch for s in self.segments.values()), default=0)
        # the active segments by where their keys start (for routing)
        self._active = sorted((s for s in self.segments.values() if not self._successors[s.id]), key=lambda s: s.lo)
        self._starts = [s.lo for s in self._active]
        self.ids = sorted(self.segments, key=lambda sid: (self.segments[sid].epoch, _number(sid)))
        self.active_ids = [s.id for s in self._active]
        self.held_ids = [sid for sid in self.ids if self.segments[sid].retired is None]
        self._key = tuple(self.segments[sid] for sid in self.ids)
        self._hash = hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and other._key == self._key

    def __hash__(self) -> int:
        return self._hash

    @classmethod
    @functools.lru_cache(maxsize=64)
    def fixed(cls, n: int) -> Layout:
        """A stream's first epoch: segments "0" … "n-1", equal ranges."""
        return cls(Segment(str(i), i / n, 1.0 if i == n - 1 else (i + 1) / n, 0) for i in range(n))

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence]) -> Layout:
        """A layout from `rows()` as stored: `[id, lo, hi, epoch, [predecessors]]` each, and a
        retired segment's `[end offset, end size, when]` after them."""
        return cls(
            Segment(
                str(r[0]),
                float(r[1]),
                float(r[2]),
                int(r[3]),
                tuple(r[4]),
                None if len(r) < 6 else (r[5][0], r[5][1], r[5][2]),
            )
            for r in rows
        )

    def rows(self) -> list[list]:
        return [
            [s.id, s.lo, s.hi, s.epoch, list(s.predecessors), *([list(s.retired)] if s.retired else [])]
            for s in self._key
        ]

    def retire(self, ends: dict[str, tuple[int, int, int]]) -> Layout:
        """The layout once these sealed segments are passed whole by retention: each at its end
        (offset, cumulative payload bytes) for good, from a time (epoch seconds)."""
        for sid in ends:
            if not self.is_sealed(sid):
                raise ValueError(f"segment {sid} is active: only a sealed segment retires")
        return Layout(replace(s, retired=ends[s.id]) if s.id in ends else s for s in self.segments.values())

    def new_ids(self, count: int) -> list[str]:
        """Ids for a scale's new segments: numbers after the highest this stream has used (the
        newest segment is always active, so never deleted: no id comes back)."""
        start = max((_number(sid) for sid in self.segments), default=-1) + 1
        return [str(start + i) for i in range(count)]

    def __getitem__(self, segment_id: str) -> Segment:
        return self.segments[segment_id]

    def __contains__(self, segment_id: object) -> bool:
        return segment_id in self.segments

    @property
    def active(self) -> list[Segment]:
        return list(self._active)

    def is_sealed(self, segment_id: str) -> bool:
        return bool(self._successors[segment_id])

    def successors(self, segment_id: str) -> list[str]:
        return list(self._successors[segment_id])

    def route(self, position: float) -> str:
        """The active segment whose range holds this key-space position (`[0, 1)`)."""
        i = bisect_right(self._starts, position) - 1
        return self._active[max(i, 0)].id

    def is_after(self, later: str, earlier: str) -> bool:
        """Whether `later` replaced `earlier`, directly or through segments in between (a
        successor's successor). A segment is not after itself."""
        seen, todo = set(), list(self.segments[later].predecessors)
        while todo:
            sid = todo.pop()
            if sid == earlier:
                return True
            if sid not in seen and sid in self.segments:
                seen.add(sid)
                todo.extend(self.segments[sid].predecessors)
        return False

    def without(self, deleted: Iterable[str]) -> Layout:
        """The layout once these sealed segments are gone (a truncation deleted them whole)."""
        gone = set(deleted)
        return Layout(s for s in self.segments.values() if s.id not in gone)

    # -- scaling -----------------------------------------------------------------------------

    def scale(self, seal: Sequence[str], new_ranges: Sequence[Sequence[float]], new_ids: Sequence[str]) -> Scaled:
        """Seal these active segments and make successors over `new_ranges` (each `[lo, hi)`),
        named `new_ids` (new, never an id this stream had): the next epoch. The new ranges must
        cover exactly the sealed segments' keys. Refusals name `seal` or `new_ranges`."""
        sealing = _check_seal(self, seal)
        ranges = _check_ranges(new_ranges)
        if len(new_ids) != len(ranges) or len(set(new_ids)) != len(new_ids) or set(new_ids) & self.segments.keys():
            raise ValueError("new_ids: one new id per new range, none already used")
        if union_of((s.lo, s.hi) for s in sealing) != union_of(ranges):
            covered = ", ".join(f"[{lo:g}, {hi:g})" for lo, hi in union_of((s.lo, s.hi) for s in sealing))
            raise FieldError("new_ranges", f"must cover exactly the sealed segments' keys: {covered}")
        epoch = self.epoch + 1
        created = []
        for sid, (lo, hi) in zip(new_ids, ranges, strict=True):
            preds = tuple(s.id for s in sealing if s.lo < hi and lo < s.hi)
            created.append(Segment(sid, lo, hi, epoch, preds))
        return Scaled(Layout([*self.segments.values(), *created]), created)


def check_scale_shape(seal: object, new_ranges: object) -> None:
    """A scale's fields as sent, before the layout is looked at: `seal` a list of distinct ids,
    `new_ranges` pairs within [0, 1] sharing no key (a request wrong in these is a 400 naming
    the field whatever the stream's epoch)."""
    _check_seal_shape(seal)
    _check_ranges(new_ranges)


def _check_seal_shape(seal: object) -> None:
    if not isinstance(seal, list | tuple) or not seal or not all(isinstance(s, str) for s in seal):
        raise FieldError("seal", "must be a non-empty list of segment ids")
    if len(set(seal)) != len(seal):
        raise FieldError("seal", "names a segment twice")


def _number(segment_id: str) -> int:
    return int(segment_id) if segment_id.isdigit() else -1


def _check_seal(layout: Layout, seal: object) -> list[Segment]:
    _check_seal_shape(seal)
    assert isinstance(seal, list | tuple)  # (checked just now: for the type checker)
    unknown = [s for s in seal if s not in layout]
    if unknown:
        raise FieldError("seal", f"no such segment: {', '.join(unknown)}")
    sealed = [s for s in seal if layout.is_sealed(s)]
    if sealed:
        raise FieldError("seal", f"already sealed (not active): {', '.join(sealed)}")
    return [layout[s] for s in seal]


def _check_ranges(value: object) -> list[tuple[float, float]]:
    if not isinstance(value, list | tuple) or not value:
        raise FieldError("new_ranges", "must be a non-empty list of [lo, hi] pairs")
    ranges = []
    for pair in value:
        if (
            not isinstance(pair, list | tuple)
            or len(pair) != 2
            or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in pair)
        ):
            raise FieldError("new_ranges", "each must be a pair of numbers [lo, hi]")
        lo, hi = float(pair[0]), float(pair[1])
        if not 0.0 <= lo < hi <= 1.0:
            raise FieldError("new_ranges", f"[{lo:g}, {hi:g}] is not a range within [0, 1] with lo < hi")
        ranges.append((lo, hi))
    ranges.sort()
    for (_, a_hi), (b_lo, _) in zip(ranges, ranges[1:], strict=False):
        if b_lo < a_hi:
            raise FieldError("new_ranges", "two ranges share keys")
    return ranges


def union_of(ranges: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Ranges merged where they touch or overlap, in order."""
    out: list[tuple[float, float]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out

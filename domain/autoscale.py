"""When a stream scales by itself (docs/design/stream-scaling.md, "Auto-scaling"): from each
active segment's rates over the last 2, 5, 10 and 20 minutes, which segments split and which
neighbours merge, as one scale step. Plain Python; the rates come from the caller (kept where a
restart does not lose them).

A segment **splits** when any holds: its 2-minute rate is over 5 × the target, its 5-minute rate
over 2 × the target, its 10-minute rate over the target; into `min(scale_factor, ceil(rate /
target))` equal parts (at least 2), `rate` the one that fired. A segment is **cold** when all
hold: its 2-, 5- and 10-minute rates are under the target and its 20-minute rate under half of it.
Two neighbouring cold segments **merge** when the merged segment would not be hot at once (their
10-minute rates together under the target: no merge that the next minute splits again) and the
stream keeps `min_segments`. A segment made or scaled within the cool-down is left alone. A stream
below `min_segments` (the setting was raised) splits its widest segments at once, cool-down or
not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from domain.segment_layout import Layout, Segment

COOL_DOWN_S = 600.0


@dataclass(frozen=True)
class ScalingPolicy:
    kind: str = "fixed"  # "fixed", "by_event_rate", "by_byte_rate"
    target_rate: float = 0.0  # per segment: events/s, or KiB/s
    scale_factor: int = 2
    min_segments: int = 1


@dataclass(frozen=True)
class Rates:
    """One segment's rates (per second) over the last 2, 5, 10 and 20 minutes."""

    m2: float = 0.0
    m5: float = 0.0
    m10: float = 0.0
    m20: float = 0.0


@dataclass(frozen=True)
class ScalePlan:
    """One scale step: the segments to seal and the ranges of their successors, and why."""

    seal: list[str]
    new_ranges: list[list[float]]
    reasons: list[str] = field(default_factory=list)


def plan(
    policy: ScalingPolicy,
    layout: Layout,
    rates: Mapping[str, Rates],
    scaled_at: Mapping[str, float],
    now: float,
    cool_down_s: float = COOL_DOWN_S,
) -> ScalePlan | None:
    """The scale to make now, or None. `scaled_at`: when each active segment was made (a segment
    missing from it is old enough)."""
    active = layout.active  # by where their keys start
    if len(active) < policy.min_segments:
        return _to_minimum(active, policy.min_segments)
    if policy.kind == "fixed" or policy.target_rate <= 0:
        return None
    target = policy.target_rate

    def settled(s: Segment) -> bool:
        return now - scaled_at.get(s.id, -math.inf) >= cool_down_s

    seal: list[str] = []
    ranges: list[list[float]] = []
    reasons: list[str] = []
    split: set[str] = set()
    for s in active:
        r = rates.get(s.id, Rates())
        fired = _hot(r, target)
        if fired is None or not settled(s):
            continue
        rule, rate = fired
        parts = max(2, min(policy.scale_factor, math.ceil(rate / target)))
        step = (s.hi - s.lo) / parts
        seal.append(s.id)
        ranges += [[s.lo + i * step, s.hi if i == parts - 1 else s.lo + (i + 1) * step] for i in range(parts)]
        reasons.append(f"split {s.id} into {parts}: {rule} ({rate:g}/s, target {target:g}/s)")
        split.add(s.id)
    count = len(active) - len(seal) + len(ranges)  # active segments once the splits are made
    i = 0
    while i < len(active) - 1:
        a, b = active[i], active[i + 1]
        ra, rb = rates.get(a.id, Rates()), rates.get(b.id, Rates())
        if (
            a.id not in split
            and b.id not in split
            and a.hi == b.lo
            and settled(a)
            and settled(b)
            and _cold(ra, target)
            and _cold(rb, target)
            and ra.m10 + rb.m10 < target
            and count - 1 >= policy.min_segments
        ):
            seal += [a.id, b.id]
            ranges.append([a.lo, b.hi])
            reasons.append(
                f"merge {a.id} and {b.id}: both cold (10-minute {ra.m10:g}/s and {rb.m10:g}/s, target {target:g}/s)"
            )
            count -= 1
            i += 2
        else:
            i += 1
    if not seal:
        return None
    return ScalePlan(seal, sorted(ranges), reasons)


def _hot(r: Rates, target: float) -> tuple[str, float] | None:
    if r.m2 > 5 * target:
        return "2-minute rate over 5 × target", r.m2
    if r.m5 > 2 * target:
        return "5-minute rate over 2 × target", r.m5
    if r.m10 > target:
        return "10-minute rate over target", r.m10
    return None


def _cold(r: Rates, target: float) -> bool:
    return r.m2 < target and r.m5 < target and r.m10 < target and r.m20 < target / 2


def _to_minimum(active: list[Segment], minimum: int) -> ScalePlan:
    """Split the widest segments in two until the stream has `minimum` (each at most once a step:
    a stream far below it gets there in a few steps, each one epoch)."""
    widest = sorted(active, key=lambda s: (-(s.hi - s.lo), s.lo))[: minimum - len(active)]
    seal, ranges = [], []
    for s in sorted(widest, key=lambda s: s.lo):
        mid = (s.lo + s.hi) / 2
        seal.append(s.id)
        ranges += [[s.lo, mid], [mid, s.hi]]
    reasons = [f"split {sid} in two: the stream has {len(active)} segments, min_segments is {minimum}" for sid in seal]
    return ScalePlan(seal, ranges, reasons)

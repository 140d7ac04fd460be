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
from typing import Any, cast

from domain.errors import FieldError
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


KINDS = ("fixed", "by_event_rate", "by_byte_rate")
MAX_SCALE_FACTOR = 16


def check_scaling_policy(value: object, max_segments: int, field: str = "scaling_policy") -> dict:
    """A stream's `scaling_policy` as sent (`{type, target_rate?, scale_factor?=2,
    min_segments?=1}`), checked and with its defaults; refusals name the field inside it."""
    if not isinstance(value, dict):
        raise FieldError(field, 'must be an object {"type": "fixed"|"by_event_rate"|"by_byte_rate", …}')
    unknown = sorted(set(value) - {"type", "target_rate", "scale_factor", "min_segments"})
    if unknown:
        raise FieldError(f"{field}.{unknown[0]}", "is not a field of a scaling policy")
    kind = value.get("type")
    if kind not in KINDS:
        raise FieldError(f"{field}.type", f"must be one of {', '.join(KINDS)}")
    policy: dict = {"type": kind}
    target = value.get("target_rate")
    if kind == "fixed":
        if "target_rate" in value:  # null too: the schema says a number, and a fixed policy has none
            raise FieldError(f"{field}.target_rate", "a fixed policy has no target rate")
    else:
        rate = float(cast(float, target)) if _number(target) else 0.0
        if not 0 < rate <= 1e9:
            unit = "events/s" if kind == "by_event_rate" else "KiB/s"
            raise FieldError(f"{field}.target_rate", f"must be a number of {unit} per segment, above 0 and at most 1e9")
        policy["target_rate"] = rate
    factor = value.get("scale_factor", 2)
    if not isinstance(factor, int) or isinstance(factor, bool) or not 2 <= factor <= MAX_SCALE_FACTOR:
        raise FieldError(f"{field}.scale_factor", f"must be an integer from 2 to {MAX_SCALE_FACTOR}")
    minimum = value.get("min_segments", 1)
    if not isinstance(minimum, int) or isinstance(minimum, bool) or not 1 <= minimum <= max_segments:
        raise FieldError(f"{field}.min_segments", f"must be an integer from 1 to {max_segments} (CBR_MAX_SEGMENTS)")
    policy.update(scale_factor=factor, min_segments=minimum)
    return policy


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def policy_of(stored: dict) -> ScalingPolicy:
    """The `ScalingPolicy` of a stream's stored `scaling_policy` (empty: fixed)."""
    return ScalingPolicy(
        stored.get("type", "fixed"),
        float(stored.get("target_rate", 0.0)),
        int(stored.get("scale_factor", 2)),
        int(stored.get("min_segments", 1)),
    )


WINDOWS_S = (120, 300, 600, 1200)
SAMPLES_KEPT = 21  # one a minute: the 20-minute window and one before it


def rates_from(samples: list[list[float]], per: float = 1.0) -> Rates:
    """A segment's rates over the last 2, 5, 10 and 20 minutes from its samples `[[time, count],
    …]` (oldest first; `count` ever appended: events, or bytes), divided by `per` (1024 for
    KiB/s). A window longer than the samples reach is measured over what they reach (a new
    segment's 20-minute rate is its rate so far)."""
    if len(samples) < 2:
        return Rates()
    latest_t, latest = samples[-1]
    out = []
    for window in WINDOWS_S:
        start = next(((t, c) for t, c in reversed(samples) if latest_t - t >= window), samples[0])
        span = latest_t - start[0]
        out.append(0.0 if span <= 0 else (latest - start[1]) / span / per)
    return Rates(*out)


def add_sample(samples: list[list[float]], sample: list[float]) -> list[list[float]]:
    """The samples with this one added, at most `SAMPLES_KEPT` kept (the newest)."""
    return [*samples, sample][-SAMPLES_KEPT:]

"""Why is this stream not truncated (or what will go)? The decision the next retention cycle would
make now, by the same gathering and the same `decide` the cycle runs, read only (nothing locked,
recorded or truncated), with what a person needs beside it: what would be reclaimed, what the
limits alone would release, and which subscriber holds the rest back, by how much."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from domain.retention import COMPACTOR, Decision, Subscriber, decide
from retention.cycle.gathering import Prepared, load_streams, prepare_batch
from streams.models import Stream


@dataclass(frozen=True)
class Amount:
    events: int
    bytes: int


@dataclass(frozen=True)
class Explanation:
    decision: Decision
    truncates: bool  # the cut moves some segment's head (a cut at or behind the heads changes nothing)
    reclaimed: Amount  # what truncating at the decision's cut releases
    limits_alone: Decision  # the decision without subscribers or the compactor
    released_by_limits: Amount  # what the limits alone would release
    holder: Subscriber | None  # the active subscriber (or the compactor) at the lower bound, when one holds data back
    held: Amount  # what the holder keeps beyond what the limits alone release
    subscribers: tuple[Subscriber, ...]
    active: tuple[str, ...]
    at: datetime


def _beyond_head(prepared: Prepared, cut) -> Amount:
    if not cut:
        return Amount(0, 0)
    cut = {s: max(int(cut.get(s, 0)), prepared.head[s]) for s in prepared.head}
    sizes = prepared.segment_sizes(cut)
    return Amount(
        sum(cut[s] - prepared.head[s] for s in cut),
        sum(sizes[s] - prepared.head_sizes[s] for s in cut),
    )


def explain(stream: Stream, now: datetime | None = None) -> Explanation | None:
    """None for a stream without a retention policy (nothing decides its retention)."""
    now = now or timezone.now()
    loaded = load_streams([stream.pk])
    if not loaded:
        return None
    (prepared,) = prepare_batch(loaded, now, settings.CBR_RETENTION_INTERVAL, recover=False)
    inputs = prepared.inputs
    decision = decide(inputs)
    limits_only = replace(
        inputs, policy=replace(inputs.policy, consumption_based=False), subscribers=(), compactor=None
    )
    alone = decide(limits_only)
    reclaimed, by_limits = _beyond_head(prepared, decision.cut), _beyond_head(prepared, alone.cut)
    holder, held = None, Amount(0, 0)
    if by_limits.bytes > reclaimed.bytes or by_limits.events > reclaimed.events:
        weighed = [s for s in inputs.subscribers if s.name in decision.active and s.cut is not None]
        if inputs.compactor is not None and COMPACTOR in decision.active:
            weighed.append(inputs.compactor)
        if weighed:
            holder = min(weighed, key=lambda s: sum((s.cut_sizes or {}).values()))
            held = Amount(by_limits.events - reclaimed.events, by_limits.bytes - reclaimed.bytes)
    return Explanation(
        decision=decision,
        truncates=reclaimed.events > 0,
        reclaimed=reclaimed,
        limits_alone=alone,
        released_by_limits=by_limits,
        holder=holder,
        held=held,
        subscribers=inputs.subscribers,
        active=decision.active,
        at=now,
    )

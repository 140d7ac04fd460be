"""The retention decision for one stream, as plain Python (docs/design/retention.md).

`decide(inputs)` takes everything it needs as plain values (the retention set, the policy, the
subscribers' acknowledgement cuts with their sizes, the clock) and returns the cut to truncate at
and the rule that decided, e.g. `"cbr:case-iii:limit_max"`. The local engine and the Spark engine
both call it; nothing here touches Django, the store, Celery or Spark.

Rule names:
- `size:limit_min`, `time:limit_min`: no consumption (or no subscriber registered): Pravega's
  plain rule;
- `cbr:case-i:slb` … `cbr:case-v:max_bound`: the five cases of consumption-based retention;
- `cbr:fallback:limit_min`: subscribers registered, none active for `fallback_after_s`;
- `cbr:no-active:limit_max`: none active, but the max limit wins;
- `consumption:slb`: `limit_type` none with consumption: the SLB alone;
- `cbr:compaction:horizon`: a compacted stream held back at what its compactor has not read yet
  (Pulsar's compaction cursor); only a max-limit rule passes that horizon;
- a decision with no cut carries why in `rule` too (`none:…`), for history and the console.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from domain.cuts import Order, compare, lower_bound
from domain.retention_set import RetentionRecord, RetentionSet, newest_record_at_or_before

INFINITY = float("inf")


@dataclass(frozen=True, slots=True)
class Policy:
    limit_type: str  # "time" | "size" | "none"
    min: int = 0
    max: int | None = None
    consumption_based: bool = False
    subscriber_timeout_s: int | None = None
    fallback_after_s: int | None = None
    on_max_limit: str = "truncate"  # or "reject_publish"


@dataclass(frozen=True, slots=True)
class Subscriber:
    name: str
    cut: Mapping[str, int] | None = field(hash=False)
    # cumulative size at each segment's offset of `cut` (size_till per segment), from the store
    cut_sizes: Mapping[str, int] | None = field(default=None, hash=False)
    acknowledged_at: float | None = None  # epoch seconds of the last cut; None: never
    subscribed_at: float = 0.0
    # the reader group's own `subscriber_timeout_s`, which wins over the stream policy's (PDP-47's
    # open question 3); None: the policy's
    timeout_s: int | None = None


@dataclass(frozen=True, slots=True)
class Inputs:
    now: float
    policy: Policy
    retention_set: RetentionSet
    subscribers: tuple[Subscriber, ...] = ()
    # a compacted stream's compactor, as a subscriber whose cut is the view's horizon (the first
    # offset of each segment it has not folded in): always active, whatever the policy
    compactor: Subscriber | None = None


COMPACTOR = "compaction"  # the compactor's name among the subscribers a decision weighed
# the rules by which the max limit removes what holds (subscribers, the compactor) still keep
MAX_FORCED = frozenset({"cbr:case-iii:limit_max", "cbr:case-v:max_bound", "cbr:no-active:limit_max"})


@dataclass(frozen=True, slots=True)
class Decision:
    cut: Mapping[str, int] | None = field(hash=False)
    rule: str
    slb: Mapping[str, int] | None = field(default=None, hash=False)
    active: tuple[str, ...] = ()  # the subscribers whose cuts were considered
    # True when the max limit was reached but `reject_publish` kept unconsumed data: publishing
    # is refused (507) until subscribers catch up.
    at_max: bool = False


@dataclass(frozen=True, slots=True)
class Bounds:
    limit_min: RetentionRecord | None
    limit_max: RetentionRecord | None
    max_bound: RetentionRecord | None  # time policy only
    over_max: bool  # some record keeps more than max


def bounds(rset: RetentionSet, now: float, policy: Policy) -> Bounds:
    """limit_min, limit_max and max_bound over the retention set ("Bounds")."""
    latest = rset[-1]
    maximum = INFINITY if policy.max is None else policy.max
    minimum = policy.min
    by_size = policy.limit_type == "size"
    by_time = policy.limit_type == "time"
    # delta(rec) = what truncating at rec would keep: bytes (size) or seconds (time); a cycle
    # walks ~50 records a stream here, so the best deltas so far are kept, not recomputed
    limit_min: RetentionRecord | None = None
    limit_max: RetentionRecord | None = None
    max_bound: RetentionRecord | None = None
    min_delta: float = 0  # bytes (int) or seconds (float)
    max_delta: float = 0
    over_max = False
    for rec in rset:  # set order: ties go to the first, as Pravega's comparators do
        d = latest.size - rec.size if by_size else now - rec.time
        if d >= minimum:
            if limit_min is None or d < min_delta:
                limit_min, min_delta = rec, d
            if d <= maximum and (limit_max is None or d > max_delta):
                limit_max, max_delta = rec, d
        if d > maximum:
            over_max = True
        if by_time and d >= maximum:
            max_bound = rec  # later records are newer: the last match is the newest
    return Bounds(limit_min, limit_max or limit_min, max_bound, over_max)


def timeout_of(subscriber: Subscriber, policy_timeout_s: int | None) -> int | None:
    """The subscriber timeout that applies to a subscriber: its group's own when it has one, else
    the stream policy's."""
    return subscriber.timeout_s if subscriber.timeout_s is not None else policy_timeout_s


def is_active(subscriber: Subscriber, now: float, timeout_s: int | None) -> bool:
    """A subscriber is active while its cut is not older than its subscriber timeout (PDP-47's
    'x': its group's own, else `timeout_s`, the policy's); a stale one stays a subscriber, holding
    nothing, until removed."""
    if subscriber.cut is None:
        return False
    since = subscriber.acknowledged_at or subscriber.subscribed_at
    timeout_s = timeout_of(subscriber, timeout_s)
    return timeout_s is None or now - since <= timeout_s


def inactive_since(subscriber: Subscriber, timeout_s: int | None) -> float:
    """When an inactive subscriber stopped being active: its subscriber timeout (`timeout_of`)
    after its last acknowledgement (PDP-47's x), or, for one that never had a cut, when it
    subscribed. PDP-47's y (`fallback_after_s`) counts from the latest such moment among a
    stream's subscribers."""
    since = subscriber.acknowledged_at or subscriber.subscribed_at
    timeout_s = timeout_of(subscriber, timeout_s)
    if subscriber.cut is None or timeout_s is None:
        return since
    return since + timeout_s


def active_subscribers(inputs: Inputs) -> tuple[Subscriber, ...]:
    timeout = inputs.policy.subscriber_timeout_s
    return tuple(s for s in inputs.subscribers if is_active(s, inputs.now, timeout))


def _cuts(active: tuple[Subscriber, ...]) -> list[Mapping[str, int]]:
    """The active subscribers' cuts (`is_active`: each has one)."""
    return [s.cut for s in active if s.cut is not None]


def decide(inputs: Inputs) -> Decision:
    """The truncation cut and the rule that decided (module docstring). A compacted stream's
    compactor holds truncation back like one more active subscriber: where the policy's own
    decision would remove events the compactor has not read, the stream is decided again with
    the compactor's horizon among the subscribers' cuts (and consumption counted, whatever the
    policy says of it), so only the max limit may pass the horizon."""
    alone = _decide(inputs)
    compactor = inputs.compactor
    if compactor is None or compactor.cut is None or alone.cut is None or alone.rule in MAX_FORCED:
        return alone
    if all(offset <= compactor.cut.get(seg, 0) for seg, offset in alone.cut.items()):
        return alone  # at or before the horizon in every segment: nothing unread goes
    policy = inputs.policy
    held_subscribers = (*(active_subscribers(inputs) if policy.consumption_based else ()), compactor)
    held_policy = Policy(
        policy.limit_type,
        policy.min,
        policy.max,
        consumption_based=True,
        on_max_limit=policy.on_max_limit,
    )
    held = _decide(Inputs(inputs.now, held_policy, inputs.retention_set, held_subscribers))
    if held.rule in MAX_FORCED or held.at_max:
        return held
    if held.cut is None:
        return Decision(None, "none:compaction:horizon", held.slb, held.active)
    return Decision(held.cut, "cbr:compaction:horizon", held.slb, held.active)


def _decide(inputs: Inputs) -> Decision:
    policy = inputs.policy
    rset = inputs.retention_set
    if policy.limit_type == "none":
        return _consumption_only(inputs)
    if not rset:
        return Decision(None, "none:empty-retention-set")
    b = bounds(rset, inputs.now, policy)
    if not policy.consumption_based or not inputs.subscribers:
        return _plain(b, policy.limit_type)
    active = active_subscribers(inputs)
    if not active:
        return _no_active_subscriber(inputs, b)
    slb = lower_bound(_cuts(active))
    names = tuple(s.name for s in active)
    if policy.limit_type == "size":
        decision = _size_with_consumption(inputs, b, slb, _size_at(active, slb))
    else:
        decision = _time_with_consumption(inputs, b, slb)
    return Decision(decision.cut, decision.rule, slb, names, decision.at_max)


def _plain(b: Bounds, limit_type: str) -> Decision:
    if b.limit_min is None:
        return Decision(None, f"none:{limit_type}:nothing-old-enough")
    return Decision(b.limit_min.cut, f"{limit_type}:limit_min")


def _consumption_only(inputs: Inputs) -> Decision:
    if not inputs.policy.consumption_based:
        return Decision(None, "none:no-limits")
    active = active_subscribers(inputs)
    if not active:
        return Decision(None, "none:no-active-subscriber")
    slb = lower_bound(_cuts(active))
    return Decision(slb, "consumption:slb", slb, tuple(s.name for s in active))


def _no_active_subscriber(inputs: Inputs, b: Bounds) -> Decision:
    """Subscribers registered, none active: wait, fall back after `fallback_after_s`, and let the
    max limit win meanwhile (docs/design/retention.md)."""
    policy = inputs.policy
    if policy.fallback_after_s is not None:
        timeout = policy.subscriber_timeout_s
        none_active_since = max(inactive_since(s, timeout) for s in inputs.subscribers)
        if inputs.now - none_active_since >= policy.fallback_after_s:
            if b.limit_min is None:
                return Decision(None, "none:fallback:nothing-old-enough")
            return Decision(b.limit_min.cut, "cbr:fallback:limit_min")
    if policy.max is not None and b.over_max:
        if policy.on_max_limit == "reject_publish":
            return Decision(None, "none:no-active:max-reached", at_max=True)
        # a record keeps more than max, and max >= min (domain.policy_spec): limit_min, so
        # limit_max, is set
        assert b.limit_max is not None
        return Decision(b.limit_max.cut, "cbr:no-active:limit_max")
    return Decision(None, "none:no-active-subscriber")


def _size_at(active: tuple[Subscriber, ...], slb: Mapping[str, int]) -> int:
    """size_till(SLB) from the subscribers' per-segment sizes (the SLB takes, per segment, one of
    their offsets)."""
    total = 0
    for seg, offset in slb.items():
        for s in active:
            assert s.cut is not None  # an active subscriber has a cut (`is_active`)
            if s.cut[seg] == offset:
                assert s.cut_sizes is not None  # a cut is gathered with its sizes
                total += s.cut_sizes[seg]
                break
    return total


def _size_with_consumption(inputs: Inputs, b: Bounds, slb: Mapping[str, int], slb_size: int) -> Decision:
    policy = inputs.policy
    rset = inputs.retention_set
    cur = rset[-1].size
    kept = cur - slb_size
    maximum = INFINITY if policy.max is None else policy.max
    if kept < policy.min:  # the SLB is too recent
        if b.limit_min is None:
            return Decision(None, "none:size:nothing-old-enough")
        if compare(b.limit_min.cut, slb) is Order.BEFORE:
            return Decision(b.limit_min.cut, "cbr:case-ii:limit_min")
        rec = newest_record_at_or_before(rset, slb)
        if rec is None:
            return Decision(None, "none:case-iv:no-record-before-slb")
        return Decision(rec.cut, "cbr:case-iv:retention_set")
    if kept < maximum:
        return Decision(slb, "cbr:case-i:slb")
    # case iii: the SLB would keep max or more. With no record keeping at least min (the SLB lies
    # behind the oldest record) there is no limit_max to purge more with: the SLB it is.
    if b.limit_max is not None and cur - b.limit_max.size < kept:
        if policy.on_max_limit == "reject_publish":
            return Decision(slb, "cbr:case-iii:slb:reject_publish", at_max=True)
        return Decision(b.limit_max.cut, "cbr:case-iii:limit_max")
    return Decision(slb, "cbr:case-iii:slb")


def _time_with_consumption(inputs: Inputs, b: Bounds, slb: Mapping[str, int]) -> Decision:
    reject = inputs.policy.on_max_limit == "reject_publish"
    if b.limit_min is None:  # nothing is old enough yet, even with an SLB
        return Decision(None, "none:time:nothing-old-enough")
    order = compare(b.limit_min.cut, slb)
    if order is Order.BEFORE:
        return Decision(b.limit_min.cut, "cbr:case-ii:limit_min")
    if order is Order.OVERLAPS:
        rec = newest_record_at_or_before(inputs.retention_set, slb)
        if rec is None:
            return Decision(None, "none:case-iv:no-record-before-slb")
        return Decision(rec.cut, "cbr:case-iv:retention_set")
    if b.max_bound is None:
        return Decision(slb, "cbr:case-i:slb")
    order = compare(slb, b.max_bound.cut)
    if order is Order.EQUAL_OR_AFTER:
        return Decision(slb, "cbr:case-i:slb")
    if reject:
        return Decision(slb, "cbr:case-iii:slb:reject_publish", at_max=True)
    if order is Order.BEFORE:
        assert b.limit_max is not None  # limit_max falls back on limit_min, set (above)
        return Decision(b.limit_max.cut, "cbr:case-iii:limit_max")
    return Decision(b.max_bound.cut, "cbr:case-v:max_bound")


def considered(inputs: Inputs, decision: Decision) -> list[dict]:
    """The subscribers a decision weighed, with their cuts, for the truncation record."""
    weighed = (*inputs.subscribers, *((inputs.compactor,) if inputs.compactor is not None else ()))
    return [
        {"name": s.name, "cut": dict(s.cut), "acknowledged_at": s.acknowledged_at}
        | ({"timeout_s": s.timeout_s} if s.timeout_s is not None else {})
        for s in weighed
        if s.name in decision.active and s.cut is not None  # weighed: active, so with a cut
    ]

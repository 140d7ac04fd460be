"""The Redis tracker (one Lua script per step) follows the plain rules exactly: the same random
interleavings of reads, acks, nacks and expiry, run through both, leave the same state."""

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.acks import AckPolicy, Delivery, Poison, SegmentAcks
from groups.ack_tracker import SegmentTracker

TAIL = 30
LEASE_S = 10.0
_ids = itertools.count(1)

op = st.one_of(
    st.tuples(st.just("read"), st.sampled_from("abc"), st.integers(1, 6)),
    st.tuples(st.just("delayed"), st.integers(0, TAIL), st.integers(1, 20)),
    st.tuples(st.just("fanout"), st.just(0), st.booleans()),
    st.tuples(st.just("index"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("view"), st.integers(1, 12), st.integers(0, 2**12 - 1)),
    st.tuples(st.just("expire"), st.integers(1, 12), st.integers(0, 2**12 - 1)),
    st.tuples(st.just("truncate"), st.integers(0, TAIL), st.just(0)),
    st.tuples(st.just("dead"), st.just(0), st.just(0)),
    st.tuples(st.just("policy"), st.sampled_from(list(Poison)), st.integers(1, 3)),
    st.tuples(st.just("ack"), st.integers(0, 60), st.booleans()),
    st.tuples(st.just("nack"), st.integers(0, 60), st.integers(0, 4)),  # 4: no delay, the backoff
    st.tuples(st.just("sink-nack"), st.integers(0, 60), st.sampled_from(["search", "archive"])),
    st.tuples(st.just("wait"), st.integers(1, 15), st.just(0)),
    st.tuples(st.just("sink"), st.integers(0, 60), st.sampled_from(["search", "archive", "nope"])),
)


def same(model: SegmentAcks, tracker: SegmentTracker, now: float = 0.0) -> None:
    got = tracker.state()
    assert tracker.in_flight(now) == model.in_flight(now)
    assert got.floor == model.floor and got.next == model.next
    assert got.leases == {o: lease.epoch for o, lease in model.leases.items()}
    assert got.acked == model.acked
    assert got.retry == pytest.approx(model.retry)
    assert got.poisoned == {o: what for o, what in model.poisoned.items() if o >= model.floor}
    assert got.dead == pytest.approx(model.dead) and got.halted_at == model.halted_at
    assert got.sinks_acked == {o: sinks for o, sinks in model.sinks_acked.items() if sinks}


backoffs = st.just(()) | st.lists(st.integers(0, 20).map(float), min_size=1, max_size=3).map(tuple)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(op, max_size=80),
    st.sampled_from(list(Poison)),
    st.integers(1, 3),
    st.booleans(),
    backoffs,
    st.sampled_from([AckPolicy.EXPLICIT, AckPolicy.EXPLICIT, AckPolicy.NONE]),
)
def test_redis_and_the_plain_rules_agree_step_by_step(redis, ops, on_poison, max_deliveries, fan_out, backoff, policy):
    sinks = ("archive", "search") if fan_out else ()
    rules = {"backoff": backoff, "ack_policy": policy}
    model = SegmentAcks()
    tracker = SegmentTracker(redis, f"test-{next(_ids)}", "0", index_key=f"cbr:test:index:{next(_ids)}")
    redis.hset(tracker.index_key, mapping={"released": 0, "recovered": 1})
    released, live = 0.0, True  # the stream's delayed index: what it released, and whether live
    try:
        now = 1000.0
        head = 0
        dead: list[int] = []
        handed: list[Delivery] = []
        passed: dict[int, float] = {}  # delayed events shown to a read (what the index holds)
        for kind, a, b in ops:
            if kind in ("read", "delayed"):
                consumer, limit = (a, b) if kind == "read" else ("a", 3)
                delayed = {a: now + b} if kind == "delayed" else None
                passed.update(delayed or {})
                args = (now, consumer, limit, TAIL, LEASE_S, max_deliveries, on_poison)
                want = model.hand_out(*args, head=head, delayed=delayed, released=released, index_live=live, **rules)
                got = tracker.hand_out(*args, head=head, delayed=delayed, **rules)
                assert got == want
                handed += got.deliveries
                dead = got.dead_letter
            elif kind == "view":  # reading a compacted view: of the next a offsets, those in mask
                start = model.next
                present = [start + i for i in range(a) if b >> i & 1]
                args = (now, "a", 100, TAIL, LEASE_S, max_deliveries, on_poison)
                want = model.hand_out(
                    *args,
                    head=head,
                    scan_until=start + a,
                    present=present,
                    released=released,
                    index_live=live,
                    **rules,
                )
                got = tracker.hand_out(*args, head=head, scan_until=start + a, present=present, **rules)
                assert got == want
                handed += got.deliveries
            elif kind == "expire":  # of the next a offsets, those in mask are past their time to live
                start = model.next
                expired = [start + i for i in range(a) if b >> i & 1]
                args = (now, "b", 5, TAIL, LEASE_S, max_deliveries, on_poison)
                want = model.hand_out(
                    *args, head=head, scan_until=start + a, expired=expired, released=released, index_live=live, **rules
                )
                got = tracker.hand_out(*args, head=head, scan_until=start + a, expired=expired, **rules)
                assert got == want and got.expired == want.expired
                assert not {d.offset for d in got.deliveries} & set(expired)
                handed += got.deliveries
            elif kind == "fanout":  # the index releases what is due (all it holds, when b)
                due = {o: at for o, at in passed.items() if b or at <= now}
                assert tracker.fan_out(due) == model.fan_out(due)
            elif kind == "index":  # the index released up to now + a; lost and not recovered: not b
                released, live = max(released, now + a), b
                redis.hset(tracker.index_key, "released", int(released * 1000))
                if live:
                    redis.hset(tracker.index_key, "recovered", 1)
                else:
                    redis.hdel(tracker.index_key, "recovered")
            elif kind == "truncate":
                head = max(head, a)
            elif kind == "dead":
                model.dead_lettered(dead)
                tracker.dead_lettered(dead)
            elif kind == "policy":
                on_poison, max_deliveries = a, b
            elif kind in ("ack", "sink") and handed:
                d = handed[a % len(handed)]
                if kind == "ack" and b:
                    d = Delivery(d.offset, max(1, d.epoch - 1))
                sink = b if kind == "sink" else (sinks[0] if sinks else None)
                assert tracker.ack(d, sink, sinks) == model.ack(d, sink, sinks)
            elif kind == "nack" and handed:
                d = handed[a % len(handed)]
                delay = None if b == 4 else float(b)
                want = model.nack(d, now, delay, backoff)
                assert tracker.nack(d, now, delay, backoff=backoff) == want
            elif kind == "sink-nack" and handed and sinks:
                d = handed[a % len(handed)]
                want = model.nack(d, now, None, backoff, sink=b)
                assert tracker.nack(d, now, None, backoff=backoff, sink=b) == want
            elif kind == "wait":
                now += a
            same(model, tracker, now)
    finally:
        tracker.forget()
        redis.delete(tracker.index_key)
        redis.delete(tracker.index_key)


def test_a_tracker_redis_forgot_starts_again_from_the_persisted_floor(redis):
    tracker = SegmentTracker(redis, f"test-{next(_ids)}", "0")
    try:
        got = tracker.hand_out(0.0, "a", 5, TAIL, LEASE_S, 5, Poison.SKIP, floor=12).deliveries
        assert [d.offset for d in got] == [12, 13, 14, 15, 16]
        for d in got[:3]:
            assert tracker.ack(d).acked
        assert tracker.state().floor == 15
        tracker.forget()  # Redis lost everything: FLUSHDB, a failover without persistence
        again = tracker.hand_out(1.0, "a", 5, TAIL, LEASE_S, 5, Poison.SKIP, floor=15).deliveries
        assert [d.offset for d in again] == [15, 16, 17, 18, 19]  # 15, 16 come again: at-least-once
    finally:
        tracker.forget()


def test_an_ack_from_an_expired_lease_is_refused_and_the_new_holder_acks(redis):
    tracker = SegmentTracker(redis, f"test-{next(_ids)}", "0")
    try:
        (first,) = tracker.hand_out(0.0, "a", 1, TAIL, LEASE_S, 5, Poison.SKIP).deliveries
        (again,) = tracker.hand_out(LEASE_S + 1, "b", 1, TAIL, LEASE_S, 5, Poison.SKIP).deliveries
        assert (again.offset, again.delivery_count) == (first.offset, 2)
        assert tracker.ack(first).reason == "stale"
        assert tracker.nack(first, LEASE_S + 2).reason == "stale"
        assert tracker.ack(again).acked and tracker.state().floor == 1
    finally:
        tracker.forget()


def test_a_restored_redis_behind_the_persisted_floor_is_lifted_to_it(redis):
    """Redis restored from an old snapshot knows a floor below the persisted one: what the
    database says was processed is not handed out again, and nothing counts as missed."""
    tracker = SegmentTracker(redis, f"test-{next(_ids)}", "0")
    try:
        tracker.hand_out(0.0, "a", 3, TAIL, LEASE_S, 5, Poison.SKIP)
        out = tracker.hand_out(1.0, "a", 2, TAIL, LEASE_S, 5, Poison.SKIP, floor=8)
        assert [d.offset for d in out.deliveries] == [8, 9] and out.missed == 0 and out.floor == 8
        assert tracker.state().leases == {8: 1, 9: 1}
    finally:
        tracker.forget()


def test_a_batch_naming_a_delivery_twice_counts_it_once(redis):
    tracker = SegmentTracker(redis, f"test-{next(_ids)}", "0")
    try:
        got = tracker.hand_out(0.0, "a", 3, TAIL, LEASE_S, 5, Poison.SKIP).deliveries
        results, floor = tracker.ack_many([got[1], got[0], got[1], got[2]])
        assert [r.acked for r in results] == [True, True, False, True]
        assert results[2].reason == "already-acked" and floor == 3
    finally:
        tracker.forget()


def test_an_ack_by_runs_answers_each_delivery_of_a_run_as_the_same_ids_spelled_out_would(redis):
    # given two trackers in one state: 10 handed out, 3 of them given back and handed out again
    # (epoch 2), one of those acknowledged already
    trackers = [SegmentTracker(redis, f"test-{next(_ids)}", "0") for _ in range(2)]
    try:
        for tracker in trackers:
            tracker.hand_out(0.0, "a", 10, TAIL, LEASE_S, 5, Poison.SKIP)
            tracker.nack_many([Delivery(o, 1) for o in (3, 4, 5)], 0.0, 0.0)
            tracker.hand_out(1.0, "a", 3, TAIL, LEASE_S, 5, Poison.SKIP)
            tracker.ack_many([Delivery(4, 2)])
        # when one acks by runs a range at epoch 1 (its 3-5 are stale or acked), a range of
        # redeliveries and offsets never handed out, the other the same deliveries id by id
        runs = [(0, 6, 1), (3, 5, 2), (12, 13, 1)]
        spelled = [Delivery(o, e) for first, last, e in runs for o in range(first, last + 1)]
        by_runs = trackers[0].ack_runs(runs)
        by_ids = trackers[1].ack_many(spelled)

        # then each position gets the same answer, and both states agree
        refused, floor = by_runs
        assert [refused.get(i) for i in range(len(spelled))] == [r.reason if not r.acked else None for r in by_ids[0]]
        assert refused == {3: "stale", 4: "already-acked", 5: "stale", 8: "already-acked", 10: "unknown", 11: "unknown"}
        assert floor == by_ids[1] == 7 and trackers[0].state() == trackers[1].state()
    finally:
        for tracker in trackers:
            tracker.forget()


def test_a_long_run_of_out_of_order_acks_keeps_exact_state_across_bitmap_rebases(redis):
    """The processed-offset bitmap is cut below the floor as the floor moves (every 64 Ki
    offsets): the floor and the acknowledged offsets above it stay exact."""
    tracker = SegmentTracker(redis, f"test-{next(_ids)}", "0")
    model = SegmentAcks()
    try:
        n = 150_000
        got = tracker.hand_out(0.0, "a", n, n, 1e9, 5, Poison.SKIP).deliveries
        want = model.hand_out(0.0, "a", n, n, 1e9, 5, Poison.SKIP).deliveries
        assert got == want
        rng = random.Random(7)
        order = []
        for i in range(0, n, 5000):
            window = got[i : i + 5000]
            rng.shuffle(window)
            order += window
        held_back = set(order[100_000:100_100])  # some acks arrive last
        order = [d for d in order if d not in held_back] + list(held_back)
        for i in range(0, n, 1000):
            batch = order[i : i + 1000]
            _, floor = tracker.ack_many(batch)
            for d in batch:
                model.ack(d)
            assert floor == model.floor
            if i % 20_000 == 0:
                assert tracker.state().acked == model.acked
        assert tracker.state().floor == n and not tracker.state().acked
        assert int(redis.hget(tracker.keys[0], "abase")) > 65_536
    finally:
        tracker.forget()


def test_fan_out_over_a_wide_span_of_offsets_looks_bits_up_as_a_narrow_one_does(redis):
    """FAN_OUT reads the bitmaps once over a batch's span, or a block at a time when the span is
    much wider than the batch: both skip what is leased or processed, and queue the rest once."""
    tracker = SegmentTracker(redis, f"test-{next(_ids)}", "0")
    model = SegmentAcks()
    redis.hset(tracker.index_key, "recovered", 1)  # the stream's index is live
    try:
        later = {0: 500.0, 39_999: 500.0, 40_000: 501.0}
        args = (0.0, "a", 40_000, 40_001, LEASE_S, 5, Poison.SKIP)
        got = tracker.hand_out(*args, delayed=later)
        assert got == model.hand_out(*args, delayed=later)
        assert len(got.deliveries) == 39_998  # 1 … 39 998: the delayed ones passed over
        six = next(d for d in got.deliveries if d.offset == 6)
        assert tracker.ack(six).acked and model.ack(six).acked
        wide = {0: 500.0, 5: 500.0, 6: 500.0, 39_999: 500.0, 40_000: 501.0}  # 5 leased, 6 acked
        assert tracker.fan_out(wide) == model.fan_out(wide) == [0, 39_999, 40_000]
        narrow = {5: 500.0, 6: 500.0, 7: 500.0, 39_999: 500.0}
        assert tracker.fan_out(narrow) == model.fan_out(narrow) == []  # queued already, or not delayed
        same(model, tracker)
    finally:
        tracker.forget()
        redis.delete(tracker.index_key)

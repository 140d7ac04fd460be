"""Leases kept per hand-out and bits changed a batch at a time (groups.ack_scripts): an old
hand-out's expiry never ends a newer delivery's lease, a hand-out's record goes once the floor
passes it, batches spread over many bitmap blocks keep exact state, a state kept in the older
per-offset shape starts again from the persisted floor, and a pending delivery costs Redis a
few bytes."""

import itertools
import random

import pytest

from domain.acks import Delivery, Poison, SegmentAcks
from groups.ack_tracker import SegmentTracker

LEASE_S = 10.0
_ids = itertools.count(10_000)


@pytest.fixture
def tracker(redis):
    t = SegmentTracker(redis, f"test-{next(_ids)}", "0")
    yield t
    t.forget()


def test_an_older_hand_out_expiring_leaves_the_newer_delivery_of_an_offset_alone(tracker):
    # given offsets 0-4 handed out at 0 (leases to 10), offset 2 given back and handed out again at 5
    first = tracker.hand_out(0.0, "a", 5, 100, LEASE_S, 5, Poison.SKIP).deliveries
    assert tracker.nack(first[2], 1.0).acked
    (again,) = tracker.hand_out(5.0, "a", 1, 5, LEASE_S, 5, Poison.SKIP).deliveries
    assert (again.offset, again.epoch) == (2, 2)
    # when the first hand-out expires
    assert tracker.lease_counts(11.0) == (1, 4)
    redelivered = tracker.hand_out(11.0, "a", 10, 5, LEASE_S, 5, Poison.SKIP).deliveries
    # then its four leases come again; offset 2's second delivery is still live and acks
    assert sorted((d.offset, d.epoch) for d in redelivered) == [(0, 2), (1, 2), (3, 2), (4, 2)]
    assert tracker.state().leases == {0: 2, 1: 2, 2: 2, 3: 2, 4: 2}
    assert tracker.ack(again).acked
    assert tracker.ack(first[0]).reason == "stale"


def test_a_hand_out_is_forgotten_once_the_floor_passes_it(tracker, redis):
    # given three hand-outs with an hour's lease
    handed = []
    for i in range(3):
        handed += tracker.hand_out(float(i), "a", 100, 1000, 3600.0, 5, Poison.SKIP).deliveries
    assert redis.zcard(tracker.keys[1]) == 3
    # when all but the last offset are acknowledged
    _, floor = tracker.ack_many(handed[:-1])
    # then the hand-outs wholly below the floor are gone before they expire
    assert floor == 299 and redis.zcard(tracker.keys[1]) == 1
    _, floor = tracker.ack_many(handed[-1:])
    assert floor == 300 and redis.zcard(tracker.keys[1]) == 0
    assert tracker.lease_counts(10_000.0) == (0, 0)


def test_batches_spread_over_many_bitmap_blocks_keep_exact_state(tracker):
    """Offsets far apart in one batch (bitmap blocks of 32 Ki offsets, masks of 4 Ki): acks,
    nacks, duplicates and stale ids, compared with the plain rules."""
    model = SegmentAcks()
    n = 200_000
    args = (0.0, "a", n, n, 1e9, 5, Poison.SKIP)
    assert tracker.hand_out(*args).deliveries == model.hand_out(*args).deliveries
    rng = random.Random(11)
    picked = rng.sample(range(n), 3000)
    acks = [Delivery(o, 1) for o in picked[:2000]]
    acks += [acks[5], Delivery(picked[2000], 2), Delivery(n + 5, 1)]  # a repeat, a stale id, an unknown one
    got, floor = tracker.ack_many(acks)
    want = [model.ack(d) for d in acks]
    assert got == want and floor == model.floor
    nacks = [Delivery(o, 1) for o in picked[2000:]] + [Delivery(picked[0], 1)]  # the last: acked
    assert tracker.nack_many(nacks, 1.0, 5.0) == [model.nack(d, 1.0, 5.0) for d in nacks]
    got = tracker.state()
    assert got.leases == {o: lease.epoch for o, lease in model.leases.items()}
    assert got.acked == model.acked and got.retry == pytest.approx(model.retry)
    again = tracker.hand_out(7.0, "a", 2000, n, 1e9, 5, Poison.SKIP).deliveries
    assert again == model.hand_out(7.0, "a", 2000, n, 1e9, 5, Poison.SKIP).deliveries
    assert len(again) == 1000 and all(d.epoch == 2 for d in again)


def test_a_state_kept_in_the_older_shape_starts_again_from_the_persisted_floor(tracker, redis):
    # given a state an older release kept: no layout, one lease member per offset
    state, leases = tracker.keys[0], tracker.keys[1]
    redis.hset(state, mapping={"floor": 3, "next": 9, "abase": 0})
    redis.zadd(leases, {str(o): 50.0 for o in range(3, 9)})
    # when a consumer reads (the database's floor is 5)
    out = tracker.hand_out(1.0, "a", 4, 100, LEASE_S, 5, Poison.SKIP, floor=5)
    # then everything above the persisted floor is delivered again, in the new shape
    assert [(d.offset, d.epoch) for d in out.deliveries] == [(5, 1), (6, 1), (7, 1), (8, 1)]
    assert out.floor == 5 and redis.hget(state, "layout") == b"2"
    assert tracker.state().leases == {5: 1, 6: 1, 7: 1, 8: 1}
    assert redis.zcard(leases) == 1


def test_a_pending_delivery_costs_redis_a_few_bytes(tracker, redis):
    # given 100 000 deliveries handed out 1000 at a time, none acknowledged
    for i in range(100):
        tracker.hand_out(float(i), "a", 1000, 100_000, 3600.0, 5, Poison.SKIP)
    # then the tracker's keys hold them in a bitmap and one member per hand-out
    used = sum(redis.memory_usage(k, samples=0) or 0 for k in tracker.keys)
    assert used / 100_000 < 4  # bytes per pending delivery (it was 96 with a member per offset)
    assert tracker.lease_counts(10.0) == (100_000, 0)


def test_counting_leases_drops_expired_hand_outs_that_name_no_live_lease(tracker, redis):
    # given a hand-out acknowledged but for an offset held back by a later hand-out's lease
    first = tracker.hand_out(0.0, "a", 5, 100, LEASE_S, 5, Poison.SKIP).deliveries
    assert tracker.nack(first[0], 1.0).acked
    (again,) = tracker.hand_out(2.0, "a", 1, 5, LEASE_S, 5, Poison.SKIP).deliveries
    _, floor = tracker.ack_many(first[1:])
    assert floor == 0 and redis.zcard(tracker.keys[1]) == 2
    # when a read counts the leases after the first hand-out expired
    assert tracker.lease_counts(11.0) == (1, 0)
    # then its record is gone; the live one stays, and expires in its turn
    assert redis.zcard(tracker.keys[1]) == 1
    assert tracker.lease_counts(12.0) == (0, 1)
    assert tracker.ack(again).acked and tracker.state().floor == 5


def test_hand_outs_of_one_delivery_cost_no_more_than_a_member_per_offset_did(tracker, redis):
    """A read of one event is one record: as short as the sorted-set member per offset that the
    tracker kept before (~96 B a pending delivery); their expiries still end the right leases.
    Checked on what is stored, not on MEMORY USAGE, which depends on the server's allocator
    (jemalloc's and libc's round the same members differently). A named consumer adds its name
    (`in_flight` counts by it)."""
    for i in range(2000):
        tracker.hand_out(float(i), "" if i % 2 else "a", 1, 2000, 3600.0, 5, Poison.SKIP)
    # each unnamed hand-out's record is the offset alone, scored by its expiry: what the
    # per-offset shape kept; a named one's, the offset and "@name"
    records = redis.zrange(tracker.keys[1], 0, -1, withscores=True)
    assert records == [(f"{o}{'' if o % 2 else '@a'}".encode(), o + 3600.0) for o in range(2000)]
    assert tracker.in_flight(3600.5) == {"a": 999, "": 1000}  # 0 expired at 3600
    assert tracker.nack(Delivery(7, 1), 2000.0).acked
    again = tracker.hand_out(2001.0, "a", 1, 2000, 3600.0, 5, Poison.SKIP).deliveries
    assert [(d.offset, d.epoch) for d in again] == [(7, 2)]
    # by 3610.5 the hand-outs of offsets 0-10 expired; 7's second delivery is live until 5601
    assert tracker.lease_counts(3610.5) == (1990, 10)
    assert tracker.in_flight(3610.5) == {"a": 995, "": 995}  # 0-10 expired; 7 came again to a


def test_a_reads_counts_come_in_one_answer(tracker, redis):
    # given a segment never read: nothing is set
    assert tracker.read_counts(0.0, LEASE_S) == [None, None, 0, 0, 0, 0, None]
    # and then five offsets handed out at 0, one of them given back for 5 s
    first = tracker.hand_out(0.0, "a", 5, 100, LEASE_S, 5, Poison.SKIP).deliveries
    assert tracker.nack(first[0], 1.0, 5.0).acked
    # when a read counts at 3, at 6 and after the leases expired at 10
    early, due, expired = (tracker.read_counts(at, LEASE_S) for at in (3.0, 6.0, 11.0))
    # then next is where the hand-outs stopped; the nacked offset is a retry due from 6 on (and
    # no longer leased), the other four leases expire at 10
    # (and the earliest thing due later, for a read that waits: the retry at 6, then the leases
    # at 10 once the retry is handed out)
    assert early == [b"5", None, 4, 0, 0, 0, b"6"]
    assert due == [b"5", None, 4, 0, 1, 0, b"6"]
    assert expired == [b"5", None, 0, 4, 1, 0, b"6"]
    # and a dead-letter claim counts once it is older than a lease
    redis.zadd(tracker.keys[7], {"3": 20.0})
    assert tracker.read_counts(25.0, LEASE_S)[5] == 0 and tracker.read_counts(30.0, LEASE_S)[5] == 1

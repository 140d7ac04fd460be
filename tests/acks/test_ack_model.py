"""The acknowledgement rules (domain.acks) on random interleavings of read, ack, nack and
lease expiry by several consumers: the floor never passes an unacknowledged offset, never moves
back, and every event ends acknowledged or poisoned exactly as the policy says."""

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.acks import Delivery, Poison, SegmentAcks

TAIL = 40
LEASE_S = 10.0

op = st.one_of(
    st.tuples(st.just("read"), st.sampled_from("abc"), st.integers(1, 6)),
    st.tuples(st.just("ack"), st.integers(0, 60), st.booleans()),
    st.tuples(st.just("nack"), st.integers(0, 60), st.integers(0, 3)),
    st.tuples(st.just("wait"), st.integers(1, 15), st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(op, max_size=120), st.sampled_from(list(Poison)), st.integers(1, 4))
def test_the_floor_only_ever_covers_processed_offsets(ops, on_poison, max_deliveries):
    acks = SegmentAcks()
    now = 0.0
    handed: list[Delivery] = []
    processed: set[int] = set()  # acknowledged by a live lease, or poisoned as processed
    last_floor = 0
    for kind, a, b in ops:
        if kind == "read":
            out = acks.hand_out(now, a, b, TAIL, LEASE_S, max_deliveries, on_poison)
            got = out.deliveries
            if b % 2:  # sometimes the dead-letter append is lost and claimed again later
                acks.dead_lettered(out.dead_letter)
            live = {o for o, lease in acks.leases.items()}
            assert all(d.offset in live for d in got)
            assert len({d.offset for d in got}) == len(got)  # never the same offset twice at once
            handed += got
        elif kind == "ack" and handed:
            d = handed[a % len(handed)]
            if b:  # sometimes a delivery from an older epoch
                d = Delivery(d.offset, max(1, d.epoch - 1))
            lease = acks.leases.get(d.offset)
            result = acks.ack(d)
            assert result.acked == (lease is not None and lease.epoch == d.epoch)
            if result.acked:
                processed.add(d.offset)
        elif kind == "nack" and handed:
            d = handed[a % len(handed)]
            acks.nack(d, now, float(b))
        elif kind == "wait":
            now += a
        processed |= {o for o, what in acks.poisoned.items() if what == "skip"}
        processed |= {o for o, what in acks.poisoned.items() if what == "dead_letter" and o not in acks.dead}
        assert acks.floor >= last_floor
        assert set(range(acks.floor)) <= processed  # nothing below the floor was left unprocessed
        assert all(o >= acks.floor for o in acks.leases)
        if acks.halted_at is not None:
            assert acks.floor <= acks.halted_at
        last_floor = acks.floor


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(list(Poison)), st.integers(1, 3), st.sets(st.integers(0, TAIL - 1), max_size=5))
def test_every_event_ends_acknowledged_or_poisoned_per_the_policy(on_poison, max_deliveries, failing):
    """Consumers that always fail on some offsets and ack the rest: after enough rounds, the
    floor reaches the tail (dead_letter, skip) or stops at the first failing offset (halt)."""
    acks = SegmentAcks()
    now = 0.0
    for _ in range(max_deliveries + 3):
        out = acks.hand_out(now, "c", 100, TAIL, LEASE_S, max_deliveries, on_poison)
        acks.dead_lettered(out.dead_letter)
        for d in out.deliveries:
            if d.offset in failing:
                acks.nack(d, now)
            else:
                assert acks.ack(d).acked
        now += 1
    if on_poison is Poison.HALT and failing:
        assert acks.floor == min(failing) == acks.halted_at
    else:
        assert acks.floor == TAIL
        assert set(acks.poisoned) == failing
        assert all(acks.epochs.get(o, 0) <= max_deliveries for o in failing)


def test_an_expired_lease_is_handed_to_another_consumer_and_the_old_ack_is_refused():
    acks = SegmentAcks()
    (first,) = acks.hand_out(0.0, "a", 1, TAIL, LEASE_S, 5, Poison.DEAD_LETTER).deliveries
    (again,) = acks.hand_out(LEASE_S + 1, "b", 1, TAIL, LEASE_S, 5, Poison.DEAD_LETTER).deliveries
    assert (again.offset, again.delivery_count) == (first.offset, 2)
    assert acks.ack(first).reason == "stale"
    assert acks.ack(again).acked and acks.floor == 1


def test_out_of_order_acks_move_the_floor_only_over_a_gap_free_prefix():
    acks = SegmentAcks()
    got = acks.hand_out(0.0, "a", 5, TAIL, LEASE_S, 5, Poison.SKIP).deliveries
    for i in (4, 2, 1):
        acks.ack(got[i])
    assert acks.floor == 0
    acks.ack(got[0])
    assert acks.floor == 3
    acks.ack(got[3])
    assert acks.floor == 5


def test_a_fan_out_delivery_counts_once_every_sink_acknowledged_it():
    acks = SegmentAcks()
    (d,) = acks.hand_out(0.0, "a", 1, TAIL, LEASE_S, 5, Poison.SKIP).deliveries
    assert acks.ack(d, sink="search", sinks={"search", "archive"}).reason == "waiting-for-sinks"
    assert acks.ack(d, sink="nope", sinks={"search", "archive"}).reason == "unknown-sink"
    assert acks.floor == 0
    assert acks.ack(d, sink="archive", sinks={"search", "archive"}).acked and acks.floor == 1


def test_a_truncation_past_the_floor_says_how_many_events_were_missed():
    acks = SegmentAcks()
    got = acks.hand_out(0.0, "a", 4, TAIL, LEASE_S, 5, Poison.SKIP).deliveries
    acks.ack(got[1])
    out = acks.hand_out(1.0, "a", 1, TAIL, LEASE_S, 5, Poison.SKIP, head=10)
    assert out.missed == 9  # 0, 2, 3 handed out but unacked, 4..9 never handed out
    assert [d.offset for d in out.deliveries] == [10] and out.floor == 10
    assert acks.hand_out(2.0, "a", 1, TAIL, LEASE_S, 5, Poison.SKIP, head=10).missed == 0


def test_a_delayed_event_is_passed_over_and_holds_the_floor_until_delivered_and_acked():
    acks = SegmentAcks()
    out = acks.hand_out(0.0, "a", 3, TAIL, LEASE_S, 5, Poison.SKIP, delayed={1: 50.0})
    assert [d.offset for d in out.deliveries] == [0, 2, 3]
    for d in out.deliveries:
        acks.ack(d)
    assert acks.floor == 1  # 1 is not delivered yet
    assert acks.hand_out(50.0, "a", 1, TAIL, LEASE_S, 5, Poison.SKIP).deliveries[0].offset == 4
    assert acks.fan_out({1: 50.0}) == [1]  # the stream's index hands it back when due
    assert acks.fan_out({1: 50.0}) == []  # once
    later = acks.hand_out(50.0, "a", 1, TAIL, LEASE_S, 5, Poison.SKIP)
    assert [(d.offset, d.delivery_count) for d in later.deliveries] == [(1, 1)]
    acks.ack(later.deliveries[0])
    assert acks.floor == 4
    assert acks.fan_out({1: 50.0}) == []  # processed already: a repeat of the index is dropped


def test_a_delayed_event_the_index_released_before_the_cursor_passed_it_is_ordinary():
    acks = SegmentAcks()
    out = acks.hand_out(0.0, "a", 3, TAIL, LEASE_S, 5, Poison.SKIP, delayed={1: 50.0}, released=50.0)
    assert [d.offset for d in out.deliveries] == [0, 1, 2]
    assert acks.fan_out({1: 50.0}) == []  # leased already


def test_while_the_index_is_not_live_the_cursor_waits_at_a_delayed_event():
    acks = SegmentAcks()
    out = acks.hand_out(0.0, "a", 3, TAIL, LEASE_S, 5, Poison.SKIP, delayed={1: 50.0}, index_live=False)
    assert [d.offset for d in out.deliveries] == [0] and out.next == 1
    out = acks.hand_out(1.0, "a", 3, TAIL, LEASE_S, 5, Poison.SKIP, delayed={1: 50.0})
    assert [d.offset for d in out.deliveries] == [2, 3, 4] and acks.floor == 0


def test_a_dead_letter_counts_as_processed_only_once_its_append_is_confirmed():
    acks = SegmentAcks()
    (d,) = acks.hand_out(0.0, "a", 1, TAIL, LEASE_S, 1, Poison.DEAD_LETTER).deliveries
    acks.nack(d, 0.0)
    out = acks.hand_out(1.0, "a", 1, TAIL, LEASE_S, 1, Poison.DEAD_LETTER)
    assert out.dead_letter == [0] and acks.floor == 0
    assert acks.hand_out(2.0, "a", 0, TAIL, LEASE_S, 1, Poison.DEAD_LETTER).dead_letter == []
    # the appender died: a lease later the append is claimed again
    assert acks.hand_out(1.0 + LEASE_S, "a", 0, TAIL, LEASE_S, 1, Poison.DEAD_LETTER).dead_letter == [0]
    acks.dead_lettered([0])
    assert acks.floor == 1


def test_a_halted_segment_resumes_when_the_policy_changes():
    acks = SegmentAcks()
    (d,) = acks.hand_out(0.0, "a", 1, TAIL, LEASE_S, 1, Poison.HALT).deliveries
    acks.nack(d, 0.0)
    assert acks.hand_out(1.0, "a", 5, TAIL, LEASE_S, 1, Poison.HALT).deliveries == []
    assert acks.halted_at == 0
    again = acks.hand_out(2.0, "a", 1, TAIL, LEASE_S, 2, Poison.HALT)  # max_deliveries raised
    assert [(d.offset, d.delivery_count) for d in again.deliveries] == [(0, 2)]
    acks.nack(again.deliveries[0], 2.0)
    assert acks.hand_out(3.0, "a", 1, TAIL, LEASE_S, 2, Poison.HALT).deliveries == []
    assert acks.halted_at == 0
    out = acks.hand_out(4.0, "a", 1, TAIL, LEASE_S, 2, Poison.SKIP)  # on_poison changed
    assert acks.halted_at is None and acks.floor == 1
    assert [d.offset for d in out.deliveries] == [1]


def test_offsets_past_their_time_to_live_are_processed_without_a_delivery():
    acks = SegmentAcks()
    out = acks.hand_out(0.0, "a", 2, 6, LEASE_S, 3, Poison.SKIP, expired=[0, 2, 3])
    # the limit counts deliveries only: the cursor passes what expired on its way to two
    assert [d.offset for d in out.deliveries] == [1, 4] and out.expired == 3 and out.next == 5
    assert acks.floor == 1  # 0 processed; 1 leased holds it
    acks.ack(out.deliveries[0])
    assert acks.floor == 4  # 1 acked, 2 and 3 expired: processed

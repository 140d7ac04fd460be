"""Redelivery backoff (JetStream's BackOff), fan-out that remembers which sinks acknowledged
(the acknowledgement RFC), and at-most-once groups (JetStream's AckNone): each rule on the plain
model and on the Redis tracker, step by step, the same answers and the same state."""

import itertools

import pytest

from domain.acks import AckPolicy, Delivery, Poison, SegmentAcks, redelivery_delay
from groups.ack_tracker import SegmentTracker

LEASE_S = 10.0
SINKS = ("archive", "search")
_ids = itertools.count(50_000)


@pytest.fixture
def both(redis):
    """The plain model and a Redis tracker, driven together: every call goes to both and must
    answer the same, and after it their states must agree."""
    tracker = SegmentTracker(redis, f"test-{next(_ids)}", "0")

    class Both:
        model = SegmentAcks()

        def __getattr__(self, name):
            def call(*args, **kwargs):
                want = getattr(self.model, name)(*args, **kwargs)
                got = getattr(tracker, name)(*args, **kwargs)
                assert got == want, name
                state = tracker.state()
                assert state.retry == pytest.approx(self.model.retry)
                assert state.acked == self.model.acked and state.floor == self.model.floor
                assert state.leases == {o: lease.epoch for o, lease in self.model.leases.items()}
                assert state.sinks_acked == {o: s for o, s in self.model.sinks_acked.items() if s}
                return got

            return call

    yield Both()
    tracker.forget()


@pytest.mark.parametrize(
    ("backoff", "epoch", "delay"),
    [((), 1, 0.0), ((1, 5, 30), 1, 1.0), ((1, 5, 30), 2, 5.0), ((1, 5, 30), 3, 30.0), ((1, 5, 30), 9, 30.0)],
)
def test_the_nth_redelivery_waits_the_nth_value_and_the_last_repeats(backoff, epoch, delay):
    assert redelivery_delay(backoff, epoch) == delay


def test_an_expired_lease_comes_again_after_the_backoff(both):
    backoff = (3.0, 7.0)
    (d,) = both.hand_out(0.0, "a", 1, 10, LEASE_S, 5, Poison.SKIP, backoff=backoff).deliveries
    # the lease expires at 10: the first redelivery waits 3 s
    assert both.hand_out(10.0, "a", 5, 1, LEASE_S, 5, Poison.SKIP, backoff=backoff).deliveries == []
    assert both.model.retry == {0: 13.0}
    (again,) = both.hand_out(13.0, "a", 5, 1, LEASE_S, 5, Poison.SKIP, backoff=backoff).deliveries
    assert again == Delivery(0, 2)
    # its lease expires at 23: the second waits 7 s, and so does every later one
    assert both.hand_out(23.0, "a", 5, 1, LEASE_S, 5, Poison.SKIP, backoff=backoff).deliveries == []
    assert both.model.retry == {0: 30.0}


def test_a_nack_without_a_delay_waits_the_backoff_and_one_with_a_delay_its_own(both):
    backoff = (4.0, 9.0)
    first = both.hand_out(0.0, "a", 2, 10, LEASE_S, 5, Poison.SKIP, backoff=backoff).deliveries
    assert both.nack(first[0], 1.0, None, backoff=backoff).acked
    assert both.nack(first[1], 1.0, 0.5, backoff=backoff).acked
    assert both.model.retry == {0: 5.0, 1: 1.5}
    again = both.hand_out(5.0, "a", 5, 2, LEASE_S, 5, Poison.SKIP, backoff=backoff).deliveries
    assert sorted(again) == [Delivery(0, 2), Delivery(1, 2)]
    assert both.nack(Delivery(0, 2), 6.0, None, backoff=backoff).acked
    assert both.model.retry == {0: 15.0}  # its second redelivery: 9 s


def test_a_redelivery_of_a_fan_out_event_is_for_the_sinks_that_have_not_acknowledged(both):
    (d,) = both.hand_out(0.0, "a", 1, 10, LEASE_S, 5, Poison.SKIP).deliveries
    assert both.ack(d, "archive", SINKS).reason == "waiting-for-sinks"
    # the lease expires: the redelivery says archive has it already
    got = both.hand_out(10.0, "a", 1, 1, LEASE_S, 5, Poison.SKIP)
    assert got.deliveries == [Delivery(0, 2)] and got.sinks_acked == {0: ("archive",)}
    assert both.model.sinks_pending(0, SINKS) == ["search"]
    # search alone finishes it: archive's acknowledgement was remembered
    assert both.ack(Delivery(0, 2), "search", SINKS).acked
    assert both.model.floor == 1


def test_a_sink_that_gives_a_delivery_back_needs_it_again_and_the_others_do_not(both):
    (d,) = both.hand_out(0.0, "a", 1, 10, LEASE_S, 5, Poison.SKIP).deliveries
    assert both.ack(d, "archive", SINKS).reason == "waiting-for-sinks"
    assert both.nack(d, 1.0, 0.0, sink="search").acked
    got = both.hand_out(1.0, "a", 1, 1, LEASE_S, 5, Poison.SKIP)
    assert got.sinks_acked == {0: ("archive",)}
    # archive acknowledged, then gave back its redelivery: it wants it again too
    assert both.nack(Delivery(0, 2), 2.0, 0.0, sink="archive").acked
    assert both.hand_out(2.0, "a", 1, 1, LEASE_S, 5, Poison.SKIP).sinks_acked == {}
    assert both.model.sinks_pending(0, SINKS) == ["archive", "search"]


def test_an_at_most_once_group_counts_a_delivery_processed_when_handed_out(both):
    got = both.hand_out(0.0, "a", 3, 10, LEASE_S, 5, Poison.SKIP, ack_policy=AckPolicy.NONE)
    assert got.deliveries == [Delivery(0, 1), Delivery(1, 1), Delivery(2, 1)] and got.floor == 3
    # nothing is leased, nothing comes again, an ack finds nothing to do
    assert both.model.leases == {}
    assert both.hand_out(100.0, "a", 3, 3, LEASE_S, 5, Poison.SKIP, ack_policy=AckPolicy.NONE).deliveries == []
    assert both.ack(Delivery(1, 1)).reason == "already-acked"
    assert both.nack(Delivery(1, 1), 100.0).reason == "unknown"

"""docs/design/retention.md's worked examples, replayed through the plain rules: each cycle records
the tail, decides, and drops retention-set records behind the truncation."""

from domain.cuts import Order, compare, lower_bound, moves_head
from domain.retention import Inputs, Policy, Subscriber, decide
from domain.retention_set import after_truncation, newest_record_at_or_before, with_tail

INTERVAL = 5


def size_of(cut):  # 1 byte per event: size equals the sum of offsets
    return sum(cut.values())


def sub(name, cut, at=0.0, per_event=1):
    return Subscriber(name, cut, {s: o * per_event for s, o in cut.items()}, acknowledged_at=at)


class Replay:
    def __init__(self, policy):
        self.policy = policy
        self.rset = ()
        self.head = None

    def cycle(self, now, tail, subscribers=(), size=size_of):
        self.rset = with_tail(self.rset, now, INTERVAL, tail, size(tail))
        if self.head is None:
            self.head = {s: 0 for s in tail}
        decision = decide(Inputs(now, self.policy, self.rset, tuple(subscribers)))
        if decision.cut is not None and moves_head(decision.cut, self.head):
            self.head = dict(decision.cut)
            self.rset = after_truncation(self.rset, decision.cut)
            return dict(decision.cut), decision.rule
        return None, decision.rule


def test_cuts_compare_three_ways():
    assert compare({"0": 0, "1": 10}, {"0": 10, "1": 10}) is Order.BEFORE
    assert compare({"0": 10, "1": 10}, {"0": 10, "1": 10}) is Order.EQUAL_OR_AFTER
    assert compare({"0": 1, "1": 11}, {"0": 10, "1": 10}) is Order.OVERLAPS
    assert compare({"0": 20, "1": 20}, {"0": 10, "1": 10}) is Order.EQUAL_OR_AFTER
    assert lower_bound([{"0": 2, "1": 1}, {"0": 1, "1": 2}]) == {"0": 1, "1": 1}


def test_a_target_at_or_behind_the_head_is_a_no_op():
    head = {"0": 5, "1": 5}
    assert not moves_head({"0": 5, "1": 5}, head)
    assert not moves_head({"0": 4, "1": 9}, head)  # behind on one segment
    assert moves_head({"0": 5, "1": 6}, head)


def test_plain_size_min_100_without_subscribers():
    r = Replay(Policy("size", min=100))
    assert r.cycle(0, {"0": 9, "1": 10}) == (None, "none:size:nothing-old-enough")
    assert r.cycle(1800, {"0": 50, "1": 50}) == (None, "none:size:nothing-old-enough")
    assert r.cycle(3600, {"0": 60, "1": 60}) == ({"0": 9, "1": 10}, "size:limit_min")
    assert [rec.size for rec in r.rset] == [100, 120]


def test_consumption_size_min_2_max_10_with_two_subscribers():
    r = Replay(Policy("size", min=2, max=10, consumption_based=True))
    # 1. case i
    subs = [sub("A", {"0": 2, "1": 1}), sub("B", {"0": 1, "1": 2})]
    assert r.cycle(1, {"0": 2, "1": 2}, subs) == ({"0": 1, "1": 1}, "cbr:case-i:slb")
    # 2. kept 0 < 2 and no record keeps 2 or more
    subs = [sub("A", {"0": 2, "1": 2}), sub("B", {"0": 2, "1": 2})]
    assert r.cycle(20, {"0": 2, "1": 2}, subs)[0] is None
    # 3. case ii, the first of a tie; the set keeps t30 only
    subs = [sub("A", {"0": 10, "1": 9}), sub("B", {"0": 10, "1": 9})]
    assert r.cycle(30, {"0": 10, "1": 10}, subs) == ({"0": 2, "1": 2}, "cbr:case-ii:limit_min")
    assert [rec.time for rec in r.rset] == [30]
    # 4. case iii
    assert r.cycle(40, {"0": 20, "1": 20}, subs) == ({"0": 10, "1": 10}, "cbr:case-iii:limit_max")
    # 5. limit_max keeps 20, not strictly less than the SLB's 20: the SLB
    subs = [sub("A", {"0": 21, "1": 19}), sub("B", {"0": 21, "1": 19})]
    assert r.cycle(50, {"0": 30, "1": 30}, subs) == ({"0": 21, "1": 19}, "cbr:case-iii:slb")


def test_one_segment_of_30_byte_events_size_min_90_max_180():
    r = Replay(Policy("size", min=90, max=180, consumption_based=True))
    bytes_of = lambda cut: cut["0"] * 30  # noqa: E731
    subs = [sub("A", {"0": 3}, per_event=30), sub("B", {"0": 4}, per_event=30)]
    assert r.cycle(0, {"0": 7}, subs, bytes_of) == ({"0": 3}, "cbr:case-i:slb")
    subs = [sub("A", {"0": 9}, per_event=30), sub("B", {"0": 10}, per_event=30)]
    assert r.cycle(10, {"0": 11}, subs, bytes_of) == ({"0": 7}, "cbr:case-ii:limit_min")
    assert r.cycle(20, {"0": 16}, subs, bytes_of) == ({"0": 11}, "cbr:case-iii:limit_max")


def test_retention_set_records_are_added_only_after_the_interval():
    rset = with_tail((), 0, 30, {"0": 1}, 1)
    assert with_tail(rset, 30, 30, {"0": 2}, 2) == rset  # not strictly older than the interval
    assert len(with_tail(rset, 31, 30, {"0": 2}, 2)) == 2


def test_the_newest_of_identical_cuts_is_the_one_at_or_before():
    rset = with_tail(with_tail((), 0, 1, {"0": 2}, 2), 5, 1, {"0": 2}, 2)
    assert newest_record_at_or_before(rset, {"0": 2}).time == 5
    assert newest_record_at_or_before(rset, {"0": 1}) is None
    assert after_truncation(rset, {"0": 3}) == ()

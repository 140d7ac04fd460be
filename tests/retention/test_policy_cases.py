"""Each case of the time policy with consumption, and where CBR goes beyond Pravega."""

from dataclasses import replace

import pytest

from domain.retention import Inputs, Policy, Subscriber, decide, inactive_since, is_active, timeout_of
from domain.retention_set import RetentionRecord

NOW = 200.0
# time-ordered tail records of a 2-segment stream; deltas at NOW: 150, 80, 20, 5
RSET = tuple(RetentionRecord(t, 2 * o, {"0": o, "1": o}) for t, o in [(50, 5), (120, 12), (180, 18), (195, 19)])
TIME = Policy("time", min=10, max=100, consumption_based=True)


def subscriber(cut, name="A", at=NOW):
    return Subscriber(name, cut, {s: o for s, o in cut.items()}, acknowledged_at=at)


def decide_for(policy, slb, rset=RSET, now=NOW, **kw):
    subs = (subscriber(slb, **kw),) if slb is not None else ()
    return decide(Inputs(now, policy, rset, subs))


@pytest.mark.parametrize(
    "slb, cut, rule",
    [
        ({"0": 19, "1": 19}, {"0": 18, "1": 18}, "cbr:case-ii:limit_min"),
        ({"0": 20, "1": 10}, {"0": 5, "1": 5}, "cbr:case-iv:retention_set"),
        ({"0": 15, "1": 15}, {"0": 15, "1": 15}, "cbr:case-i:slb"),
        ({"0": 3, "1": 3}, {"0": 12, "1": 12}, "cbr:case-iii:limit_max"),
        ({"0": 3, "1": 8}, {"0": 5, "1": 5}, "cbr:case-v:max_bound"),
    ],
)
def test_time_with_consumption_each_case(slb, cut, rule):
    decision = decide_for(TIME, slb)
    assert (dict(decision.cut), decision.rule) == (cut, rule)
    assert decision.slb == slb and decision.active == ("A",)


def test_time_without_max_truncates_at_the_slb():
    decision = decide_for(Policy("time", min=10, consumption_based=True), {"0": 3, "1": 3})
    assert (decision.cut, decision.rule) == ({"0": 3, "1": 3}, "cbr:case-i:slb")


def test_time_with_nothing_old_enough_keeps_everything():
    decision = decide_for(TIME, {"0": 19, "1": 19}, rset=RSET[-1:])
    assert decision.cut is None and decision.rule == "none:time:nothing-old-enough"


def test_plain_time_truncates_at_limit_min():
    decision = decide_for(Policy("time", min=10), None)
    assert (decision.cut, decision.rule) == ({"0": 18, "1": 18}, "time:limit_min")


def test_size_case_iv_when_the_min_limit_cut_overlaps_the_slb():
    policy = Policy("size", min=20, max=100, consumption_based=True)
    rset = (
        RetentionRecord(0, 4, {"0": 2, "1": 2}),
        RetentionRecord(5, 10, {"0": 5, "1": 5}),
        RetentionRecord(10, 40, {"0": 20, "1": 20}),
    )
    slb = {"0": 22, "1": 4}  # keeps 40 - 26 = 14 < min; limit_min {5,5} (keeps 30) overlaps it
    decision = decide_for(policy, slb, rset=rset, now=10)
    assert (decision.cut, decision.rule) == ({"0": 2, "1": 2}, "cbr:case-iv:retention_set")
    # with no record at or before the SLB, nothing is truncated
    decision = decide_for(policy, slb, rset=rset[1:], now=10)
    assert (decision.cut, decision.rule) == (None, "none:case-iv:no-record-before-slb")


def test_consumption_with_no_subscriber_registered_uses_the_limits_alone():
    decision = decide_for(TIME, None)
    assert decision.rule == "time:limit_min" and decision.cut == {"0": 18, "1": 18}


FALLBACK = Policy("time", min=10, consumption_based=True, subscriber_timeout_s=30, fallback_after_s=120)


@pytest.mark.parametrize(
    ("acked_ago", "cut", "rule"),
    [
        (0, {"0": 1, "1": 1}, "cbr:case-i:slb"),  # active: the subscriber holds at its cut
        (30, {"0": 1, "1": 1}, "cbr:case-i:slb"),  # still active at exactly x
        (31, None, "none:no-active-subscriber"),  # stale since x: nothing, while y runs
        (30 + 119, None, "none:no-active-subscriber"),  # y counts from staleness, not from the ack
        (30 + 120, {"0": 18, "1": 18}, "cbr:fallback:limit_min"),  # x + y: the limits alone
        (10_000, {"0": 18, "1": 18}, "cbr:fallback:limit_min"),
    ],
)
def test_the_fallback_clock_starts_when_the_last_subscriber_became_stale(acked_ago, cut, rule):
    """PDP-47: stale x after the last ack, the limits alone y after that."""
    decision = decide_for(FALLBACK, {"0": 1, "1": 1}, at=NOW - acked_ago)
    assert (decision.cut, decision.rule) == (cut, rule)


def test_the_fallback_waits_for_the_subscriber_that_became_stale_last():
    old = Subscriber("old", {"0": 1, "1": 1}, {"0": 1, "1": 1}, acknowledged_at=NOW - 5_000)
    recent = Subscriber("recent", {"0": 2, "1": 2}, {"0": 2, "1": 2}, acknowledged_at=NOW - 100)  # stale at -70
    held = decide(Inputs(NOW, FALLBACK, RSET, (old, recent)))
    assert (held.cut, held.rule) == (None, "none:no-active-subscriber")
    later = decide(Inputs(NOW + 50, FALLBACK, RSET, (old, recent)))  # 120 s after -70
    assert later.rule == "cbr:fallback:limit_min"
    returned = Subscriber("recent", {"0": 2, "1": 2}, {"0": 2, "1": 2}, acknowledged_at=NOW + 50)
    again = decide(Inputs(NOW + 50, FALLBACK, RSET, (old, returned)))  # a returning subscriber holds
    assert (again.cut, again.rule, again.active) == ({"0": 2, "1": 2}, "cbr:case-i:slb", ("recent",))


def test_a_subscriber_that_never_had_a_cut_starts_the_fallback_clock_when_it_subscribed():
    never = Subscriber("new", None, None, acknowledged_at=None, subscribed_at=NOW - 119)
    assert decide(Inputs(NOW, FALLBACK, RSET, (never,))).rule == "none:no-active-subscriber"
    assert decide(Inputs(NOW + 1, FALLBACK, RSET, (never,))).rule == "cbr:fallback:limit_min"


def test_without_fallback_stale_subscribers_hold_data_but_the_max_limit_wins():
    policy = Policy("time", min=10, max=100, consumption_based=True, subscriber_timeout_s=30)
    decision = decide_for(policy, {"0": 1, "1": 1}, at=NOW - 1000)
    assert (decision.cut, decision.rule) == ({"0": 12, "1": 12}, "cbr:no-active:limit_max")
    held = decide_for(Policy("time", min=10, consumption_based=True, subscriber_timeout_s=30), {"0": 1, "1": 1}, at=0)
    assert held.cut is None


def test_reject_publish_keeps_unconsumed_data_and_says_the_stream_is_full():
    policy = Policy("time", min=10, max=100, consumption_based=True, on_max_limit="reject_publish")
    decision = decide_for(policy, {"0": 3, "1": 3})
    assert decision.cut == {"0": 3, "1": 3} and decision.at_max
    size = Policy("size", min=2, max=10, consumption_based=True, on_max_limit="reject_publish")
    rset = (RetentionRecord(0, 20, {"0": 10, "1": 10}), RetentionRecord(10, 40, {"0": 20, "1": 20}))
    decision = decide_for(size, {"0": 1, "1": 1}, rset=rset, now=10)
    assert decision.cut == {"0": 1, "1": 1} and decision.at_max


def test_limit_type_none_with_consumption_truncates_at_the_slb():
    decision = decide_for(Policy("none", consumption_based=True), {"0": 7, "1": 3})
    assert (decision.cut, decision.rule) == ({"0": 7, "1": 3}, "consumption:slb")
    assert decide_for(Policy("none"), {"0": 7, "1": 3}).cut is None


def test_size_case_iii_with_no_record_keeping_min_truncates_at_the_slb():
    # found by hypothesis: the only record is the tail, so no record keeps min; the SLB keeps more
    # than max
    rset = (RetentionRecord(10, 60, {"0": 30, "1": 30}),)
    policy = Policy("size", min=5, max=10, consumption_based=True)
    decision = decide_for(policy, {"0": 2, "1": 2}, rset=rset, now=10)
    assert (decision.cut, decision.rule) == ({"0": 2, "1": 2}, "cbr:case-iii:slb")


def test_a_groups_own_subscriber_timeout_wins_over_the_policys_both_ways():
    """PDP-47's open question 3, as plain rules: the subscriber's own timeout decides whether it is
    active and when it went stale (the fallback's clock), whatever the policy says."""
    acked = subscriber({"0": 12, "1": 12}, at=NOW - 50)  # its cut is 50 s old
    assert timeout_of(acked, 100) == 100 and timeout_of(replace(acked, timeout_s=30), 100) == 30
    assert is_active(acked, NOW, 100) and not is_active(replace(acked, timeout_s=30), NOW, 100)
    assert not is_active(acked, NOW, 10) and is_active(replace(acked, timeout_s=60), NOW, 10)
    assert is_active(replace(acked, timeout_s=60), NOW, None)  # no policy timeout: its own still counts
    assert inactive_since(replace(acked, timeout_s=30), 100) == NOW - 20
    policy = Policy("time", min=10, max=100, consumption_based=True, subscriber_timeout_s=100)
    held = decide(Inputs(NOW, policy, RSET, (acked,)))
    stale = decide(Inputs(NOW, policy, RSET, (replace(acked, timeout_s=30),)))
    assert held.active == ("A",) and stale.active == () and held.rule != stale.rule

"""A compacted stream's compactor holds truncation back like one more subscriber (Pulsar's
compaction cursor): whatever rule would truncate, it stops at the view's horizon (rule
`cbr:compaction:horizon`), and only the max limit passes it."""

import pytest

from domain.retention import COMPACTOR, Inputs, Policy, Subscriber, decide
from domain.retention_set import RetentionRecord

NOW = 200.0
# time-ordered tail records of a 2-segment stream, 1 byte an event; ages at NOW: 150, 80, 20, 5
RSET = tuple(RetentionRecord(t, 2 * o, {"0": o, "1": o}) for t, o in [(50, 5), (120, 12), (180, 18), (195, 19)])


def compactor(at: int) -> Subscriber:
    return Subscriber(COMPACTOR, {"0": at, "1": at}, {"0": at, "1": at}, acknowledged_at=NOW)


def reader(at: int, acked: float = NOW) -> Subscriber:
    return Subscriber("shop/billing", {"0": at, "1": at}, {"0": at, "1": at}, acknowledged_at=acked)


TIME = Policy("time", min=10)
TIME_MAX = Policy("time", min=10, max=100)
CONSUMING = Policy("time", min=10, consumption_based=True)
STALE_FALLBACK = Policy("time", min=10, consumption_based=True, subscriber_timeout_s=30, fallback_after_s=30)
SIZE = Policy("size", min=4)
SIZE_REJECT = Policy("size", min=4, max=20, on_max_limit="reject_publish")


@pytest.mark.parametrize(
    ("policy", "subscribers", "horizon", "cut", "rule", "weighed"),
    [
        # the policy's own decision lies at or before the horizon: the compactor changes nothing
        (TIME, (), 19, 18, "time:limit_min", ()),
        (TIME, (), 18, 18, "time:limit_min", ()),
        (CONSUMING, (reader(15),), 16, 15, "cbr:case-i:slb", ("shop/billing",)),
        # the policy would pass the horizon: held there, under its own rule
        (TIME, (), 12, 12, "cbr:compaction:horizon", (COMPACTOR,)),
        (SIZE, (), 7, 7, "cbr:compaction:horizon", (COMPACTOR,)),
        (CONSUMING, (reader(15),), 12, 12, "cbr:compaction:horizon", ("shop/billing", COMPACTOR)),
        # stale subscribers and a fallback: the limits alone, still held by the compactor
        (STALE_FALLBACK, (reader(15, acked=NOW - 100),), 12, 12, "cbr:compaction:horizon", (COMPACTOR,)),
        # never compacted (horizon at the start): nothing may go but what the max limit forces
        (TIME, (), 0, 0, "cbr:compaction:horizon", (COMPACTOR,)),
        # the max limit forces it past the horizon (the view's next run records what it missed)
        (TIME_MAX, (), 3, 12, "cbr:case-iii:limit_max", (COMPACTOR,)),
        (TIME_MAX, (), 0, 12, "cbr:case-iii:limit_max", (COMPACTOR,)),
    ],
)
def test_the_compactor_holds_truncation_at_its_horizon_unless_the_max_limit_forces_it(
    policy, subscribers, horizon, cut, rule, weighed
):
    decision = decide(Inputs(NOW, policy, RSET, subscribers, compactor(horizon)))
    assert (decision.cut, decision.rule) == ({"0": cut, "1": cut}, rule)
    assert decision.active == weighed


def test_without_a_compactor_the_same_streams_are_decided_by_their_policy_alone():
    assert decide(Inputs(NOW, TIME, RSET)).cut == {"0": 18, "1": 18}
    assert decide(Inputs(NOW, TIME_MAX, RSET)).rule == "time:limit_min"


def test_under_reject_publish_a_compactor_behind_the_max_marks_the_stream_full_instead():
    rset = (RetentionRecord(0, 20, {"0": 10, "1": 10}), RetentionRecord(10, 40, {"0": 20, "1": 20}))
    decision = decide(Inputs(10, SIZE_REJECT, rset, (), compactor(2)))
    assert decision.cut == {"0": 2, "1": 2} and decision.at_max

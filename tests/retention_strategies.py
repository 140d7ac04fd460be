"""Hypothesis strategies shared by the retention tests: random streams, policies and
subscribers, with 1 byte per event so that sizes are sums of offsets."""

from hypothesis import strategies as st

from domain.retention import COMPACTOR, MAX_FORCED, Inputs, Policy, Subscriber
from domain.retention_set import with_tail

SEGMENTS = ("0", "1", "2")
__all__ = ["MAX_FORCED", "SEGMENTS", "scenarios"]


@st.composite
def scenarios(draw):
    limit_type = draw(st.sampled_from(["size", "time"]))
    minimum = draw(st.integers(0, 60))
    maximum = draw(st.none() | st.integers(minimum, minimum + 120))
    policy = Policy(
        limit_type,
        minimum,
        maximum,
        consumption_based=draw(st.booleans()),
        subscriber_timeout_s=draw(st.none() | st.integers(5, 50)),
        fallback_after_s=draw(st.none() | st.integers(0, 80)),
        on_max_limit=draw(st.sampled_from(["truncate", "reject_publish"])),
    )
    # tail cuts grow; one cycle every 10 s
    rset, tail, now = (), {s: 0 for s in SEGMENTS}, 0.0
    for _ in range(draw(st.integers(1, 10))):
        tail = {s: o + draw(st.integers(0, 15)) for s, o in tail.items()}
        now += 10
        rset = with_tail(rset, now, 5, tail, sum(tail.values()))
    subscribers = tuple(
        Subscriber(
            f"s{i}",
            cut := {s: draw(st.integers(0, tail[s])) for s in SEGMENTS},
            {s: o for s, o in cut.items()},  # 1 byte per event
            acknowledged_at=now - draw(st.integers(0, 100)),
        )
        for i in range(draw(st.integers(0, 3)))
    )
    compactor = None
    if draw(st.booleans()):  # a compacted stream: its view's horizon holds too
        horizon = {s: draw(st.integers(0, tail[s])) for s in SEGMENTS}
        compactor = Subscriber(COMPACTOR, horizon, dict(horizon), acknowledged_at=now)
    return Inputs(now, policy, rset, subscribers, compactor)

"""Properties of the decision over random streams, policies and subscriber positions."""

from hypothesis import given, settings
from hypothesis import strategies as st
from retention_strategies import MAX_FORCED, SEGMENTS, scenarios

from domain.cuts import lower_bound, moves_head
from domain.retention import Inputs, Subscriber, bounds, decide
from domain.retention_set import after_truncation


@settings(max_examples=500)
@given(scenarios())
def test_it_never_passes_the_slb_unless_the_max_limit_forced_it(inputs):
    decision = decide(inputs)
    if decision.cut is None or decision.slb is None or decision.rule in MAX_FORCED:
        return
    assert all(decision.cut[s] <= decision.slb[s] for s in SEGMENTS), decision


@settings(max_examples=500)
@given(scenarios())
def test_the_min_limit_is_always_kept(inputs):
    decision = decide(inputs)
    if decision.cut is None:
        return
    if inputs.policy.limit_type == "size":
        kept = inputs.retention_set[-1].size - sum(decision.cut.values())
        assert kept >= inputs.policy.min, decision
    else:
        limit_min = bounds(inputs.retention_set, inputs.now, inputs.policy).limit_min
        assert limit_min is not None
        assert all(decision.cut[s] <= limit_min.cut[s] for s in SEGMENTS), decision


@settings(max_examples=300)
@given(scenarios())
def test_only_a_max_rule_or_a_fallback_deletes_what_active_subscribers_have_not_acknowledged(inputs):
    decision = decide(inputs)
    if decision.cut is None or not inputs.policy.consumption_based or not inputs.subscribers:
        return
    if decision.slb is None:  # no active subscriber: only a max or fallback rule may truncate
        assert decision.rule in MAX_FORCED or decision.rule == "cbr:fallback:limit_min"


@settings(max_examples=200)
@given(scenarios(), st.lists(st.integers(0, 3), min_size=1, max_size=6))
def test_the_head_never_moves_backwards_over_cycles(inputs, moves):
    head = {s: 0 for s in SEGMENTS}
    rset = inputs.retention_set
    for step in moves:
        subs = tuple(
            Subscriber(s.name, {k: v + step for k, v in s.cut.items()}, s.cut_sizes, s.acknowledged_at)
            for s in inputs.subscribers
        )
        decision = decide(Inputs(inputs.now + step, inputs.policy, rset, subs))
        if decision.cut is not None and moves_head(decision.cut, head):
            assert all(decision.cut[s] >= head[s] for s in SEGMENTS)
            head = dict(decision.cut)
            rset = after_truncation(rset, decision.cut)
            if not rset:
                break


def test_lower_bound_of_no_cut_is_empty():
    assert lower_bound([]) == {}


@settings(max_examples=500)
@given(scenarios())
def test_a_compacted_stream_is_never_truncated_past_its_views_horizon_unless_the_max_limit_forced_it(inputs):
    decision = decide(inputs)
    if inputs.compactor is None or decision.cut is None or decision.rule in MAX_FORCED:
        return
    horizon = inputs.compactor.cut
    assert all(decision.cut[s] <= horizon[s] for s in SEGMENTS), (decision, horizon)

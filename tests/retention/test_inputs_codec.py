from hypothesis import given, settings
from retention_strategies import scenarios

from domain.retention import decide
from spark_tasks.retention_inputs import (
    considered,
    decide_row,
    decode_decision,
    decode_inputs,
    encode_decision,
    encode_inputs,
)


@settings(max_examples=200)
@given(scenarios())
def test_inputs_and_decisions_survive_the_trip_through_rows(inputs):
    decoded = decode_inputs(encode_inputs(7, inputs))
    assert decoded == inputs
    assert [dict(r.cut) for r in decoded.retention_set] == [dict(r.cut) for r in inputs.retention_set]
    assert [s.cut for s in decoded.subscribers] == [s.cut for s in inputs.subscribers]
    decision = decide(inputs)
    again, weighed = decode_decision(decide_row(encode_inputs(7, inputs)))
    assert (again.cut, again.rule, again.slb, again.active, again.at_max) == (
        decision.cut,
        decision.rule,
        decision.slb,
        decision.active,
        decision.at_max,
    )
    assert weighed == considered(inputs, decision)
    assert [w["name"] for w in weighed] == [s.name for s in inputs.subscribers if s.name in decision.active]
    assert decode_decision(encode_decision(7, decision))[0].rule == decision.rule

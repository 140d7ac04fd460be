"""Two engines, one rule: on random fleets the Spark engine decides exactly as the local one."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from retention_strategies import scenarios

from domain.retention import decide
from spark_tasks.retention_job import decide_all

pytestmark = pytest.mark.integration


@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(st.lists(scenarios(), min_size=20, max_size=120))
def test_spark_and_local_decide_alike(spark, fleet):
    inputs = dict(enumerate(fleet, start=1))
    remote = decide_all(inputs, spark)
    assert remote.keys() == inputs.keys()
    for sid, inp in inputs.items():
        local = decide(inp)
        got, weighed = remote[sid]
        assert (got.cut, got.rule, got.slb, got.active, got.at_max) == (
            None if local.cut is None else dict(local.cut),
            local.rule,
            None if local.slb is None else dict(local.slb),
            local.active,
            local.at_max,
        ), sid
        assert [w["name"] for w in weighed] == list(local.active)

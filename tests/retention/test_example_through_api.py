"""docs/design/retention.md's consumption example (size, min 2, max 10, subscribers A and B), end to
end: events published and cuts released over REST, cycles run by the command with --now."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import factories
import pytest
from django.core.management import call_command

from store.store import key_space_position

pytestmark = pytest.mark.django_db(transaction=True)  # the Spark engine's executors see what is committed
T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
BASE = "/api/v1/streams/demo/s/"


def key_for(segment: int) -> str:
    """A routing key that lands on `segment` of a 2-segment stream."""
    return next(f"k{i}" for i in range(1000) if int(key_space_position(f"k{i}".encode()) * 2) == segment)


@pytest.fixture(autouse=True)
def retention_interval(settings):
    settings.CBR_RETENTION_INTERVAL = 5


def grow_to(api, target):
    tail = api.get(BASE).json()["tail_cut"]
    for seg, want in target.items():
        n = want - tail[seg]
        if n:
            events = [{"payload": "x", "routing_key": key_for(int(seg))}] * n
            assert api.post(BASE + "events/", {"events": events}, format="json").status_code == 201
    assert api.get(BASE).json()["tail_cut"] == target


def release(api, group, cut):
    response = api.post(
        f"/api/v1/reader-groups/demo/{group}/truncation-cut/", {"stream": "demo/s", "stream_cut": cut}, format="json"
    )
    assert response.status_code == 200, response.content


def cycle(seconds, engine):
    out = StringIO()
    at = (T0 + timedelta(seconds=seconds)).isoformat()
    call_command("run_retention_cycle", "--now", at, "--engine", engine, stdout=out)
    return out.getvalue().strip()


@pytest.mark.parametrize("engine", ["local", pytest.param("spark", marks=pytest.mark.integration)])
def test_the_consumption_example_step_by_step(api, engine, request):
    if engine == "spark":
        request.getfixturevalue("spark")  # the run's one shared session
    factories.create_stream_over_api(
        api,
        "s",
        scope="demo",
        segment_count=2,
        retention_policy={"limit_type": "size", "min": 2, "max": 10, "consumption_based": True},
    )
    for group in ("A", "B"):
        factories.create_group_over_api(
            api, group, scope="demo", streams=["demo/s"], retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT"
        )

    grow_to(api, {"0": 2, "1": 2})
    release(api, "A", {"0": 2, "1": 1})
    release(api, "B", {"0": 1, "1": 2})
    assert "truncated at {'0': 1, '1': 1} (cbr:case-i:slb)" in cycle(1, engine)

    release(api, "A", {"0": 2, "1": 2})
    release(api, "B", {"0": 2, "1": 2})
    assert cycle(20, engine) == ""

    grow_to(api, {"0": 10, "1": 10})
    release(api, "A", {"0": 10, "1": 9})
    release(api, "B", {"0": 10, "1": 9})
    assert "truncated at {'0': 2, '1': 2} (cbr:case-ii:limit_min)" in cycle(30, engine)

    grow_to(api, {"0": 20, "1": 20})
    assert "truncated at {'0': 10, '1': 10} (cbr:case-iii:limit_max)" in cycle(40, engine)

    grow_to(api, {"0": 30, "1": 30})
    release(api, "A", {"0": 21, "1": 19})
    release(api, "B", {"0": 21, "1": 19})
    assert "truncated at {'0': 21, '1': 19} (cbr:case-iii:slb)" in cycle(50, engine)

    history = api.get(BASE + "truncations/").json()["results"]
    assert [h["rule"] for h in history] == [
        "cbr:case-iii:slb",
        "cbr:case-iii:limit_max",
        "cbr:case-ii:limit_min",
        "cbr:case-i:slb",
    ]
    assert {s["name"] for s in history[0]["subscribers"]} == {"demo/A", "demo/B"}
    assert api.get(BASE).json()["head_cut"] == {"0": 21, "1": 19}

"""Compaction and retention over REST: retention never removes what the compactor has not read
unless the max limit forces it, and then the view's next run records what it missed; a quiet
stream's view still ages (a run that only drops); the active chunks are sealed from the API."""

from datetime import UTC, datetime, timedelta

import factories
import pytest

from cbrweb.celery import app
from compaction.models import CompactionRun
from compaction.runs import execute

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

S = "/api/v1/streams/shop/profiles/"


@pytest.fixture
def jobs_inline(settings, spark):
    """Cycles and compactions queued over REST run at once, as a worker would run them."""
    settings.CBR_RETENTION_INTERVAL = 0.01  # every cycle records the tail
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def publish(api, *events):
    """(key, value or None for a tombstone) events, 10 bytes a value."""
    body = [{"key": k, "payload": (v or "").ljust(10, ".") if v else ""} for k, v in events]
    factories.publish_over_api(api, body, stream="shop/profiles")


def seal(api) -> list[dict]:
    answer = api.post(S + "seal/", {}, format="json")
    assert answer.status_code == 200, answer.content
    return answer.json()["sealed"]


def compact(api) -> dict:
    answer = api.post(S + "compactions/", {}, format="json")
    assert answer.status_code == 202, answer.content
    return api.get(S + "compactions/").json()["results"][0]


def cycle(api) -> dict:
    answer = api.post("/api/v1/retention/cycles/", {"stream": "shop/profiles"}, format="json")
    assert answer.status_code == 201, answer.content
    return api.get(f"/api/v1/retention/cycles/{answer.json()['id']}/").json()


def head(api) -> int:
    return api.get(S).json()["head_cut"]["0"]


def rules(api) -> list[str]:
    return [t["rule"] for t in api.get(S + "truncations/").json()["results"]]


def test_retention_waits_for_the_compactor_and_only_the_max_limit_passes_it(api, jobs_inline):
    # given a compacted stream with a plain size policy (keep at least 20 bytes) whose view has
    # read its first chunk (offsets 0-4)
    policy = {"limit_type": "size", "min": 20}
    factories.create_stream_over_api(api, "profiles", cleanup_policy="compact", retention_policy=policy)
    publish(api, *[(f"k{i}", f"a{i}") for i in range(5)])
    assert seal(api) == [{"segment": "0", "chunk": 0}]
    first = compact(api)
    assert first["state"] == "succeeded" and first["horizon"] == {"0": 5} and first["missed_events"] == 0
    publish(api, *[(f"k{i}", f"b{i}") for i in range(5)])  # 5-9
    assert seal(api) == [{"segment": "0", "chunk": 5}]
    assert cycle(api)["truncations"] == 0  # the retention set's record at 10

    # when the policy alone would truncate at 10, the compactor holds it at its horizon, 5
    publish(api, *[(f"k{i}", f"c{i}") for i in range(5)])  # 10-14, the active chunk
    assert cycle(api)["truncations"] == 1
    assert head(api) == 5 and rules(api) == ["cbr:compaction:horizon"]
    truncation = api.get(S + "truncations/").json()["results"][0]
    assert [s["name"] for s in truncation["subscribers"]] == ["compaction"]
    publish(api, ("k0", "d0"))  # 15
    assert cycle(api)["truncations"] == 0 and head(api) == 5  # it waits for the compactor

    # then a max limit the held data exceeds forces the truncation past the horizon
    policy["max"] = 40
    answer = api.put(S + "retention-policy/", policy, format="json")
    assert answer.status_code == 200, answer.content
    publish(api, ("k1", "d1"))  # 16
    assert cycle(api)["truncations"] == 1
    assert head(api) == 15 and rules(api)[0] == "cbr:case-iii:limit_max"
    # and the view's next run records the events it never read (the sealed chunk 5-9, deleted)
    second = compact(api)
    assert second["state"] == "succeeded", second
    assert second["missed"] == {"0": [5, 10]} and second["missed_events"] == 5
    assert second["horizon"] == {"0": 10} and second["generation"] == 2


def test_a_quiet_compact_delete_streams_view_still_ages_by_time(api, spark):
    stream = factories.create_stream_over_api(
        api, "profiles", cleanup_policy="compact,delete", compacted_retention_s=100, delete_retention_s=1000
    )
    publish(api, ("k1", "1"), ("k2", "2"), ("k3", "3"))
    seal(api)
    t = datetime.now(UTC)
    assert run(stream, t).generation == 1
    assert run(stream, t + timedelta(seconds=10)).state == "skipped"  # nothing new, nothing aged

    aged = run(stream, t + timedelta(seconds=200))  # no new event, but every one is past 100 s

    assert (aged.state, aged.generation, aged.chunks, aged.marked_by_retention) == ("succeeded", 2, 0, 3)
    assert api.get(S + "compacted/").json()["events"] == []


def test_a_quiet_streams_tombstones_expire(api, spark):
    stream = factories.create_stream_over_api(api, "profiles", cleanup_policy="compact", delete_retention_s=100)
    publish(api, ("A", "1"), ("B", "1"), ("B", None))
    seal(api)
    t = datetime.now(UTC)
    assert run(stream, t).generation == 1
    assert {e["key"]: e["tombstone"] for e in api.get(S + "compacted/").json()["events"]} == {"A": False, "B": True}
    assert run(stream, t + timedelta(seconds=50)).state == "skipped"  # kept for delete_retention_s

    expired = run(stream, t + timedelta(seconds=150))

    assert (expired.state, expired.tombstones_dropped) == ("succeeded", 1)
    assert [e["key"] for e in api.get(S + "compacted/").json()["events"]] == ["A"]


def test_sealing_over_the_api_is_for_operators_and_refuses_a_body(api, user_api):
    factories.create_stream_over_api(api, "profiles", cleanup_policy="compact")
    assert seal(api) == []  # an empty active chunk: nothing to seal
    publish(api, ("A", "1"))
    assert user_api.post(S + "seal/", {}, format="json").status_code == 403
    refused = api.post(S + "seal/", {"segments": ["0"]}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "segments"
    assert seal(api) == [{"segment": "0", "chunk": 0}]
    assert api.get(S).json()["tail_cut"] == {"0": 1}  # nothing lost: the next publish goes to a new chunk
    publish(api, ("B", "1"))
    assert api.get(S).json()["tail_cut"] == {"0": 2}
    assert api.post("/api/v1/streams/shop/nope/seal/", {}, format="json").status_code == 404


def run(stream, at):
    return execute(CompactionRun.objects.create(stream=stream, trigger="command"), now=at)

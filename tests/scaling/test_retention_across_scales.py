"""Retention on a scaled stream: a truncation whose cut has passed a sealed segment whole retires
it (its data, its rows, the groups' state on it), cuts and sizes stay whole, and a cycle over a
stream whose subscribers' cuts were taken before a scale works as on any stream."""

import time
from datetime import UTC, datetime, timedelta
from io import StringIO

import factories
import pytest
from django.core.management import call_command

from groups.models import ReadPosition
from streams import logs
from streams.models import Segment, Stream
from streams.scaling import RETIRED_FILES_KEPT_S, retire_passed_segments

pytestmark = pytest.mark.django_db

S = "/api/v1/streams/shop/orders/"
G = "/api/v1/reader-groups/shop/billing/"
T0 = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)


def scale(api, seal, new_ranges):
    answer = api.post(S + "scale/", {"seal": seal, "new_ranges": new_ranges}, format="json")
    assert answer.status_code == 200, answer.json()


def publish(api, keys, size=30):
    factories.publish_over_api(api, [{"routing_key": k, "payload": "x" * size} for k in keys])


def cycle(at):
    out = StringIO()
    call_command("run_retention_cycle", "--now", at.isoformat(), stdout=out)
    return out.getvalue().strip()


def test_a_truncation_past_a_sealed_segment_retires_it_and_keeps_cuts_and_sizes_whole(api):
    factories.make_stream(segment_count=1)
    factories.create_group_over_api(api, retention_type="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT")
    publish(api, [f"k{i}" for i in range(5)])
    assert len(api.post(G + "read/", {"max_events": 3}, format="json").json()["deliveries"]) == 3
    scale(api, ["0"], [[0, 0.5], [0.5, 1]])
    publish(api, [f"k{i}" for i in range(6)])
    stream = Stream.objects.get(name="orders")
    log = logs.stream_log(stream)
    size_before = log.size_till(log.tail_cut())

    # a truncation at the start of the successors passes segment 0 whole
    answer = api.post(S + "truncate/", {"stream_cut": {"1": 0, "2": 0}}, format="json")
    assert answer.status_code == 200, answer.json()
    stream.refresh_from_db()
    assert stream.layout["0"].retired is not None and stream.layout.held_ids == ["1", "2"]
    assert not Segment.objects.filter(stream=stream, segment_id="0").exists()
    assert not ReadPosition.objects.filter(segment_id="0").exists()
    detail = api.get(S).json()
    assert [s["id"] for s in detail["segments"]] == ["1", "2"]
    assert detail["head_cut"] == {"1": 0, "2": 0} and detail["event_count"] == 6
    log = logs.stream_log(stream)
    assert log.size_till(log.tail_cut()) == size_before  # cumulative sizes never go back
    assert (log.root / "0").exists()  # its last files stay a while, for processes with the old layout

    # the group reads on: the successors' six events, nothing of the retired segment
    got = api.post(G + "read/", {"max_events": 20}, format="json").json()["deliveries"]
    assert len(got) == 6 and {d["segment"] for d in got} <= {"1", "2"}

    # later, the rest of its files go
    retire_passed_segments(stream, now=time.time() + RETIRED_FILES_KEPT_S + 1)
    assert not (log.root / "0").exists()
    assert api.get(S + "events/", {"limit": 50}).json()["next_cut"] == api.get(S).json()["tail_cut"]


def test_a_cycle_over_a_scaled_stream_with_cuts_from_before_the_scale(api):
    stream = factories.make_stream(
        segment_count=1, policy={"limit_type": "size", "min": 60, "max": 10_000, "consumption_based": True}
    )
    publish(api, [f"k{i}" for i in range(6)])
    factories.subscribe(stream, "A", {"0": 4})  # a cut taken before the scale: it names segment 0 only
    scale(api, ["0"], [[0, 0.5], [0.5, 1]])
    cycle(T0)
    stream.refresh_from_db()
    head = logs.stream_log(stream).head_cut()
    assert 0 < head["0"] <= 4 and head["1"] == head["2"] == 0  # A still needs segment 0 from offset 4
    publish(api, [f"k{i}" for i in range(6)])
    # A reaches the successors' tails: the sealed segment is passed whole and retired
    tails = api.get(S).json()["tail_cut"]
    factories.subscribe(stream, "A", {"0": 6, **tails})
    assert "truncated at {'0': 6, '1': 0, '2': 0}" in cycle(T0 + timedelta(hours=1))
    stream.refresh_from_db()
    assert stream.layout["0"].retired is not None
    log = logs.stream_log(stream)
    assert log.size_till(log.tail_cut()) == 12 * 30 and api.get(S).json()["event_count"] == 6

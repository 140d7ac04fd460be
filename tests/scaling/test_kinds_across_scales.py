"""Every kind of stream scales: a compacted stream's view folds the sealed segments and their
successors (the latest value wins across the scale), a delayed event published to a segment
sealed before it is due is delivered on time, and a stream refusing publishes at its max
(`reject_publish`) scales and still refuses."""

from datetime import UTC, datetime, timedelta

import factories
import pytest

from compaction.models import CompactionRun
from compaction.runs import execute
from groups.consuming import floors
from streams.models import Stream

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

S = "/api/v1/streams/shop/profiles/"


def make(api):
    return factories.create_stream_over_api(api, "profiles", cleanup_policy="compact", delete_retention_s=100)


def publish(api, *events):
    """(key, value or None for a tombstone) events to shop/profiles."""
    factories.publish_over_api(api, [{"key": k, "payload": v or ""} for k, v in events], stream="shop/profiles")


def view(api):
    answer = api.get(S + "compacted/")
    assert answer.status_code == 200, answer.content
    return answer.json()


def as_dict(page):
    return {e["key"]: (None if e["tombstone"] else e["payload"]) for e in page["events"]}


def run(stream, at):
    return execute(CompactionRun.objects.create(stream=stream, trigger="command"), now=at, seal=True)


def scale(api, stream, seal, new_ranges):
    answer = api.post(f"/api/v1/streams/shop/{stream}/scale/", {"seal": seal, "new_ranges": new_ranges}, format="json")
    assert answer.status_code == 200, answer.json()


def test_a_compacted_streams_view_folds_every_segment_across_a_split(api, spark):
    stream = make(api)
    publish(api, *[(f"user-{i}", "v1") for i in range(10)])
    scale(api, "profiles", ["0"], [[0, 0.5], [0.5, 1]])
    publish(api, *[(f"user-{i}", "v2") for i in range(0, 10, 2)], ("user-1", None))
    first = run(Stream.objects.get(pk=stream.pk), datetime.now(UTC) + timedelta(seconds=1))
    assert first.state == "succeeded", first.error
    got = as_dict(view(api))
    assert got == {f"user-{i}": ("v2" if i % 2 == 0 else "v1") for i in range(10)} | {"user-1": None}
    assert set(view(api)["horizon"]) >= {"0", "1", "2"}


def test_a_delayed_event_in_a_segment_sealed_before_it_is_due_comes_on_time(api, monkeypatch):
    now = [datetime.now(UTC).timestamp()]
    monkeypatch.setattr(floors, "clock", lambda: now[0])
    factories.make_stream(segment_count=1)
    factories.create_group_over_api(api, retention_type="NONE")
    due = datetime.fromtimestamp(now[0] + 30, UTC).isoformat()
    factories.publish_over_api(api, [{"routing_key": "a", "payload": "later", "deliver_at": due}])
    factories.publish_over_api(api, [{"routing_key": "a", "payload": "now"}])
    scale(api, "orders", ["0"], [[0, 0.5], [0.5, 1]])
    factories.publish_over_api(api, [{"routing_key": "a", "payload": "after the scale"}])

    def read():
        got = api.post("/api/v1/reader-groups/shop/billing/read/", {"max_events": 10}, format="json").json()
        ids = [d["delivery_id"] for d in got["deliveries"]]
        if ids:
            api.post("/api/v1/reader-groups/shop/billing/ack/", {"delivery_ids": ids}, format="json")
        return got["deliveries"]

    assert [d["payload"] for d in read()] == ["now"]  # the delayed one waits; the successor too
    assert [d["payload"] for d in read()] == ["after the scale"]  # the old segment handed out to its end
    now[0] += 31
    assert [d["payload"] for d in read()] == ["later"]


def test_a_full_stream_scales_and_still_refuses_publishes(api):
    stream = factories.make_stream(segment_count=1)
    Stream.objects.filter(pk=stream.pk).update(on_max_limit="reject_publish", full_since=datetime.now(UTC))
    scale(api, "orders", ["0"], [[0, 0.5], [0.5, 1]])
    refused = api.post("/api/v1/streams/shop/orders/events/", {"events": [{"payload": "x"}]}, format="json")
    assert refused.status_code == 507 and refused.json()["code"] == "stream_full"

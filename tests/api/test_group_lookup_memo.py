"""A web process remembers the reader group and positions a read or an ack looked up
(groups/consuming/floors.py `GROUPS_READ`, a `streams.memo.Memo`) and looks them up again as soon
as anything they were made from changes: a seek or new settings, a group deleted, a stream
scaled, a change another process made (heard on the change channel), and never while its listener
is not subscribed. An AUTOMATIC group remembered this way still checkpoints once per interval
across processes."""

from datetime import timedelta

import factories
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from groups import consuming
from groups.consuming import floors
from groups.models import Checkpoint, ReaderGroup
from streams import waking

pytestmark = pytest.mark.django_db
G = "/api/v1/reader-groups/shop/billing/"


@pytest.fixture(autouse=True)
def listened(settings):
    settings.CBR_GROUP_CACHE_S = 5  # as the real settings have it (the tests' turn it off)
    factories.listening()
    floors.forget_groups()


def lookups(api, path: str, body: dict) -> tuple[dict, int]:
    """A request to the group (`read/`, `ack/`): its answer, and how many times it looked up the
    group's positions."""
    with CaptureQueriesContext(connection) as ctx:
        response = api.post(G + path, body, format="json")
    assert response.status_code in (200, 404), response.content
    looked = sum(1 for q in ctx.captured_queries if 'p."handed"' in q["sql"] and " JOIN " in q["sql"])
    return response.json() | {"status": response.status_code}, looked


def payloads(answer: dict) -> list[str]:
    return [d["payload"] for d in answer["deliveries"]]


@pytest.fixture
def group(api):
    stream = factories.make_stream()
    factories.create_group_over_api(api, retention_type="NONE", start="head")
    factories.publish(stream, 3, b"e")
    return stream


def test_a_read_or_ack_after_the_first_does_not_look_its_group_up_again(api, group):
    first, looked = lookups(api, "read/", {"max_events": 1})
    assert payloads(first) == ["e"] and looked == 1
    answer, looked = lookups(api, "read/", {"max_events": 1})
    assert len(answer["deliveries"]) == 1 and looked == 0
    acked, looked = lookups(api, "ack/", {"delivery_ids": [first["deliveries"][0]["delivery_id"]]})
    assert acked["acked"] == 1 and looked == 0


def test_a_seek_is_followed_by_the_next_read(api, group):
    assert len(lookups(api, "read/", {"max_events": 10})[0]["deliveries"]) == 3
    assert lookups(api, "read/", {"max_events": 10})[0]["deliveries"] == []
    assert api.post(G + "seek/", {"position": "head"}, format="json").status_code == 200
    answer, looked = lookups(api, "read/", {"max_events": 10})
    assert len(answer["deliveries"]) == 3 and looked == 1  # from the head again: the group as it is now


def test_a_deleted_group_is_not_read(api, group, django_capture_on_commit_callbacks):
    assert lookups(api, "read/", {"max_events": 1})[1] == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert api.delete(G).status_code == 204
    answer, _ = lookups(api, "read/", {"max_events": 1})
    assert answer["status"] == 404 and answer["code"] == "not_found"


def test_a_scaled_stream_is_read_on_its_new_segments(api, group):
    assert lookups(api, "read/", {"max_events": 10})[1] == 1  # remembered, with one segment
    factories.scale_over_api(api, seal=["0"], new_ranges=[[0.0, 0.5], [0.5, 1.0]])
    factories.publish_over_api(api, [{"payload": f"s{i}", "routing_key": f"k{i}"} for i in range(6)])
    answer, looked = lookups(api, "read/", {"max_events": 10})
    assert looked == 1 and sorted(payloads(answer)) == [f"s{i}" for i in range(6)]


def test_a_change_another_process_made_is_followed_once_heard(api, group):
    assert lookups(api, "read/", {"max_events": 1})[1] == 1
    assert lookups(api, "read/", {"max_events": 1})[1] == 0
    factories.changed_elsewhere("group-reads")
    assert lookups(api, "read/", {"max_events": 1})[1] == 1
    factories.changed_elsewhere("groups")  # a seek or new settings elsewhere
    assert lookups(api, "read/", {"max_events": 1})[1] == 1
    factories.changed_elsewhere("streams")  # a stream scaled or changed elsewhere
    assert lookups(api, "read/", {"max_events": 1})[1] == 1


def test_nothing_is_remembered_while_the_listener_is_not_subscribed_or_when_told_not_to(
    api, group, monkeypatch, settings
):
    assert lookups(api, "read/", {"max_events": 1})[1] == 1
    monkeypatch.setattr(waking.listener(), "subscribed", False)
    assert [lookups(api, "read/", {"max_events": 1})[1] for _ in range(2)] == [1, 1]
    monkeypatch.undo()
    settings.CBR_GROUP_CACHE_S = 0
    assert [lookups(api, "read/", {"max_events": 1})[1] for _ in range(2)] == [1, 1]


def test_a_remembered_automatic_group_checkpoints_once_per_interval_whoever_checkpointed(api):
    stream = factories.make_stream()
    factories.create_group_over_api(
        api, retention_type="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT", start="head", checkpoint_interval_s=60
    )
    factories.publish(stream, 3, b"e")
    read = api.post(G + "read/", {"max_events": 3}, format="json").json()["deliveries"]
    checkpoints = Checkpoint.objects.filter(reader_group__name="billing")
    remembered, _ = floors.group_and_slots("shop", "billing")  # the object every request of the process shares
    long_ago = timezone.now() - timedelta(seconds=120)

    # another process checkpointed a moment ago; this one remembers a checkpoint long ago
    ReaderGroup.objects.filter(name="billing").update(last_checkpoint_at=timezone.now())
    remembered.last_checkpoint_at = long_ago
    assert api.post(G + "ack/", {"delivery_ids": [read[0]["delivery_id"]]}, format="json").status_code == 200
    assert checkpoints.count() == 0  # not due after all: asked afresh

    # nobody checkpointed for two minutes: due
    ReaderGroup.objects.filter(name="billing").update(last_checkpoint_at=long_ago)
    remembered.last_checkpoint_at = long_ago
    assert api.post(G + "ack/", {"delivery_ids": [read[1]["delivery_id"]]}, format="json").status_code == 200
    assert checkpoints.count() == 1


def test_an_ordered_group_passes_to_the_successors_once_another_process_acknowledged_the_predecessor(api):
    factories.make_stream()
    factories.create_group_over_api(api, retention_type="NONE", delivery="ordered", start="head")
    factories.publish_over_api(api, [{"payload": "before", "routing_key": "k"}])
    before = lookups(api, "read/", {"max_events": 10})[0]["deliveries"]
    factories.scale_over_api(api, seal=["0"], new_ranges=[[0.0, 0.5], [0.5, 1.0]])
    factories.publish_over_api(api, [{"payload": "after", "routing_key": "k"}])
    assert lookups(api, "read/", {"max_events": 10})[0]["deliveries"] == []  # "before" not acknowledged yet
    # another process acknowledges "before": this one's remembered floor of the sealed segment is older
    elsewhere, elsewhere_slots = floors._group_and_slots("shop", "billing")
    consuming.ack(elsewhere, [d["delivery_id"] for d in before], group_slots=elsewhere_slots)

    answer, looked = lookups(api, "read/", {"max_events": 10})

    assert looked == 0 and payloads(answer) == ["after"]  # the floor asked afresh, not waited out

"""Checkpoints over REST: one read and deleted, released once a truncation overtook them on some
segment, and persisted ones dropped once they lie wholly before the streams' heads (PDP-47)."""

import factories
import pytest

from domain.cuts import checkpoint_expired
from groups.models import Checkpoint, Subscription
from retention import services as retention_services
from streams.logs import stream_log

pytestmark = pytest.mark.django_db
G = "/api/v1/reader-groups/shop/billing/"


@pytest.fixture
def stream():
    """shop/orders, 2 segments of 10 events, read by the MANUAL group shop/billing."""
    stream = factories.make_stream(segment_count=2)
    for seg in stream.segment_ids:
        factories.publish(stream, 10, routing_key=factories.routing_key_for(stream, seg))
    factories.make_group(stream, retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")
    return stream


def checkpoint(name: str, cut: dict, persist: bool = True) -> Checkpoint:
    """A checkpoint at `cut` of shop/orders (as one taken when the group's floors were there)."""
    group = Subscription.objects.get().reader_group
    return Checkpoint.objects.create(reader_group=group, name=name, cuts={"shop/orders": cut}, persist=persist)


def test_a_checkpoint_is_read_and_deleted_by_name(api, stream):
    assert api.post(G + "checkpoints/", {"name": "v2:batch-7", "persist": True}, format="json").status_code == 201
    one = api.get(G + "checkpoints/v2:batch-7/")
    assert one.status_code == 200
    assert (one.json()["name"], one.json()["persist"], one.json()["cuts"]) == (
        "v2:batch-7",
        True,
        {"shop/orders": {"0": 0, "1": 0}},
    )
    assert api.delete(G + "checkpoints/v2:batch-7/").status_code == 204
    gone = api.get(G + "checkpoints/v2:batch-7/")
    assert gone.status_code == 404 and gone.json()["code"] == "checkpoint_not_found"
    again = api.delete(G + "checkpoints/v2:batch-7/")
    assert again.status_code == 404 and again.json()["field"] == "checkpoint"
    assert api.get(G + "checkpoints/").json()["results"] == []


def test_a_viewer_reads_a_checkpoint_but_cannot_delete_it(api, user_api, stream):
    checkpoint("cp", {"0": 1, "1": 1})
    assert user_api.get(G + "checkpoints/cp/").status_code == 200
    assert user_api.delete(G + "checkpoints/cp/").status_code == 403
    assert Checkpoint.objects.filter(name="cp").exists()


def test_deleting_a_released_checkpoint_leaves_the_cut_where_it_is(api, stream):
    checkpoint("cp", {"0": 4, "1": 6})
    assert api.post(G + "checkpoints/cp/release/").status_code == 200
    assert api.delete(G + "checkpoints/cp/").status_code == 204
    assert Subscription.objects.get().acknowledgement_cut == {"0": 4, "1": 6}


def test_a_checkpoint_a_truncation_overtook_on_one_segment_is_released_at_the_head_there(api, admin_user, stream):
    checkpoint("cp", {"0": 2, "1": 8})
    retention_services.do_truncate(stream, {"0": 5, "1": 5}, rule="manual", trigger="api", user=admin_user)

    released = api.post(G + "checkpoints/cp/release/")

    assert released.status_code == 200, released.content
    assert released.json()["streams"][0]["acknowledgement_cut"] == {"0": 5, "1": 8}


def test_persisted_checkpoints_wholly_before_the_head_expire_at_the_next_truncation(api, admin_user, stream):
    checkpoint("behind", {"0": 2, "1": 3})
    checkpoint("partly", {"0": 2, "1": 8})
    checkpoint("ahead", {"0": 7, "1": 7})
    checkpoint("at-head", {"0": 5, "1": 5})
    retention_services.do_truncate(stream, {"0": 5, "1": 5}, rule="manual", trigger="api", user=admin_user)
    assert sorted(Checkpoint.objects.values_list("name", flat=True)) == ["ahead", "at-head", "partly"]


def test_persisted_checkpoints_that_expired_are_dropped_at_the_next_checkpoint(api, stream):
    checkpoint("behind", {"0": 2, "1": 3})
    # the heads moved in the store alone (no truncation path ran here to drop it)
    log = stream_log(stream)
    log.segment("0").truncate(5)
    log.segment("1").truncate(5)
    assert api.post(G + "checkpoints/", {"name": "now", "persist": True}, format="json").status_code == 201
    assert list(Checkpoint.objects.values_list("name", flat=True)) == ["now"]


@pytest.mark.parametrize(
    ("cuts", "expired"),
    [
        ({"s/a": {"0": 1, "1": 2}}, True),  # wholly before
        ({"s/a": {"0": 1, "1": 5}}, False),  # at the head on one segment
        ({"s/a": {"0": 1, "1": 9}}, False),
        ({"s/a": {"0": 1, "1": 2}, "s/b": {"0": 3}}, False),  # s/b's head is 0
        ({"s/gone": {"0": 1}}, True),  # names no stream that still exists
        ({"s/a": {"0": 1, "1": 2}, "s/gone": {"0": 99}}, True),
    ],
)
def test_the_expiry_rule(cuts, expired):
    heads = {"s/a": {"0": 5, "1": 5}, "s/b": {"0": 0}}
    assert checkpoint_expired(cuts, heads) is expired

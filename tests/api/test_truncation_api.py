import factories
import pytest
from django.utils import timezone

from groups.models import Checkpoint, ReaderGroup
from retention import set_store
from retention.models import TruncationRecord

pytestmark = pytest.mark.django_db

BASE = "/api/v1/streams/shop/orders/"


@pytest.fixture
def stream(api):
    stream = factories.create_stream_over_api(api, segment_count=2)
    for seg_key in ("a", "b"):
        factories.publish_over_api(api, [{"payload": "0123456789", "routing_key": seg_key}] * 10)
    return stream


def tail(api):
    return api.get(BASE).json()["tail_cut"]


def test_an_admin_truncates_at_a_cut_and_history_names_them(api, admin_user, stream):
    t = tail(api)
    cut = {seg: off // 2 for seg, off in t.items()}
    response = api.post(BASE + "truncate/", {"stream_cut": cut}, format="json")
    assert response.status_code == 200
    record = response.json()
    assert record["after_cut"] == cut and record["triggered_by"] == "ada" and record["trigger"] == "api"
    assert record["reclaimed_bytes"] == sum(cut.values()) * 10
    detail = api.get(BASE).json()
    assert detail["head_cut"] == cut
    assert detail["event_count"] == sum(t.values()) - sum(cut.values())
    history = api.get(BASE + "truncations/").json()
    assert history["count"] == 1 and history["results"][0]["rule"] == "manual"
    events = api.get(BASE + "events/?limit=100").json()["events"]
    assert all(e["offset"] >= cut[e["segment"]] for e in events)


def test_a_cut_at_the_head_is_a_no_op(api, stream):
    response = api.post(BASE + "truncate/", {"stream_cut": {"0": 0, "1": 0}}, format="json")
    assert response.status_code == 200 and response.json()["id"] is None
    assert not TruncationRecord.objects.exists()


def test_a_non_admin_cannot_truncate(user_api, stream):
    response = user_api.post(BASE + "truncate/", {"stream_cut": {"0": 1, "1": 1}}, format="json")
    assert response.status_code == 403
    assert not TruncationRecord.objects.exists()


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "stream_cut"),
        ({"stream_cut": {"0": 1}}, "stream_cut"),
        ({"stream_cut": {"0": 1, "1": 1, "7": 1}}, "stream_cut.7"),
        ({"stream_cut": {"0": 1, "1": 10_000}}, "stream_cut.1"),
        ({"stream_cut": {"0": -1, "1": 1}}, "stream_cut.0"),
        ({"stream_cut": "0:1"}, "stream_cut"),
    ],
)
def test_a_bad_cut_is_a_400_and_truncates_nothing(api, stream, body, field):
    response = api.post(BASE + "truncate/", body, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert api.get(BASE).json()["head_cut"] == {"0": 0, "1": 0}


def test_the_retention_set_is_listed(api, stream):
    at = timezone.now()
    set_store.write_sets({stream.pk: [set_store.stored(at, 200, tail(api), None)]})
    body = api.get(BASE + "retention-set/").json()
    assert body == {
        "count": 1,
        "next": None,
        "previous": None,
        "results": [{"recorded_at": at.isoformat().replace("+00:00", "Z"), "size_bytes": 200, "cut": tail(api)}],
    }


def test_metrics_report_held_and_reclaimed_bytes(api, client, stream):
    api.post(BASE + "truncate/", {"stream_cut": {"0": 5, "1": 0}}, format="json")
    text = client.get("/metrics").content.decode()
    assert 'cbr_stream_bytes{stream="shop/orders"} 150.0' in text
    assert "cbr_reclaimed_bytes_total 50.0" in text


def test_a_manual_truncation_expires_the_checkpoints_behind_it_as_a_cycle_does(api, stream):
    # one truncation path: what a cycle's truncation does to checkpoints, a manual one does too
    body = {"scope": "shop", "name": "billing", "streams": ["shop/orders"], "retention_type": "NONE"}
    assert api.post("/api/v1/reader-groups/", body, format="json").status_code == 201
    group = ReaderGroup.objects.get()
    Checkpoint.objects.create(reader_group=group, name="old", cuts={"shop/orders": {"0": 1, "1": 1}})
    Checkpoint.objects.create(reader_group=group, name="kept", cuts={"shop/orders": {"0": 1, "1": 4}}, persist=True)
    Checkpoint.objects.create(reader_group=group, name="gone", cuts={"shop/orders": {"0": 1, "1": 2}}, persist=True)
    Checkpoint.objects.create(reader_group=group, name="at-head", cuts={"shop/orders": {"0": 3, "1": 3}})
    response = api.post(BASE + "truncate/", {"stream_cut": {"0": 3, "1": 3}}, format="json")
    assert response.status_code == 200, response.content
    # persisted: dropped only once wholly before the head (PDP-47)
    assert sorted(Checkpoint.objects.values_list("name", flat=True)) == ["at-head", "kept"]

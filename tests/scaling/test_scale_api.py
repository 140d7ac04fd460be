"""Manual scaling over REST: a split, a merge, both at once; the refusals; publishing routes by the
new segments at once; plain reads follow the successor order; cuts in Pravega's form."""

import json

import factories
import pytest

from domain.events import EventIn
from store.segment import SegmentSealed
from store.store import SealedSegments, StreamLog, key_space_position
from streams.logs import segment_store
from streams.models import Scaling, Stream
from streams.services import do_publish

pytestmark = pytest.mark.django_db

S = "/api/v1/streams/shop/orders/"


def create(api, **body):
    body = {"scope": "shop", "name": "orders", "segment_count": 2, **body}
    response = api.post("/api/v1/streams/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def scale(api, **body):
    return api.post(S + "scale/", body, format="json")


def publish(api, keys):
    response = api.post(S + "events/", {"events": [{"routing_key": k, "payload": k} for k in keys]}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["positions"]


def read_all(api, start=None):
    """Every event from `start` on, page by page (limit 3), with the cuts seen."""
    events, cuts, cut = [], [], start
    while True:
        query = {"limit": 3}
        if cut is not None:
            query["from"] = json.dumps(cut)
        page = api.get(S + "events/", query).json()
        events += page["events"]
        cuts.append(page["next_cut"])
        if not page["events"]:
            return events, cuts
        cut = page["next_cut"]


def test_a_split_seals_a_segment_and_routes_its_keys_to_the_successors_at_once(api):
    create(api)
    keys = [f"k{i}" for i in range(40)]
    before = publish(api, keys)
    answer = scale(api, seal=["0"], new_ranges=[[0, 0.25], [0.25, 0.5]], epoch=0)
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert body["epoch"] == 1
    assert [(s["id"], s["key_range"], s["predecessors"]) for s in body["segments"]] == [
        ("2", [0.0, 0.25], ["0"]),
        ("3", [0.25, 0.5], ["0"]),
    ]
    detail = api.get(S).json()
    assert detail["epoch"] == 1 and detail["segment_count"] == 3
    assert {s["id"]: s["sealed"] for s in detail["segments"]} == {"0": True, "1": False, "2": False, "3": False}
    after = publish(api, keys)
    for key, old, new in zip(keys, before, after, strict=True):
        where = key_space_position(key.encode())
        if where < 0.5:
            assert old["segment"] == "0" and new["segment"] == ("2" if where < 0.25 else "3")
        else:
            assert old["segment"] == new["segment"] == "1"
    # the tail is the active segments'; the head still starts in the sealed one
    assert set(detail["tail_cut"]) == {"1", "2", "3"}
    assert set(detail["head_cut"]) == {"0", "1"}
    history = api.get(S + "scalings/").json()["results"]
    assert [(h["epoch"], h["sealed"], h["trigger"]) for h in history] == [(1, ["0"], "manual")]
    assert [c["id"] for c in history[0]["created"]] == ["2", "3"]


def test_reads_keep_each_keys_order_across_split_merge_split(api):
    create(api, segment_count=1)
    keys = [f"user-{i}" for i in range(12)]
    sent = []
    for round_ in range(4):
        if round_ == 1:
            assert scale(api, seal=["0"], new_ranges=[[0, 0.5], [0.5, 1]]).status_code == 200
        if round_ == 2:
            assert scale(api, seal=["1", "2"], new_ranges=[[0, 1]]).status_code == 200
        if round_ == 3:
            assert scale(api, seal=["3"], new_ranges=[[0, 0.3], [0.3, 0.6], [0.6, 1]]).status_code == 200
        batch = [f"{k}" for k in keys]
        api.post(
            S + "events/",
            {"events": [{"routing_key": k, "payload": f"{k}#{round_}"} for k in batch]},
            format="json",
        )
        sent += [f"{k}#{round_}" for k in batch]
    events, cuts = read_all(api)
    got = [e["payload"] for e in events]
    assert sorted(got) == sorted(sent)  # each once
    for key in keys:
        assert [p for p in got if p.startswith(key + "#")] == [f"{key}#{r}" for r in range(4)]
    stream = Stream.objects.get(name="orders")
    assert stream.epoch == 3 and stream.segment_ids == ["0", "1", "2", "3", "4", "5", "6"]
    # the last cut is the tail: the active segments only, each at its end
    assert set(cuts[-1]) == {"4", "5", "6"}


def test_a_read_can_start_from_a_cut_that_spans_epochs(api):
    create(api, segment_count=1)
    publish(api, ["a", "b", "c"])
    scale(api, seal=["0"], new_ranges=[[0, 0.5], [0.5, 1]])
    publish(api, ["a", "b", "c"])
    # read the old segment to its end: its successors are named at 0 beside it (Pravega's -1 taken too)
    first = api.get(S + "events/", {"limit": 2}).json()
    assert first["next_cut"] == {"0": 2}
    rest = api.get(S + "events/", {"from": '{"0": 3, "1": -1, "2": -1}'}).json()
    assert len(rest["events"]) == 3 and {e["segment"] for e in rest["events"]} <= {"1", "2"}
    gap = api.get(S + "events/", {"from": '{"1": 0}'})
    assert gap.status_code == 400 and gap.json()["field"] == "from"
    overlap = api.get(S + "events/", {"from": '{"0": 1, "1": 2, "2": 0}'})
    assert overlap.status_code == 400 and overlap.json()["field"] == "from"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"seal": ["9"], "new_ranges": [[0, 0.5]]}, "seal"),
        ({"seal": [], "new_ranges": [[0, 0.5]]}, "seal"),
        ({"seal": "0", "new_ranges": [[0, 0.5]]}, "seal"),
        ({"seal": ["0", "0"], "new_ranges": [[0, 0.5]]}, "seal"),
        ({"seal": ["0"], "new_ranges": [[0, 0.2], [0.3, 0.5]]}, "new_ranges"),  # a gap
        ({"seal": ["0"], "new_ranges": [[0, 0.3], [0.2, 0.5]]}, "new_ranges"),  # an overlap
        ({"seal": ["0"], "new_ranges": [[0, 0.6]]}, "new_ranges"),  # outside the sealed keys
        ({"seal": ["0"], "new_ranges": [[0.25, 0.25], [0, 0.5]]}, "new_ranges"),  # empty
        ({"seal": ["0"], "new_ranges": []}, "new_ranges"),
        ({"seal": ["0"], "new_ranges": [["0", "0.5"]]}, "new_ranges"),
        ({"seal": ["0"], "new_ranges": [[0, 0.5]], "epoch": -1}, "epoch"),
        ({"seal": ["0"], "new_ranges": [[0, 0.5]], "why": "x"}, "why"),
        ({"new_ranges": [[0, 0.5]]}, "seal"),
    ],
)
def test_a_bad_scale_is_a_400_naming_the_field_and_changes_nothing(api, body, field):
    create(api)
    refused = scale(api, **body)
    assert refused.status_code == 400, refused.json()
    assert refused.json()["field"] == field
    stream = Stream.objects.get(name="orders")
    assert stream.epoch == 0 and stream.segment_ids == ["0", "1"] and not Scaling.objects.exists()


def test_a_sealed_segment_cannot_be_sealed_again_and_a_stale_epoch_is_a_409(api):
    create(api)
    assert scale(api, seal=["0"], new_ranges=[[0, 0.5]], epoch=0).status_code == 200
    again = scale(api, seal=["0"], new_ranges=[[0, 0.5]])
    assert again.status_code == 400 and again.json()["field"] == "seal"
    stale = scale(api, seal=["1"], new_ranges=[[0.5, 1]], epoch=0)
    assert stale.status_code == 409 and stale.json()["code"] == "epoch_mismatch"
    assert Stream.objects.get(name="orders").epoch == 1


def test_a_viewer_cannot_scale(user_api, api):
    create(api)
    assert user_api.post(S + "scale/", {"seal": ["0"], "new_ranges": [[0, 0.5]]}, format="json").status_code == 403
    assert user_api.get(S + "scalings/").status_code == 200


def test_a_scale_stopped_before_its_seal_is_finished_by_the_first_writer_or_reader(api, monkeypatch):
    """The epoch commits before the store seals the old segments: a process stopped in between
    leaves the new epoch whole, and the first append by the new layout seals the old segments
    before it writes, so a writer that still routes by the old layout is refused from then on
    and routed again: each key's events come in the order they were answered (a stale write
    landing in the old segment after the successor's event would be read before it)."""
    create(api, segment_count=1)
    publish(api, ["a"])
    stale = segment_store().stream(Stream.objects.get(name="orders").storage_key, 1)
    with monkeypatch.context() as m:
        m.setattr(StreamLog, "seal", lambda self, ids: {})  # the scale stops after its commit
        assert scale(api, seal=["0"], new_ranges=[[0, 0.5], [0.5, 1]]).status_code == 200
    publish(api, ["a"])  # to a successor: segment 0 is sealed first
    with pytest.raises(SealedSegments):  # the stale writer, after it
        stale.append([EventIn(payload=b"late", routing_key=b"a")])
    with pytest.raises(SegmentSealed):
        stale.segment("0").append([EventIn(payload=b"later", routing_key=b"a")])
    # a publisher with the old layout is routed again by the new one
    old = Stream.objects.get(name="orders")
    old.scaled_segments, old.segment_count = [], 1
    (position,) = do_publish(old, [EventIn(payload=b"rerouted", routing_key=b"a")])
    assert position.segment in ("1", "2")
    events, _ = read_all(api)
    assert [e["payload"] for e in events] == ["a", "a", "rerouted"]


def test_metrics_show_each_streams_active_segments_and_the_scales_made(api, client):
    create(api)
    factories.subscribe(Stream.objects.get(name="orders"), "A", {"0": 0, "1": 0})  # a cut from before the scales
    publish(api, [f"k{i}" for i in range(10)])
    assert scale(api, seal=["0"], new_ranges=[[0, 0.25], [0.25, 0.5]]).status_code == 200
    assert scale(api, seal=["2", "3"], new_ranges=[[0, 0.5]]).status_code == 200
    assert scale(api, seal=["1"], new_ranges=[[0.5, 0.7], [0.7, 0.9], [0.9, 1]]).status_code == 200
    publish(api, [f"k{i}" for i in range(10)])
    text = client.get("/metrics").content.decode()
    assert 'cbr_stream_segments{stream="shop/orders"} 4' in text
    assert 'cbr_scalings_total{trigger="manual"} 3' in text and 'cbr_scalings_total{trigger="auto"} 0' in text
    assert 'cbr_stream_published_events_total{stream="shop/orders"} 20' in text


def test_a_malformed_scale_is_a_400_whatever_the_epoch_it_names(api):
    create(api)
    refused = scale(api, seal=[-1, True], new_ranges={"a": 1}, epoch=7)
    assert refused.status_code == 400 and refused.json()["field"] == "seal"
    refused = scale(api, seal=["0"], new_ranges=[[0, 2]], epoch=7)
    assert refused.status_code == 400 and refused.json()["field"] == "new_ranges"
    stale = scale(api, seal=["0"], new_ranges=[[0, 0.5]], epoch=7)
    assert stale.status_code == 409 and stale.json()["code"] == "epoch_mismatch"

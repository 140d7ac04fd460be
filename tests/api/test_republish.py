"""Republishing dead letters (`POST …/republish/`): each goes back to the stream it came from once,
as it came (payload, routing key, key, its own headers, none of the `cbr-` ones), recorded with who
and when; a second republish skips it; bad bodies are refused naming the field, republishing
nothing."""

import factories
import pytest
from page_text import text

from domain.events import EventIn
from groups.models import Republished
from streams import logs, services
from streams.models import Stream

pytestmark = pytest.mark.django_db

G = "/api/v1/reader-groups/shop/billing/"
DLQ = "/api/v1/streams/shop/orders-dlq/republish/"


@pytest.fixture
def dead(api, data_dir):
    """Three events dead-lettered by a group that gives up after one delivery."""
    stream = factories.make_stream()
    services.do_publish(
        stream,
        [
            EventIn(f"e{i}".encode(), routing_key=b"rk", key=f"k{i}".encode(), headers={"type": "order"})
            for i in range(3)
        ],
    )
    factories.create_group_over_api(api, retention_type="NONE", max_deliveries=1, on_poison="dead_letter")
    got = api.post(G + "read/", {"max_events": 10}, format="json").json()["deliveries"]
    api.post(G + "nack/", {"delivery_ids": [d["delivery_id"] for d in got], "reason": "bad"}, format="json")
    assert api.post(G + "read/", {"max_events": 10}, format="json").json()["deliveries"] == []
    dlq = Stream.objects.get(name="orders-dlq")
    assert logs.stream_state(dlq).event_count == 3
    return stream


def source_events(stream):
    records, _ = logs.read_events(stream, {}, 100)
    return [r.record for r in records]


def test_a_dead_letter_goes_back_as_it_came_once(api, dead, admin_user):
    answer = api.post(DLQ, {"events": [{"segment": "0", "offset": 1}]}, format="json")
    assert answer.status_code == 200 and answer.json() == {"republished": 1, "skipped": 0}
    again = source_events(dead)[3]
    assert (again.payload, again.routing_key, again.key, again.headers) == (b"e1", b"rk", b"k1", {"type": "order"})
    row = Republished.objects.get()
    assert (row.segment, row.offset, row.source_offset, row.republished_by) == ("0", 1, 3, admin_user)

    # a second time: skipped; "all" republishes the two others only
    assert api.post(DLQ, {"events": [{"segment": "0", "offset": 1}]}, format="json").json() == {
        "republished": 0,
        "skipped": 1,
    }
    assert api.post(DLQ, {"all": True}, format="json").json() == {"republished": 2, "skipped": 1}
    assert [r.payload for r in source_events(dead)] == [b"e0", b"e1", b"e2", b"e1", b"e0", b"e2"]
    assert api.post(DLQ, {"all": True}, format="json").json() == {"republished": 0, "skipped": 3}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "events"),
        ({"events": []}, "events"),
        ({"events": [{"segment": "0"}]}, "events[0]"),
        ({"events": [{"segment": "0", "offset": -1}]}, "events[0].offset"),
        ({"events": [{"segment": "9", "offset": 0}]}, "events[0].segment"),
        ({"events": [{"segment": "0", "offset": 0}, {"segment": "0", "offset": 7}]}, "events[1]"),
        ({"all": False}, "all"),
        ({"all": True, "events": []}, "all"),
        ({"all": True, "x": 1}, "x"),
    ],
)
def test_a_bad_republish_names_its_field_and_republishes_nothing(api, dead, body, field):
    answer = api.post(DLQ, body, format="json")
    assert answer.status_code == 400 and answer.json()["field"] == field, answer.content
    assert len(source_events(dead)) == 3 and not Republished.objects.exists()


def test_only_a_dead_letter_stream_is_republished(api, dead):
    answer = api.post("/api/v1/streams/shop/orders/republish/", {"all": True}, format="json")
    assert answer.status_code == 400 and answer.json()["field"] == "stream"


def test_the_console_republishes_one_or_all_from_the_dead_letter_streams_page(
    api, dead, admin_client, client, plain_user
):
    page = admin_client.get("/streams/shop/orders-dlq/events/").content.decode()
    assert page.count('name="position"') == 3 and "Republish all" in page
    done = admin_client.post("/streams/shop/orders-dlq/events/republish/", {"position": "0:2"}, follow=True)
    shown = text(done.content.decode())
    assert "1 dead letter(s) republished." in shown and shown.count("republished") >= 2  # the chip
    assert done.content.decode().count('name="position"') == 2
    everything = admin_client.post("/streams/shop/orders-dlq/events/republish/", {"all": "1"}, follow=True)
    assert "2 dead letter(s) republished, 1 skipped" in text(everything.content.decode())
    assert [r.payload for r in source_events(dead)][3:] == [b"e2", b"e0", b"e1"]

    viewer = factories.console_client(plain_user, client)
    assert viewer.post("/streams/shop/orders-dlq/events/republish/", {"all": "1"}).status_code == 403
    assert "Republish all" not in viewer.get("/streams/shop/orders-dlq/events/").content.decode()

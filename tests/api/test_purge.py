"""Purge (admins): a manual truncation at the tail or at a time, over the API and in the console,
recorded in the truncation history as any manual truncation; a bad target is refused naming it,
and nothing is deleted."""

import factories
import pytest

from domain.events import EventIn
from retention.models import TruncationRecord
from streams import logs, services

pytestmark = pytest.mark.django_db

PURGE = "/api/v1/streams/shop/orders/purge/"


@pytest.fixture
def stream(data_dir, monkeypatch):
    stream = factories.make_stream(segment_count=2)
    clock = {"ms": 1_800_000_000_000}  # 2027-01-15T08:00:00Z, a minute between batches
    monkeypatch.setattr("store.segment.append.epoch_ms", lambda: clock["ms"])
    for batch in range(3):
        services.do_publish(stream, [EventIn(f"b{batch}-{i}".encode(), routing_key=f"k{i}".encode()) for i in range(4)])
        clock["ms"] += 60_000
    return stream


def held(stream) -> int:
    log = logs.stream_log(stream)
    head, tail = log.head_cut(), log.tail_cut()
    return sum(tail[s] - head[s] for s in tail)


def test_a_purge_to_a_time_deletes_what_was_published_before_it_and_is_recorded(api, stream, admin_user):
    answer = api.post(PURGE, {"to": {"time": "2027-01-15T08:01:00Z"}}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["rule"] == "manual" and held(stream) == 8  # the first batch went
    record = TruncationRecord.objects.get(stream=stream)
    assert (record.rule, record.trigger, record.triggered_by) == ("manual", "api", admin_user)

    assert api.post(PURGE, {"to": "tail"}, format="json").status_code == 200 and held(stream) == 0
    again = api.post(PURGE, {"to": "tail"}, format="json").json()
    assert again["id"] is None and again["rule"] == "manual:noop"


@pytest.mark.parametrize(
    ("body", "field"),
    [({}, "to"), ({"to": "head"}, "to"), ({"to": {"time": "soon"}}, "to.time"), ({"to": "tail", "x": 1}, "x")],
)
def test_a_bad_purge_names_its_field_and_deletes_nothing(api, stream, body, field):
    answer = api.post(PURGE, body, format="json")
    assert answer.status_code == 400 and answer.json()["field"] == field
    assert held(stream) == 12


def test_the_console_purges_after_the_name_is_typed(admin_client, stream, operator_user, client):
    page = admin_client.get("/streams/shop/orders/")
    assert 'href="/streams/shop/orders/purge/"' in page.content.decode()
    refused = admin_client.post("/streams/shop/orders/purge/", {"to": "tail", "confirm": "orders"})
    assert refused.status_code == 400 and held(stream) == 12
    bad_time = admin_client.post("/streams/shop/orders/purge/", {"to": "time", "time": "", "confirm": "shop/orders"})
    assert bad_time.status_code == 400 and "to.time" in bad_time.content.decode() and held(stream) == 12

    done = admin_client.post(
        "/streams/shop/orders/purge/", {"to": "time", "time": "2027-01-15T08:02:00", "confirm": "shop/orders"}
    )
    assert done.status_code == 302 and held(stream) == 4
    assert TruncationRecord.objects.get(stream=stream).trigger == "console"
    operator = factories.console_client(operator_user, client)
    assert 'href="/streams/shop/orders/purge/"' not in operator.get("/streams/shop/orders/").content.decode()

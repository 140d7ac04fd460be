import base64
import csv
import json

import factories
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from streams.logs import stream_log

pytestmark = pytest.mark.django_db

EVENTS = "/api/v1/streams/shop/orders/events/"


@pytest.fixture
def stream(api):
    return factories.create_stream_over_api(api, segment_count=3)


def publish(api, events):
    return api.post(EVENTS, {"events": events}, format="json")


def read(api, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return api.get(f"{EVENTS}?{query}")


def test_publish_answers_positions_and_a_read_returns_every_field(api, stream):
    response = publish(
        api,
        [
            {"payload": "héllo", "routing_key": "cust-1", "key": "order-9", "headers": {"type": "created"}},
            {"payload_b64": base64.b64encode(b"\xff\x00bin").decode(), "routing_key": "cust-1"},
        ],
    )
    assert response.status_code == 201
    positions = response.json()["positions"]
    assert positions[0]["segment"] == positions[1]["segment"]  # one key, one segment, in order
    assert [p["offset"] for p in positions] == [0, 1]
    events = read(api, limit=10).json()["events"]
    first, second = events
    assert first["payload"] == "héllo" and first["key"] == "order-9" and first["routing_key"] == "cust-1"
    assert first["headers"] == {"type": "created"} and first["deliver_at"] is None
    assert base64.b64decode(first["payload_b64"]) == "héllo".encode()
    assert first["published_at"].endswith("Z")
    assert "payload" not in second and base64.b64decode(second["payload_b64"]) == b"\xff\x00bin"


def test_routing_by_key_is_stable_and_spreads_keys(api, stream):
    keys = [f"k{i}" for i in range(60)]
    first = publish(api, [{"payload": "a", "routing_key": k} for k in keys]).json()["positions"]
    again = publish(api, [{"payload": "b", "routing_key": k} for k in keys]).json()["positions"]
    assert [p["segment"] for p in first] == [p["segment"] for p in again]
    assert {p["segment"] for p in first} == {"0", "1", "2"}


def test_reading_from_a_cut_continues_where_the_last_read_stopped(api, stream):
    publish(api, [{"payload": f"e{i}", "routing_key": f"k{i % 5}"} for i in range(50)])
    seen = []
    cut = {}
    while True:
        page = read(api, limit=7, **({"from": json.dumps(cut)} if cut else {})).json()
        if not page["events"]:
            break
        seen += [(e["segment"], e["offset"]) for e in page["events"]]
        cut = page["next_cut"]
    assert len(seen) == len(set(seen)) == 50
    assert cut == stream_log(stream).tail_cut()


def test_delayed_events_carry_their_delivery_time(api, stream):
    publish(api, [{"payload": "later", "delay_ms": 60_000}, {"payload": "past", "deliver_at": "2001-01-01T00:00:00Z"}])
    events = {e["payload"]: e for e in read(api).json()["events"]}
    assert events["later"]["deliver_at"] is not None
    assert events["past"]["deliver_at"] is None  # a time in the past makes an ordinary event


@pytest.mark.parametrize(
    "events, status, field",
    [
        ([{"payload": "ok"}, {"payload_b64": "***"}], 400, "events[1].payload_b64"),
        ([{"payload": 5}], 400, "events[0].payload"),
        ([{}], 400, "events[0].payload"),
        ([{"payload": "a", "payload_b64": "YQ=="}], 400, "events[0].payload"),
        ([{"payload": "a", "delay_ms": -1}], 400, "events[0].delay_ms"),
        ([{"payload": "a", "delay_ms": 1.5}], 400, "events[0].delay_ms"),
        ([{"payload": "a", "deliver_at": "tomorrow"}], 400, "events[0].deliver_at"),
        ([{"payload": "a", "headers": {"n": 1}}], 400, "events[0].headers.n"),
        ([{"payload": "a", "routing_key": 7}], 400, "events[0].routing_key"),
        ([{"payload": "a", "colour": "red"}], 400, "events[0].colour"),
        ([{"payload": "ok"}, {"payload": "x" * 2000}], 413, "events[1].payload"),
        ([], 400, "events"),
        ("not a list", 400, "events"),
    ],
)
def test_a_bad_batch_is_refused_whole_naming_the_field(api, stream, settings, events, status, field):
    settings.CBR_MAX_EVENT_BYTES = 1000
    response = publish(api, events)
    assert response.status_code == status, response.content
    assert response.json()["field"] == field
    assert stream_log(stream).tail_cut() == {"0": 0, "1": 0, "2": 0}  # nothing appended


def test_a_batch_over_the_event_count_limit_is_refused(api, stream, settings):
    settings.CBR_MAX_BATCH_EVENTS = 3
    response = publish(api, [{"payload": "x"}] * 4)
    assert response.status_code == 400 and response.json()["field"] == "events"


def test_a_delay_beyond_the_streams_max_is_refused(api, stream):
    api.patch("/api/v1/streams/shop/orders/", {"max_delay_s": 60}, format="json")
    response = publish(api, [{"payload": "x", "delay_ms": 61_000}])
    assert response.status_code == 400 and response.json()["field"] == "events[0].delay_ms"


def test_malformed_json_publishes_nothing(api, stream):
    response = api.post(EVENTS, b'{"events": [{"payload": "a"}', content_type="application/json")
    assert response.status_code == 400 and response.json()["field"] == "body"
    assert sum(stream_log(stream).tail_cut().values()) == 0


def test_publishing_to_an_unknown_stream_is_a_404(api, stream):
    response = api.post("/api/v1/streams/shop/nope/events/", {"events": [{"payload": "a"}]}, format="json")
    assert response.status_code == 404


@pytest.mark.parametrize(
    "params, field",
    [
        ({"from": "{bad"}, "from"),
        ({"from": "[1]"}, "from"),
        ({"from": json.dumps({"9": 0})}, "from.9"),
        ({"from": json.dumps({"0": -1})}, "from.0"),
        ({"from": json.dumps({"0": "1"})}, "from.0"),
        ({"from": json.dumps({"0": 999})}, "from.0"),
        ({"limit": "0"}, "limit"),
        ({"limit": "-3"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "100000"}, "limit"),
        ({"from_time": "yesterday"}, "from_time"),
        ({"from_time": "2026-11-28T07:00:00"}, "from_time"),  # no UTC offset
        ({"from_time": "2026-11-28T07:00:00Z", "from": json.dumps({"0": 0})}, "from_time"),
    ],
)
def test_bad_read_parameters_are_400s(api, stream, params, field):
    publish(api, [{"payload": "x"}])
    response = read(api, **params)
    assert response.status_code == 400
    assert response.json()["field"] == field


def test_a_publish_asks_the_database_one_query_and_none_once_its_stream_is_remembered(api):
    # given: a stream, and a token already looked up (and remembered: streams.memo)
    factories.listening()
    factories.make_stream()
    assert api.get("/api/v1/streams/").status_code == 200
    statements = []
    for payload in ("a", "b"):
        # when: a publish is made
        with CaptureQueriesContext(connection) as queries:
            answer = api.post("/api/v1/streams/shop/orders/events/", {"events": [{"payload": payload}]}, format="json")
        assert answer.status_code == 201
        statements.append([q["sql"].split()[0] for q in queries.captured_queries])
    # then: the first saw the stream's lookup alone (one statement, no ORM query built per
    # publish), the second nothing
    assert statements == [["SELECT"], []], statements


@pytest.mark.parametrize("wait_ms", ["-1", "60001", "soon"])
def test_a_plain_read_refuses_a_wait_out_of_its_bounds_naming_it(api, wait_ms):
    factories.make_stream()
    answer = api.get(f"/api/v1/streams/shop/orders/events/?wait_ms={wait_ms}")
    assert answer.status_code == 400 and answer.json()["field"] == "wait_ms"


def test_a_plain_read_with_events_there_answers_at_once_whatever_its_wait(api):
    factories.make_stream()
    api.post("/api/v1/streams/shop/orders/events/", {"events": [{"payload": "a"}]}, format="json")
    answer = api.get("/api/v1/streams/shop/orders/events/?wait_ms=60000")
    assert [e["payload"] for e in answer.json()["events"]] == ["a"]


def test_a_plain_read_starts_at_a_time(api, stream, monkeypatch):
    # given events published at three known times
    clock = {"ms": 1_800_000_000_000}
    monkeypatch.setattr("store.segment.append.epoch_ms", lambda: clock["ms"])
    for n in range(3):
        publish(api, [{"payload": f"e{n}", "routing_key": "k"}])
        clock["ms"] += 60_000
    # when read from the second one's time (and from a moment between the first and the second)
    for at in ("2027-01-15T08:01:00Z", "2027-01-15T08:00:30Z", "2027-01-15T09:01:00%2B01:00"):
        page = read(api, from_time=at).json()
        # then the read starts there, and next_cut goes on from where it stopped
        assert [e["payload"] for e in page["events"]] == ["e1", "e2"], at
    assert read(api, from_time="2030-01-01T00:00:00Z").json()["events"] == []
    assert [e["payload"] for e in read(api, from_time="2020-01-01T00:00:00Z").json()["events"]] == ["e0", "e1", "e2"]


def test_a_search_pages_through_the_stream_skipping_nothing(api, stream, settings):
    # given 60 orders on three segments, a third of them paid, some with a header
    settings.CBR_SEARCH_SCAN_EVENTS = 25  # each page looks at no more than this
    events = [
        {
            "payload": json.dumps({"n": n, "amount": n * 10, "state": "paid" if n % 3 == 0 else "open"}),
            "routing_key": f"c{n % 5}",
            **({"headers": {"region": "eu"}} if n % 2 == 0 else {}),
        }
        for n in range(60)
    ]
    assert publish(api, events).status_code == 201

    # when the search is paged through with each page's next_cut
    def search(**params) -> tuple[list[int], list[int]]:
        found, examined, cut = [], [], None
        for _ in range(50):
            query = dict(params, limit=4, **({"from": json.dumps(cut)} if cut else {}))
            page = api.get(EVENTS, query).json()
            found += [json.loads(e["payload"])["n"] for e in page["events"]]
            examined.append(page["examined"])
            if page["next_cut"] == cut:
                break
            cut = page["next_cut"]
        return sorted(found), examined

    # then every match is found once, and no page looked at more than the bound
    paid, examined = search(json="$.state=paid")
    assert paid == [n for n in range(60) if n % 3 == 0] and max(examined) <= 25
    assert search(contains='"state": "paid"')[0] == paid
    assert search(header="region:eu", json="$.amount>=300")[0] == [n for n in range(30, 60) if n % 2 == 0]
    assert search(header=["region:eu"], routing_key="c0")[0] == [n for n in range(60) if n % 10 == 0]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"json": "amount>3"}, "json"),
        ({"header": "region"}, "header"),
        ({"contains": ""}, "contains"),
        ({"contains": "x", "wait_ms": "1000"}, "wait_ms"),
    ],
)
def test_a_bad_search_is_refused_naming_its_field(api, stream, params, field):
    answer = api.get(EVENTS, params)
    assert answer.status_code == 400 and answer.json()["field"] == field


def test_an_export_streams_the_events_between_two_cuts_as_json_lines_or_csv(api, stream):
    events = [
        {"payload": json.dumps({"n": n}), "routing_key": f"r{n % 3}", **({"headers": {"t": "x"}} if n % 2 else {})}
        for n in range(2500)
    ]
    for at in range(0, 2500, 1000):
        assert publish(api, events[at : at + 1000]).status_code == 201
    answer = api.get(EVENTS + "export/")
    assert answer.status_code == 200 and answer["Content-Type"] == "application/x-ndjson"
    assert answer["Content-Disposition"] == 'attachment; filename="shop-orders.jsonl"'
    lines = [json.loads(line) for line in b"".join(answer.streaming_content).splitlines()]
    assert sorted(json.loads(e["payload"])["n"] for e in lines) == list(range(2500))
    assert set(lines[0]) >= {"segment", "offset", "published_at", "payload_b64"}

    # up to a cut (not included), filtered as a search is, as CSV
    tail = stream_log(stream).tail_cut()
    to = {seg: offset // 2 for seg, offset in tail.items()}
    answer = api.get(EVENTS + "export/", {"to": json.dumps(to), "format": "csv", "json": "$.n>=100", "header": "t:x"})
    assert answer["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(b"".join(answer.streaming_content).decode().splitlines()))
    assert rows[0] == [
        "segment",
        "offset",
        "published_at",
        "deliver_at",
        "routing_key",
        "key",
        "headers",
        "payload",
        "payload_b64",
        "payload_url",  # a large event's (docs/api.md, "Large events"); empty for these
    ]
    body = rows[1:]
    assert all(r[9] == "" for r in body)
    assert body and all(int(r[1]) < to[r[0]] for r in body)
    assert all(json.loads(r[7])["n"] >= 100 and json.loads(r[7])["n"] % 2 == 1 and r[6] == '{"t":"x"}' for r in body)
    # as many as the JSON lines hold below the cut that match
    wanted = [
        e for e in lines if e["offset"] < to[e["segment"]] and json.loads(e["payload"])["n"] >= 100 and e.get("headers")
    ]
    assert len(body) == len(wanted)


@pytest.mark.parametrize(
    ("params", "field"), [({"format": "xml"}, "format"), ({"from": "{bad"}, "from"), ({"json": "n>1"}, "json")]
)
def test_a_bad_export_is_refused_naming_its_field(api, stream, params, field):
    answer = api.get(EVENTS + "export/", params)
    assert answer.status_code == 400 and answer.json()["field"] == field

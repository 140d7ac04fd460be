"""Large events over REST (docs/api.md, "Large events"): `POST …/events/raw/` takes one event's
payload as the body; reads carry `payload_url` and `payload_size` in its place; `GET` on the URL
gives the bytes, whole or by `Range`; bad input is refused naming the field, nothing written."""

import random
import struct

import factories
import pytest

from cbr_client import READ_BATCH, decode_read_batch
from store.framing import FLAG_LARGE
from streams.logs import stream_log

pytestmark = pytest.mark.django_db

RAW = "/api/v1/streams/shop/orders/events/raw/"
EVENTS = "/api/v1/streams/shop/orders/events/"
OCTETS = "application/octet-stream"


@pytest.fixture
def stream(api):
    return factories.create_stream_over_api(api)


def _big(n: int = 300_000, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(n)


def _publish_raw(api, body: bytes, query: str = ""):
    return api.generic("POST", RAW + (f"?{query}" if query else ""), body, content_type=OCTETS)


def _held(stream) -> int:
    return sum(stream_log(stream).tail_cut().values())


def test_a_large_event_is_published_read_as_a_url_and_served_whole(api, stream):
    factories.publish_over_api(api, [{"payload": "small"}])
    body = _big()
    answer = _publish_raw(api, body, "routing_key=r1&key=k1")
    assert answer.status_code == 201, answer.content
    (position,) = answer.json()["positions"]
    url = f"/api/v1/streams/shop/orders/events/{position['segment']}/{position['offset']}/payload/"
    assert position["offset"] == 1 and position["payload_url"] == url

    small, large = api.get(EVENTS).json()["events"]
    assert small["payload"] == "small"
    assert large["payload_url"] == url and large["payload_size"] == len(body)
    assert "payload" not in large and "payload_b64" not in large
    assert (large["routing_key"], large["key"]) == ("r1", "k1")

    got = api.get(url)
    assert got.status_code == 200 and got["Content-Type"] == OCTETS and got["Accept-Ranges"] == "bytes"
    assert int(got["Content-Length"]) == len(body)
    assert b"".join(got.streaming_content) == body
    plain = api.get(f"/api/v1/streams/shop/orders/events/{position['segment']}/0/payload/")
    assert plain.content == b"small"  # any event's payload is served at its URL


@pytest.mark.parametrize(
    ("header", "first", "last"),
    [
        ("bytes=0-99", 0, 99),
        ("bytes=1000-", 1000, 299_999),
        ("bytes=-10", 299_990, 299_999),
        ("bytes=5-10000000", 5, 299_999),
    ],
)
def test_a_range_of_the_payload(api, stream, header, first, last):
    body = _big()
    url = _publish_raw(api, body).json()["positions"][0]["payload_url"]
    got = api.get(url, HTTP_RANGE=header)
    assert got.status_code == 206
    assert got["Content-Range"] == f"bytes {first}-{last}/{len(body)}"
    assert b"".join(got.streaming_content) == body[first : last + 1]


def test_a_range_past_the_end_is_416_with_the_size_and_several_ranges_get_it_all(api, stream):
    body = _big(1000)
    url = _publish_raw(api, body).json()["positions"][0]["payload_url"]
    refused = api.get(url, HTTP_RANGE="bytes=1000-")
    assert refused.status_code == 416 and refused["Content-Range"] == "bytes */1000"
    assert refused.json()["field"] == "Range"
    whole = api.get(url, HTTP_RANGE="bytes=0-1,5-6")
    assert whole.status_code == 200 and b"".join(whole.streaming_content) == body


def test_a_reader_group_delivers_it_with_its_url_in_json_and_in_binary(api, stream):
    factories.create_group_over_api(api, retention_type="NONE")
    body = _big(5000)
    url = _publish_raw(api, body, "key=k").json()["positions"][0]["payload_url"]
    factories.publish_over_api(api, [{"payload": "after"}])
    read = "/api/v1/reader-groups/shop/billing/read/"
    (large, after) = api.post(read, {"max_events": 10}, format="json").json()["deliveries"]
    assert large["payload_url"] == url and large["payload_size"] == 5000 and "payload_b64" not in large
    assert after["payload"] == "after"

    factories.create_group_over_api(api, "audit", retention_type="NONE")
    raw = api.post("/api/v1/reader-groups/shop/audit/read/", {"max_events": 10}, format="json", HTTP_ACCEPT=READ_BATCH)
    assert raw["Content-Type"] == READ_BATCH
    decoded = decode_read_batch(raw.content)["deliveries"]
    assert decoded[0]["payload_url"] == url and decoded[0]["payload_size"] == 5000
    assert "payload_b64" not in decoded[0] and decoded[1]["payload"] == "after"
    body_len, _crc, flags = struct.unpack_from("<IIB", raw.content, 9 + struct.unpack_from("<I", raw.content, 5)[0])
    assert flags & FLAG_LARGE  # the record flagged, its size in place of its payload
    assert body_len == struct.calcsize("<BQqqQHHII") + len("k") + 8


def test_a_delayed_large_event_waits_for_its_time(api, stream):
    factories.create_group_over_api(api, retention_type="NONE")
    assert _publish_raw(api, _big(2000), "delay_ms=600000").status_code == 201
    read = api.post("/api/v1/reader-groups/shop/billing/read/", {"max_events": 10}, format="json").json()
    assert read["deliveries"] == []


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("color=red", "color"),
        ("ttl_s=-1", "ttl_s"),
        ("ttl_s=soon", "ttl_s"),
        ("delay_ms=-5", "delay_ms"),
        ("deliver_at=yesterday", "deliver_at"),
        ("key=a&key=b", "key"),
        ("delay_ms=5&deliver_at=2030-01-01T00:00:00Z", "deliver_at"),
    ],
)
def test_a_bad_query_is_refused_naming_its_field_and_nothing_is_written(api, stream, query, field):
    answer = _publish_raw(api, b"x" * 100, query)
    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == field
    assert _held(stream) == 0


def test_a_body_that_is_not_octets_or_too_large_is_refused_and_nothing_is_written(api, stream, settings):
    as_json = api.post(RAW, {"payload": "x"}, format="json")
    assert as_json.status_code == 415 and as_json.json()["field"] == "Content-Type"
    settings.CBR_MAX_LARGE_EVENT_BYTES = 1000
    too_large = _publish_raw(api, b"y" * 1001)
    assert too_large.status_code == 413
    assert too_large.json()["field"] == "body" and too_large.json()["code"] == "event_too_large"
    assert _publish_raw(api, b"y" * 1000).status_code == 201
    assert _held(stream) == 1


def test_a_compacted_stream_wants_its_key(api):
    factories.create_stream_over_api(api, cleanup_policy="compact")
    refused = _publish_raw(api, b"z" * 10)
    assert refused.status_code == 400 and refused.json()["field"] == "key"
    assert _publish_raw(api, b"z" * 10, "key=k").status_code == 201


def test_no_event_there_is_404(api, stream):
    assert api.get("/api/v1/streams/shop/orders/events/0/5/payload/").status_code == 404
    assert api.get("/api/v1/streams/shop/orders/events/9/0/payload/").status_code == 404
    assert api.get("/api/v1/streams/shop/nope/events/0/0/payload/").status_code == 404


def test_a_large_event_is_dead_lettered_and_republished_whole(api, stream):
    factories.create_group_over_api(api, retention_type="NONE", max_deliveries=1, on_poison="dead_letter")
    body = _big(2 * 1024 * 1024 + 3)
    _publish_raw(api, body, "key=k&routing_key=rk")
    factories.publish_over_api(api, [{"payload": "small", "key": "s"}])
    group = "/api/v1/reader-groups/shop/billing/"
    got = api.post(group + "read/", {"max_events": 10}, format="json").json()["deliveries"]
    api.post(group + "nack/", {"delivery_ids": [d["delivery_id"] for d in got], "reason": "bad"}, format="json")
    assert api.post(group + "read/", {"max_events": 10}, format="json").json()["deliveries"] == []

    large, small = api.get("/api/v1/streams/shop/orders-dlq/events/").json()["events"]
    assert large["payload_size"] == len(body) and large["key"] == "k" and large["headers"]["cbr-dlq-offset"] == "0"
    assert b"".join(api.get(large["payload_url"]).streaming_content) == body
    assert small["payload"] == "small"

    assert api.post("/api/v1/streams/shop/orders-dlq/republish/", {"all": True}, format="json").json() == {
        "republished": 2,
        "skipped": 0,
    }
    events = api.get(EVENTS).json()["events"]
    again = events[2]
    assert (again["offset"], again["payload_size"], again["routing_key"]) == (2, len(body), "rk")
    assert b"".join(api.get(again["payload_url"]).streaming_content) == body
    assert events[3]["payload"] == "small"

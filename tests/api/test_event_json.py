"""An event as every answer carries it (docs/api.md), built from a stored record: the exact
fields, values and their order, for text and binary payloads, keys, headers and delivery times."""

import orjson

from domain.acks import Delivery
from groups.consuming.answers import ReadPart, _deliveries_json
from store.framing import Record
from store.store import StreamRecord
from streams.wire import event_json, record_json


def test_a_record_with_every_field_becomes_the_contract_event():
    rec = Record(
        7, 1_700_000_000_123, 1_800_000_000_000, 10, b"user-7", b"k\xc3\xa9", {"h": "v"}, "héllo".encode(), True
    )
    assert list(record_json("3", rec).items()) == [
        ("segment", "3"),
        ("offset", 7),
        ("routing_key", "user-7"),
        ("key", "ké"),
        ("headers", {"h": "v"}),
        ("published_at", "2023-11-14T22:13:20.123Z"),
        ("deliver_at", "2027-01-15T08:00:00.000Z"),
        ("payload_b64", "aMOpbGxv"),
        ("payload", "héllo"),
    ]
    assert event_json(StreamRecord("3", rec), "s/n") == record_json("3", rec, "s/n")


def test_a_binary_payload_has_no_text_and_absent_fields_are_null():
    rec = Record(0, 1_700_000_000_000, None, 0, None, None, None, b"\xff\x00bin", False)
    assert record_json("0", rec) == {
        "segment": "0",
        "offset": 0,
        "routing_key": None,
        "key": None,
        "headers": None,
        "published_at": "2023-11-14T22:13:20.000Z",
        "deliver_at": None,
        "payload_b64": "/wBiaW4=",
    }
    empty = Record(1, 1_700_000_000_000, None, 0, b"", b"", None, b"", False)
    assert record_json("0", empty)["payload_b64"] == "" and record_json("0", empty)["payload"] == ""
    assert record_json("0", empty)["routing_key"] == "" and record_json("0", empty)["key"] == ""


def test_a_reads_deliveries_are_record_json_plus_the_delivery_fields_byte_for_byte():
    """A read's deliveries as dicts (groups.consuming.answers._deliveries_json): the same JSON,
    bytes and key order, as `record_json` followed by the delivery's four fields, for text and
    binary payloads, shared and distinct publish times, keys, headers, delays. (The answer's own
    JSON is written without them: tests/api/test_read_json.py.)"""
    records = [
        Record(
            7, 1_700_000_000_123, 1_800_000_000_000, 10, b"user-7", b"k\xc3\xa9", {"h": "v"}, "héllo".encode(), True
        ),
        Record(8, 1_700_000_000_123, None, 11, None, None, None, b"\xff\x00bin", False),
        Record(9, 1_700_000_000_124, None, 12, b"", b"", None, b"", False),
        Record(10, 1_700_000_000_123, None, 13, None, b"k", {"a": [1, 2]}, b'{"x": 1}', False),
    ]
    deliveries = [Delivery(7, 1), Delivery(8, 3), Delivery(9, 1), Delivery(10, 2)]
    part = ReadPart.of("sc/st", "2", "4-5-2", zip(records, deliveries, strict=True))
    expires = "2026-11-23T07:00:00.500Z"
    got = _deliveries_json(part, expires)
    expected = []
    for rec, d in zip(records, deliveries, strict=True):
        event = record_json("2", rec)
        event.update(
            {
                "stream": "sc/st",
                "delivery_id": f"4-5-2-{d.offset}-{d.epoch}",
                "delivery_count": d.epoch,
                "lease_expires_at": expires,
            }
        )
        expected.append(event)
    assert orjson.dumps(got) == orjson.dumps(expected)
    assert [list(e) for e in got] == [list(e) for e in expected]
    assert "payload" not in got[1] and got[2]["payload"] == ""

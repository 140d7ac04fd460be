"""An event as every answer carries it (DESIGN.md §10), built from a stored record: the exact
fields, values and their order, for text and binary payloads, keys, headers and delivery times."""

from streams.api.serializers import event_json, record_json
from streams.storage.framing import Record
from streams.storage.store import StreamRecord


def test_a_record_with_every_field_becomes_the_contract_event():
    rec = Record(7, 1_700_000_000_123, 1_800_000_000_000, 10, b"user-7", b"k\xc3\xa9", {"h": "v"}, "héllo".encode(), True)
    assert list(record_json("3", rec).items()) == [
        ("segment", "3"), ("offset", 7), ("routing_key", "user-7"), ("key", "ké"), ("headers", {"h": "v"}),
        ("published_at", "2023-11-14T22:13:20.123000Z"), ("deliver_at", "2027-01-15T08:00:00Z"),
        ("payload_b64", "aMOpbGxv"), ("payload", "héllo"),
    ]
    assert event_json(StreamRecord("3", rec)) == record_json("3", rec)


def test_a_binary_payload_has_no_text_and_absent_fields_are_null():
    rec = Record(0, 1_700_000_000_000, None, 0, None, None, None, b"\xff\x00bin", False)
    assert record_json("0", rec) == {
        "segment": "0", "offset": 0, "routing_key": None, "key": None, "headers": None,
        "published_at": "2023-11-14T22:13:20Z", "deliver_at": None, "payload_b64": "/wBiaW4=",
    }
    empty = Record(1, 1_700_000_000_000, None, 0, b"", b"", None, b"", False)
    assert record_json("0", empty)["payload_b64"] == "" and record_json("0", empty)["payload"] == ""
    assert record_json("0", empty)["routing_key"] == "" and record_json("0", empty)["key"] == ""

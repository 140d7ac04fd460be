"""A read's answer in binary (`Accept: application/vnd.cbr.read-batch`), decoded by the client to
exactly the object its JSON gives: every event field (binary payloads, headers, keys, delayed
events, redeliveries, a fan-out group's sinks_pending) and the answer's own fields. JSON stays the
default, and errors stay JSON."""

import base64

import factories
import orjson
import pytest

from cbr_client import READ_BATCH, decode_read_batch
from domain.acks import Delivery
from domain.events import EventIn
from groups.consuming.answers import ReadPart, ReadResult
from store import framing
from store.framing import Record
from streams import services
from streams.wire import encode_read_batch

pytestmark = pytest.mark.django_db

G = "/api/v1/reader-groups/shop/"


def json_answer(result: ReadResult, head: dict) -> dict:
    return {"deliveries": result.deliveries, **head}


def test_every_field_of_every_event_round_trips_byte_for_byte():
    # given a read's parts on two segments: text and binary payloads, an empty one, keys, headers,
    # delivery times, shared and distinct publish times, redeliveries, and a fan-out's sinks
    first = [
        Record(7, 1_700_000_000_123, 1_800_000_000_000, 10, b"user-7", "ké".encode(), {"h": "v"}, "héllo".encode(), 1),
        Record(8, 1_700_000_000_123, None, 11, None, None, None, b"\xff\x00bin", False),
        Record(9, 1_700_000_000_124, None, 12, b"", b"", None, b"", False),
        Record(10, 1_700_000_000_123, 1_600_000_000_001, 13, None, b"k", {"a": [1, {"b": None}]}, b'{"x": 1}', 0),
    ]
    # (no empty headers: the store keeps `{}` as none, and so does a compacted view)
    second = [Record(0, 1_700_000_000_999, None, 0, None, None, None, b"\x00" * 300, True)]
    # the first part as a read from the log has it, left as stored; the second as a compacted view
    # gives it, a record
    frames, _ = framing.read_frames(b"".join(map(framing.frame_record, first)))
    parts = [
        ReadPart.of("sc/st", "2", "4-5-2", zip(frames, map(Delivery._make, [(7, 1), (8, 3), (9, 1), (10, 2)]))),
        ReadPart.of("sc/other", "0", "4-6-0", [(second[0], Delivery(0, 1))]),
    ]
    result = ReadResult(parts, missed=3, missed_by_stream={"sc/st": 3}, lease_expires_at="2026-11-23T07:00:00.500Z")
    head = {
        "missed": 3,
        "missed_by_stream": {"sc/st": 3},
        "pending_limit_reached": False,
        "delivery_ranges": ["4-5-2-7..7-1", "4-5-2-8..8-3"],
        "ack": {"acked": 2, "waiting_for_sinks": 0, "given_back": 0, "refused": [{"field": "ack.delivery_ids[0]"}]},
    }

    # when it is encoded in binary and decoded by the client
    decoded = decode_read_batch(encode_read_batch(head, parts, result.lease_expires_at))

    # then it is the JSON answer, bytes and key order included
    assert orjson.dumps(decoded) == orjson.dumps(json_answer(result, head))
    assert "payload" not in decoded["deliveries"][1] and decoded["deliveries"][2]["payload"] == ""

    # and with sinks, each event's sinks_pending comes last, as in the JSON
    parts[0].sinks_pending = [["search"], [], ["archive", "search"], ["archive"]]
    parts[1].sinks_pending = [["archive", "search"]]
    fan_out = ReadResult(parts, lease_expires_at=None)
    plain = {"missed": 0, "missed_by_stream": {}, "pending_limit_reached": True}
    decoded = decode_read_batch(encode_read_batch(plain, parts, None))
    assert orjson.dumps(decoded) == orjson.dumps(json_answer(fan_out, plain))


def test_an_empty_read_round_trips():
    head = {"missed": 0, "missed_by_stream": {}, "pending_limit_reached": True}
    assert decode_read_batch(encode_read_batch(head, [], None)) == {"deliveries": [], **head}


@pytest.mark.parametrize("cut", [1, 9, 20, 10, 40, 2, 0])  # bytes off the end (0: one byte more)
def test_a_batch_cut_short_or_with_bytes_after_it_is_refused(cut):
    recs = [Record(o, 1_700_000_000_000, None, 0, b"rk", None, None, b"payload", True) for o in (0, 1)]
    raw = encode_read_batch(
        {"missed": 0}, [ReadPart.of("s/t", "0", "1-2-0", [(r, Delivery(r.offset, 1)) for r in recs])], None
    )
    with pytest.raises(ValueError):
        decode_read_batch(raw[:-cut] if cut else raw + b"x")


def test_an_event_that_fails_its_crc_or_does_not_hold_together_is_refused():
    # given a batch of two events sent as stored
    recs = [Record(o, 1_700_000_000_000, None, 0, b"rk", None, None, b"payload", True) for o in (0, 1)]
    frames, _ = framing.read_frames(b"".join(map(framing.frame_record, recs)))
    raw = encode_read_batch({}, [ReadPart.of("s/t", "0", "1-2-0", [(f, Delivery(f.offset, 1)) for f in frames])], None)
    assert [d["payload"] for d in decode_read_batch(raw)["deliveries"]] == ["payload", "payload"]
    # when a payload byte flips on the way, or an event's routing key claims more than its body holds
    flipped = raw[:-1] + b"X"
    rk_len_at = raw.index(b"rk") - 12  # its u16, before the key length (u16), headers and payload lengths (u32)
    overlong = raw[:rk_len_at] + (200).to_bytes(2, "little") + raw[rk_len_at + 2 :]
    # then the client refuses the batch
    with pytest.raises(ValueError, match="CRC"):
        decode_read_batch(flipped)
    with pytest.raises(ValueError, match="malformed"):
        decode_read_batch(overlong)


@pytest.fixture
def stream(clock):
    """Events of every shape on two segments: text, binary, headers, keys, one delayed."""
    stream = factories.make_stream(segment_count=2)
    at = int(clock.now * 1000)
    for seg in "01":
        rk = factories.routing_key_for(stream, seg)
        services.do_publish(
            stream,
            [
                EventIn(f"{seg}:text".encode(), routing_key=rk),
                EventIn(b"\xff\xfe" + seg.encode(), routing_key=rk, headers={"trace": seg, "n": "2"}),
                EventIn(b"", routing_key=rk, key=b"k-" + seg.encode()),
                EventIn(b"later", routing_key=rk, deliver_at_ms=at + 30_000),
            ],
        )
    return stream


def twin_groups(api, **body):
    for name in ("as-json", "as-batch"):
        factories.create_group_over_api(api, name=name, **{"retention_type": "NONE", **body})


def read_both(api, ack: dict | None = None, **body) -> tuple[dict, dict, dict]:
    """The same read of the two twin groups, one answered in JSON, the other in binary: the JSON
    answer, the binary one, and the binary one with its delivery ids spelled as the JSON group's
    (their subscriptions differ). `ack`: the ids each group carries, by group."""
    answers = {}
    for group, accept in (("as-json", "application/json"), ("as-batch", READ_BATCH)):
        own = body if ack is None else {**body, "ack": {"delivery_ids": ack[group]}}
        answer = api.post(G + f"{group}/read/", own, format="json", HTTP_ACCEPT=accept)
        assert answer.status_code == 200 and answer["Content-Type"] == accept
        answers[group] = answer.json() if accept == "application/json" else decode_read_batch(answer.content)
    as_json, as_batch = answers["as-json"], answers["as-batch"]
    raw = orjson.dumps(as_batch).decode()
    ours = {d["segment"]: d["delivery_id"].rsplit("-", 2)[0] for d in as_json["deliveries"]}
    for d in as_batch["deliveries"]:
        raw = raw.replace(f'"{d["delivery_id"].rsplit("-", 2)[0]}-', f'"{ours[d["segment"]]}-')
    return as_json, as_batch, orjson.loads(raw)


def in_order(answer: dict) -> bytes:
    """The answer as JSON bytes, with its segments in one order (a read serves its segments in a
    random order, so two groups' reads differ in that alone)."""
    answer = dict(answer)
    answer["deliveries"] = sorted(answer["deliveries"], key=lambda d: (d["segment"], d["offset"]))
    if "delivery_ranges" in answer:
        answer["delivery_ranges"] = sorted(answer["delivery_ranges"])
    return orjson.dumps(answer)


def test_a_read_asked_for_in_binary_decodes_to_its_json_answer(api, stream, clock):
    # given two groups in the same state (sinks, leases of 10 s, ranges asked for)
    twin_groups(api, sinks=["archive", "search"], ack_timeout_s=10)

    # when each reads the same, one in JSON, the other in binary
    as_json, as_batch, spelled = read_both(api, max_events=20, ranges=True)

    # then the answers are the same object, field for field and in the same key order
    assert in_order(as_json) == in_order(spelled)
    assert len(as_json["deliveries"]) == 6  # the delayed events are not due yet
    payloads = {d["payload_b64"] for d in as_json["deliveries"]}
    assert base64.b64encode(b"\xff\xfe0").decode() in payloads and "" in payloads
    assert {d["key"] for d in as_json["deliveries"]} == {None, "k-0", "k-1"}

    # and after one sink acknowledged two of each, the leases expired and the delayed events
    # came due, the redeliveries (for the sinks still pending) and the delayed events too
    for group, answer in (("as-json", as_json), ("as-batch", as_batch)):
        first_two = sorted(answer["deliveries"], key=lambda d: (d["segment"], d["offset"]))[:2]
        ids = [d["delivery_id"] for d in first_two]
        acked = api.post(G + f"{group}/ack/", {"delivery_ids": ids, "sink": "archive"}, format="json").json()
        assert acked["waiting_for_sinks"] == 2
    clock.now += 60
    again_json, _, again_spelled = read_both(api, max_events=20)
    assert in_order(again_json) == in_order(again_spelled)
    counts = sorted(d["delivery_count"] for d in again_json["deliveries"])
    assert counts == [1, 1, 2, 2, 2, 2, 2, 2]
    assert {d["payload"] for d in again_json["deliveries"] if d["delivery_count"] == 1} == {"later"}
    assert (
        sorted(map(tuple, (d["sinks_pending"] for d in again_json["deliveries"])))
        == [("archive", "search")] * 6 + [("search",)] * 2
    )


def test_a_read_carrying_an_ack_answers_its_ack_in_binary_too(api, stream, clock):
    # given two groups that each read a batch, asking for its ranges
    twin_groups(api)
    first_json, first_batch, _ = read_both(api, max_events=4, ranges=True)  # two of each segment

    # when each carries its own batch's ack on its next read
    own = {"as-json": first_json["delivery_ranges"], "as-batch": first_batch["delivery_ranges"]}
    as_json, _, spelled = read_both(api, ack=own, max_events=2, ranges=True)

    # then both answers, ack and ranges included, are the same
    assert as_json["ack"] == {"acked": 4, "waiting_for_sinks": 0, "given_back": 0, "refused": []}
    assert in_order(as_json) == in_order(spelled)
    assert len(as_json["deliveries"]) == 2 and as_json["delivery_ranges"]


def test_errors_stay_json_whatever_the_client_accepts(api, stream, clock):
    twin_groups(api)
    for body, field in (
        ({"max_events": "many"}, "max_events"),
        ({"max_events": 1, "ack": {"delivery_ids": ["x"]}}, "ack.delivery_ids[0]"),
    ):
        answer = api.post(G + "as-batch/read/", body, format="json", HTTP_ACCEPT=READ_BATCH)
        assert answer.status_code == 400 and answer["Content-Type"] == "application/json"
        assert answer.json()["field"] == field
    missing = api.post(G + "nobody/read/", {"max_events": 1}, format="json", HTTP_ACCEPT=READ_BATCH)
    assert missing.status_code == 404 and missing["Content-Type"] == "application/json"


@pytest.mark.parametrize("how", [{"HTTP_ACCEPT": READ_BATCH}, {"QUERY_STRING": "format=cbr-batch"}])
def test_options_of_the_read_answer_in_json_whatever_the_client_accepts(api, stream, clock, how):
    twin_groups(api)
    answer = api.options(G + "as-batch/read/", **how)
    assert answer.status_code == 200 and answer["Content-Type"] == "application/json"
    assert answer.json()["name"]


def test_other_endpoints_do_not_offer_the_binary_form(api, stream, clock):
    twin_groups(api)
    answer = api.post(G + "as-batch/ack/", {"delivery_ids": ["1-1-0-0-1"]}, format="json", HTTP_ACCEPT=READ_BATCH)
    assert answer.status_code == 406 and answer["Content-Type"] == "application/json"


@pytest.mark.parametrize("value", ["", "xml"])
def test_a_format_the_read_does_not_have_is_refused_naming_it(api, value):
    factories.make_stream()
    factories.create_group_over_api(api, retention_type="NONE")
    answer = api.post(f"/api/v1/reader-groups/shop/billing/read/?format={value}", {"max_events": 1}, format="json")
    assert answer.status_code == 400 and answer.json()["field"] == "format", answer.content
    good = api.post("/api/v1/reader-groups/shop/billing/read/?format=json", {"max_events": 1}, format="json")
    assert good.status_code == 200 and good.json()["deliveries"] == []

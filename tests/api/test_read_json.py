"""A read's JSON answer is written by `streams.wire.deliveries_json` without a dict per event: the
same bytes, key order included, as orjson writes the deliveries as dicts (`ReadResult.deliveries`,
each `record_json` plus the delivery's fields), whatever the events hold: text that must be
escaped or needs none, binary payloads, keys, headers, delivery times, redeliveries, a fan-out
group's sinks, records read as frames or from a compacted view."""

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.acks import Delivery
from groups.consuming.answers import ReadPart, ReadResult
from store import framing
from store.framing import Record
from streams.wire import deliveries_json

EXPIRES = "2026-11-23T07:00:00.500Z"


def as_dicts(parts: list[ReadPart], expires: str | None) -> bytes:
    return orjson.dumps(ReadResult(parts, lease_expires_at=expires).deliveries)


def test_every_kind_of_event_is_written_as_its_dict_is():
    # given events with every field, text needing escapes, binary and empty payloads, shared and
    # distinct times, redeliveries, and names with quotes and per cents
    first = [
        Record(7, 1_700_000_000_123, 1_800_000_000_000, 10, b"user-7", "ké".encode(), {"h": "v"}, "héllo".encode(), 1),
        Record(8, 1_700_000_000_123, None, 11, None, None, None, b"\xff\x00bin", False),
        Record(9, 1_700_000_000_124, None, 12, b"", b'"%s', None, b"", False),
        Record(
            10, 1_700_000_000_123, 1_600_000_000_001, 13, None, b"k", {"a": [1, {"b": None}]}, b'{"x": "%d\\n"}\x01', 0
        ),
    ]
    frames, _ = framing.read_frames(b"".join(map(framing.frame_record, first)))
    second = [Record(0, 1_700_000_000_999, None, 0, None, None, None, "tab\there, \u2028 and 😀".encode(), True)]
    parts = [
        ReadPart.of('sc/st"%', "2", "4.9-5-2%d", zip(frames, map(Delivery._make, [(7, 1), (8, 3), (9, 1), (10, 2)]))),
        ReadPart.of("sc/other", "0", "4-6-0", [(second[0], Delivery(0, 1))]),  # a compacted view's record
    ]

    # then the JSON is the dicts' JSON, with a lease or without one (an ack_policy none group)
    assert deliveries_json(parts, EXPIRES) == as_dicts(parts, EXPIRES)
    assert deliveries_json(parts, None) == as_dicts(parts, None)
    assert "payload" not in orjson.loads(deliveries_json(parts, None))[1]

    # and with a fan-out group's sinks, each event's last
    parts[0].sinks_pending = [["search"], [], ["archive", "search"], ["archive"]]
    parts[1].sinks_pending = [["archive", "search"]]
    assert deliveries_json(parts, EXPIRES) == as_dicts(parts, EXPIRES)


def test_a_read_of_nothing_is_an_empty_list():
    assert deliveries_json([], EXPIRES) == b"[]"
    assert deliveries_json([ReadPart("sc/st", "0", "4-5-0")], EXPIRES) == b"[]"


texts = st.one_of(st.none(), st.text(max_size=8).map(str.encode))
records = st.builds(
    Record,
    st.just(0),  # the offset: given in order below
    st.sampled_from([1_700_000_000_000, 1_700_000_000_001, 253_402_300_799_999]),
    st.one_of(st.none(), st.integers(0, 253_402_300_799_999)),
    st.just(0),
    texts,
    texts,
    st.one_of(
        st.none(),
        st.dictionaries(
            st.text(max_size=4), st.one_of(st.text(max_size=4), st.integers(-(2**63), 2**63 - 1)), min_size=1
        ),
    ),
    st.one_of(st.binary(max_size=12), st.text(max_size=12).map(str.encode)),
    st.just(False),
    st.one_of(st.none(), st.none(), st.integers(0, 2**40)),  # a large event's size (its payload by URL)
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.lists(records, min_size=1, max_size=6), st.lists(st.integers(1, 3), min_size=6, max_size=6))),
    st.booleans(),
)
def test_any_read_is_written_as_its_dicts_are(segments, with_sinks):
    parts = []
    for i, (recs, epochs) in enumerate(segments):
        recs = [rec._replace(offset=offset) for offset, rec in enumerate(recs, start=40)]
        part = ReadPart.of(
            f"sc/s{i}", str(i), f"4-{i}-{i}", zip(recs, [Delivery(r.offset, e) for r, e in zip(recs, epochs)])
        )
        if with_sinks:
            part.sinks_pending = [["sink"] * (e - 1) for e in epochs[: len(recs)]]
        parts.append(part)
    assert deliveries_json(parts, EXPIRES) == as_dicts(parts, EXPIRES)


def test_reads_woken_together_share_a_parts_writing_and_each_keeps_its_own_ids():
    # given three groups' reads one publish woke: the same records (the same objects, as the pass
    # reads them once), two with first deliveries, one a redelivery; and a part of other records
    recs = [
        Record(5, 1_700_000_000_123, None, 0, None, b"k", {"h": "%s"}, b"%d\x00 no text \xff", False),
        Record(6, 1_700_000_000_123, None, 1, None, None, None, b'plain "quoted" %s', False),
    ]
    other = [Record(5, 1_700_000_000_124, None, 0, None, None, None, b"other", False)]

    def part(prefix, records, epoch):
        return ReadPart.of("sc/st", "0", prefix, [(r, Delivery(r.offset, epoch)) for r in records])

    reads = [
        [part("4-5-0", recs, 1)],
        [part("7.3-5-0", recs, 1)],
        [part("9-5-0", recs, 2)],
        [part("11-5-0", other, 1), part("11-5-1", recs, 1)],
    ]

    # when they are written with one shared dict
    shared: dict = {}
    written = [deliveries_json(parts, EXPIRES, shared) for parts in reads]

    # then each is byte for byte its dicts' JSON (its own ids, counts and records), and the parts
    # that could be shared were written once: the first deliveries of `recs` for three reads, the
    # redelivery and the other records apart
    assert written == [as_dicts(parts, EXPIRES) for parts in reads]
    assert len(shared) == 3
    assert orjson.loads(written[1])[0]["delivery_id"] == "7.3-5-0-5-1"

    # and a fan-out group's part (its sinks differ per read) is written on its own
    sinks = part("4-5-0", recs, 2)
    sinks.sinks_pending = [["archive"], []]
    assert deliveries_json([sinks], EXPIRES, shared) == as_dicts([sinks], EXPIRES)
    assert len(shared) == 3

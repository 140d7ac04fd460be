"""What every answer carries, in the form it carries it (docs/api.md): an event's JSON, times as
ISO 8601 with milliseconds and `Z`, and delivery ids as `domain.delivery_ids` writes them. One
home, used by the REST API, the read path of reader groups and the compacted view, so that one
event reads the same everywhere. Plain Python: it never does I/O. Clients treat a delivery id as
opaque."""

from __future__ import annotations

import functools
import struct
from binascii import b2a_base64
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from itertools import chain, repeat
from typing import Protocol, cast, overload

import orjson

from domain import delivery_ids
from store.framing import Frame, Record, frame_record
from store.store import StreamRecord

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


@overload
def ms_to_iso(ms: int) -> str: ...
@overload
def ms_to_iso(ms: None) -> None: ...
def ms_to_iso(ms: int | None) -> str | None:
    """Milliseconds since the epoch as `2026-11-25T08:00:00.123Z` (always the milliseconds)."""
    return None if ms is None else _iso(ms)


@functools.lru_cache(maxsize=4096)  # events of one batch share their publication time
def _iso(ms: int) -> str:
    # whole seconds, then the milliseconds exactly: `ms / 1000` as a float was a microsecond or
    # more off for times after ~2110 (…59.998993Z for …59.999Z)
    seconds, millis = divmod(ms, 1000)
    stamp = datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=millis * 1000)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def seconds_to_iso(ts: float) -> str:
    """A clock reading in seconds (a lease's expiry) in the same form, to the millisecond."""
    return _iso(int(ts * 1000))


def datetime_to_ms(value: datetime) -> int:
    """A datetime read from Parquet as milliseconds since the epoch, exactly; one without a time
    zone is UTC (Spark writes times so)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - EPOCH) // _MS


def payload_url(stream: str, segment: str, offset: int) -> str:
    """Where an event's payload is served as bytes (`GET`, with `Range`): a large event's
    answers carry it instead of the payload. `stream` is `scope/name`."""
    return f"/api/v1/streams/{stream}/events/{segment}/{offset}/payload/"


def record_json(segment: str, rec: Record, stream: str = "") -> dict:
    """An event of `segment` as every answer carries it: a read answers thousands, so the
    record is unpacked once rather than read field by field. `payload` only when the bytes are
    UTF-8; `payload_b64` always; a large event (of `stream`, `scope/name`) instead has
    `payload_url` and `payload_size`."""
    offset, published_ms, deliver_at_ms, _, routing_key, key, headers, payload, _, large_size = rec
    out = {
        "segment": segment,
        "offset": offset,
        "routing_key": None if routing_key is None else routing_key.decode(),
        "key": None if key is None else key.decode(),
        "headers": headers,
        "published_at": ms_to_iso(published_ms),
        "deliver_at": None if deliver_at_ms is None else ms_to_iso(deliver_at_ms),
    }
    if large_size is not None:
        out["payload_url"] = payload_url(stream, segment, offset)
        out["payload_size"] = large_size
        return out
    out["payload_b64"] = b2a_base64(payload, newline=False).decode()
    try:
        out["payload"] = payload.decode()
    except UnicodeDecodeError:
        pass
    return out


def event_json(sr: StreamRecord, stream: str) -> dict:
    """An event of the stream `stream` (`scope/name`) as every answer carries it."""
    return record_json(sr.segment, sr.record, stream)


# A read's answer in binary, for clients that ask for it by `Accept` (JSON stays the default and
# the contract; docs/consuming.md describes this format for client writers). Everything is
# little-endian:
#
#     b"CBRB" | u8 version (2) | u32 head_len | head | events
#
# `head` is JSON: the JSON answer's fields but `deliveries` (missed, missed_by_stream,
# pending_limit_reached, and delivery_ranges and ack when the answer has them), plus
# `lease_expires_at` (every delivery's) and `parts`: per segment, in order, its `stream`,
# `segment`, `id_prefix` (a delivery id is `<id_prefix>-<offset>-<delivery_count>`), `count`
# (its events, which follow in order), `delivery_counts` (its events' delivery counts in order,
# as runs: [delivery count, how many events in a row have it], …) and, for a group with sinks,
# `sinks_pending` (per event). Each event is the record as the segment store keeps it
# (store/framing.py), verified and copied, not decoded:
#
#     u32 body_len | u32 crc32c(body) | body
#     body: u8 flags | u64 offset | i64 published_ms | i64 deliver_at_ms (-1: none) | u64 cum_size
#           | u16 routing_key_len (0xFFFF: none) | u16 key_len (0xFFFF: none)
#           | u32 headers_len (0: none) | u32 payload_len | routing key | key | headers | payload
#
# the routing key and key in UTF-8, the headers a JSON object. Times go as epoch milliseconds; a
# client writes them as the JSON does (`ms_to_iso`).
READ_BATCH_MEDIA_TYPE = "application/vnd.cbr.read-batch"
READ_BATCH_MAGIC = b"CBRB\x02"


class BatchPart(Protocol):
    """One segment's part of a read (`groups.consuming.answers.ReadPart`)."""

    stream: str
    segment: str
    id_prefix: str
    items: list[Record | Frame]  # each event's record, in order
    runs: list[list[int]]  # their deliveries: [first offset, events, delivery count]
    sinks_pending: list[list[str]] | None


def encode_read_batch(head: dict, parts: list[BatchPart], lease_expires_at: str | None) -> bytes:
    """A read's answer in the binary form above: `head` holds the JSON answer's fields but its
    deliveries, which `parts` give. Events read as frames go as they are, a run of them that lay
    together in the store as one slice; a record (a compacted view's) is framed first."""
    chunks: list[bytes | memoryview] = []
    add = chunks.append
    described = []
    for part in parts:
        counts: list[list[int]] = []  # [delivery count, events in a row], in order
        for _, n, epoch in part.runs:
            if counts and counts[-1][0] == epoch:
                counts[-1][1] += n
            else:
                counts.append([epoch, n])
        view: memoryview | None = None
        data, begin, end = None, 0, 0  # the frames of the current run, not yet added
        for item in part.items:
            if type(item) is Frame:
                if item.data is data and item.start == end:  # the next frame in the store
                    end = item.stop
                    continue
                if view is not None:
                    add(view[begin:end])
                data, begin, end = item.data, item.start, item.stop
                view = memoryview(data)
            else:
                if view is not None:
                    add(view[begin:end])
                data, view = None, None
                add(frame_record(cast(Record, item)))
        if view is not None:
            add(view[begin:end])
        about: dict = {
            "stream": part.stream,
            "segment": part.segment,
            "id_prefix": part.id_prefix,
            "count": len(part.items),
            "delivery_counts": counts,
        }
        if part.sinks_pending is not None:
            about["sinks_pending"] = part.sinks_pending
        described.append(about)
    encoded_head = orjson.dumps({**head, "lease_expires_at": lease_expires_at, "parts": described})
    return b"".join((READ_BATCH_MAGIC, struct.pack("<I", len(encoded_head)), encoded_head, *chunks))


# A read's deliveries in JSON (`deliveries_json`), a segment's part at a time, as one `%` of a
# template: an event's object, as many times as the part has events. What is the same for all of
# a part's events (the segment, the stream, the lease, and often the publication time, the
# delivery count and the fields no event has) is written in the template; each field that differs
# is a column of values, JSON already. The columns are made by calls that each go over all the
# events in C (`map`, `zip`, a list's `count`, one look at all the payloads' text), so little
# Python runs per event and no dict is built: a dict per event, then orjson's reading of them, cost
# twice what this does. A payload that is text needing no escape goes as it is stored.
_dump_text = orjson.dumps  # a str as a JSON string, escaped as orjson escapes it in a document
_dump_value = functools.partial(orjson.dumps, default=str, option=orjson.OPT_NON_STR_KEYS)  # as api.rendering does
_ESCAPED = bytes(range(0x20)) + b'"\\'  # the bytes a JSON string escapes (orjson: these only)
_NULL = b"null"


class _Template:
    """An event object's template and the columns of values its `%s` and `%d` take, in order."""

    def __init__(self) -> None:
        self.fields: list[bytes] = []
        self.columns: list[Iterable] = []

    def constant(self, name: str, json: bytes) -> None:
        self.fields.append(b'"%s":%s' % (name.encode(), json.replace(b"%", b"%%")))

    def column(self, name: str, values: Iterable, spec: bytes = b"%s") -> None:
        self.fields.append(b'"%s":%s' % (name.encode(), spec))
        self.columns.append(values)

    def field(self, name: str, values: list[bytes]) -> None:
        """A field every event has: in the template when all have the same value."""
        if values.count(values[0]) == len(values):
            self.constant(name, values[0])
        else:
            self.column(name, values)

    def fragments(self, values: list[bytes]) -> None:
        """Fields that differ in name from event to event: each event's, written whole."""
        self.fields.append(b"%s")
        self.columns.append(values)

    def optional(self, values: list[bytes]) -> None:
        """A field some events have, after the one before: each event's `,"name":value` or b""."""
        self.fields[-1] += b"%s"
        self.columns.append(values)

    def objects(self, n: int) -> bytes:
        """The `n` events' objects, comma-separated."""
        template = b"{" + b",".join(self.fields) + b"}"
        return b",".join(repeat(template, n)) % tuple(chain.from_iterable(zip(*self.columns, strict=True)))


def deliveries_json(parts: Iterable[BatchPart], lease_expires_at: str | None, shared: dict | None = None) -> bytes:
    """A read's deliveries as its JSON answer carries them: byte for byte what `orjson.dumps`
    makes of `groups.consuming.answers.ReadResult.deliveries` (each event's `record_json`, then
    its delivery's fields), without a dict per event (`_Template` above). The answer takes it as
    an `orjson.Fragment`.

    `shared`: a dict the answers of one batch of reads share (the reads one publish woke): a part
    that hands out the same records as another's (the same objects, read once by the pass), with
    the same delivery counts and lease, is written once, and each read's ids put in (`_shared`).
    Its bytes are the same as without it."""
    expires = _dump_text(lease_expires_at)
    if shared is None:
        return b"[" + b",".join(_part_objects(part, expires) for part in parts if part.items) + b"]"
    return b"[" + b",".join(_shared(part, expires, shared) for part in parts if part.items) + b"]"


# Where a part written for sharing has its delivery ids' prefix: a byte no JSON this module writes
# holds as it is (a JSON string escapes every byte below 0x20; a payload that would hold one is
# not written as it is stored, `_plain_text`).
_PREFIX_HOLE = b"\x00"


def _shared(part: BatchPart, expires: bytes, shared: dict) -> bytes:
    """`_part_objects(part, expires)`, written once for all the parts of a batch that have the
    same records (by identity: the pass read them once for all its reads), delivery counts,
    lease and stream, and the same prefix but for the group's part of it; its ids' prefix put in
    by one join."""
    if part.sinks_pending is not None:  # a fan-out group's: what each sink still owes differs
        return _part_objects(part, expires)
    key = (tuple(map(id, part.items)), tuple(map(tuple, part.runs)), expires, part.stream, part.segment)
    found = shared.get(key)
    if found is None:
        pieces = _part_objects(part, expires, prefix_hole=True).split(_PREFIX_HOLE)
        found = shared[key] = (part.items, pieces)  # the items kept: their ids stay theirs
    return _dump_text(part.id_prefix)[1:-1].join(found[1])


def _part_objects(part: BatchPart, expires: bytes, prefix_hole: bool = False) -> bytes:
    records = [item.record() if type(item) is Frame else item for item in part.items]
    offsets, published, deliver_at, _, routing_keys, keys, headers, payloads, _, larges = zip(*records, strict=True)
    epochs = list(chain.from_iterable(repeat(epoch, n) for _, n, epoch in part.runs))
    event = _Template()
    event.constant("segment", _dump_text(part.segment))
    event.column("offset", offsets, b"%d")
    event.field("routing_key", _each_json(routing_keys, _text_json))
    event.field("key", _each_json(keys, _text_json))
    if None in headers:
        event.field("headers", [_NULL if h is None else _dump_value(h) for h in headers])
    else:  # (not by value as above: 1 == True, and equal dicts may not write alike)
        event.field("headers", list(map(_dump_value, headers)))
    event.field("published_at", _each_json(published, _time_json))  # one batch's events share theirs
    event.field("deliver_at", _each_json(deliver_at, _time_json))
    if larges.count(None) != len(larges):  # large events among them: their fields are not the others'
        event.fragments(list(map(functools.partial(_payload_fields, part), offsets, payloads, larges)))
    else:
        event.column("payload_b64", [b2a_base64(p, newline=False) for p in payloads], b'"%s"')
        if _plain_text(payloads):
            event.column("payload", payloads, b'"%s"')
        else:
            try:
                event.column("payload", list(map(_dump_text, map(bytes.decode, payloads))))
            except UnicodeDecodeError:  # not all text: `payload` only on the events whose payload is
                event.optional(list(map(_payload_field, payloads)))
    event.constant("stream", _dump_text(part.stream))
    # the id's opening quote and prefix (or where it goes: `_shared`)
    prefix = b'"' + _PREFIX_HOLE if prefix_hole else _dump_text(part.id_prefix)[:-1].replace(b"%", b"%%")
    if epochs.count(epochs[0]) == len(epochs):  # one delivery count (a read's first deliveries)
        event.column("delivery_id", offsets, delivery_ids.printf_template(prefix, epochs[0]) + b'"')
        event.constant("delivery_count", b"%d" % epochs[0])
    else:
        event.column("delivery_id", offsets, delivery_ids.printf_template(prefix) + b'"')
        event.columns.append(epochs)  # the id's second number
        event.column("delivery_count", epochs, b"%d")
    event.constant("lease_expires_at", expires)
    if part.sinks_pending is not None:
        event.column("sinks_pending", list(map(_dump_value, part.sinks_pending)))
    return event.objects(len(records))


def _plain_text(payloads: tuple[bytes, ...]) -> bool:
    """Whether every payload is UTF-8 text that goes in a JSON string as it is (nothing escaped),
    looked at in one pass over all of them (an ASCII space between two keeps a character from
    spanning them)."""
    joined = b" ".join(payloads)
    if len(joined.translate(None, _ESCAPED)) != len(joined):
        return False
    if joined.isascii():
        return True
    try:
        joined.decode()
    except UnicodeDecodeError:
        return False
    return True


def _each_json(values: tuple, dump) -> list[bytes]:
    """Each value as JSON (`dump`), None as null: each distinct value written once, the same
    bytes object for equal values (few differ in a read: keys, routing keys, times)."""
    if values.count(values[0]) == len(values):  # (the usual read: no keys, one publication time)
        return [_NULL if values[0] is None else dump(values[0])] * len(values)
    written = {value: _NULL if value is None else dump(value) for value in set(values)}
    return list(map(written.__getitem__, values))


def _text_json(value: bytes) -> bytes:
    return _dump_text(value.decode())


def _time_json(ms: int) -> bytes:
    return b'"%s"' % _iso(ms).encode()


def _payload_fields(part: BatchPart, offset: int, payload: bytes, large_size: int | None) -> bytes:
    """An event's payload fields, as `record_json` writes them, for a part with large events."""
    if large_size is not None:
        url = _dump_text(payload_url(part.stream, part.segment, offset))
        return b'"payload_url":%s,"payload_size":%d' % (url, large_size)
    return b'"payload_b64":"%s"%s' % (b2a_base64(payload, newline=False), _payload_field(payload))


def _payload_field(payload: bytes) -> bytes:
    try:
        return b',"payload":' + _dump_text(payload.decode())
    except UnicodeDecodeError:
        return b""


# An exported event as a CSV row (`GET …/events/export/?format=csv`): the event object's fields,
# the headers as one JSON object, `payload` only when it is text (else empty: `payload_b64` has it);
# a large event's payload columns empty and its `payload_url` in the last.
CSV_COLUMNS = (
    "segment",
    "offset",
    "published_at",
    "deliver_at",
    "routing_key",
    "key",
    "headers",
    "payload",
    "payload_b64",
    "payload_url",
)


def csv_row(event: dict) -> list[str]:
    headers = event.get("headers")
    return [
        event["segment"],
        str(event["offset"]),
        event["published_at"],
        event.get("deliver_at") or "",
        event.get("routing_key") or "",
        event.get("key") or "",
        "" if not headers else orjson.dumps(headers, option=orjson.OPT_SORT_KEYS).decode(),
        event.get("payload") or "",
        event.get("payload_b64", ""),
        event.get("payload_url", ""),
    ]

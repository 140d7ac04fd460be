"""What every answer carries, in the form it carries it (DESIGN.md §10): an event's JSON, times as
ISO 8601 with milliseconds and `Z`, and delivery ids. One home, used by the REST API, the read
path of reader groups and the compacted view, so that one event reads the same everywhere. Plain
Python: it never does I/O.

A delivery id is `<incarnation>-<stream>-<segment>-<offset>-<epoch>`: the subscription's
incarnation (a number from its random `state_key`), the stream's id, the segment, and the
delivery of that offset. Clients treat it as opaque."""

from __future__ import annotations

import functools
from binascii import b2a_base64
from datetime import UTC, datetime, timedelta
from typing import overload

from store.framing import Record
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


def record_json(segment: str, rec: Record) -> dict:
    """An event of `segment` as every answer carries it: a read answers thousands, so the
    record is unpacked once rather than read field by field. `payload` only when the bytes are
    UTF-8; `payload_b64` always."""
    offset, published_ms, deliver_at_ms, _, routing_key, key, headers, payload, _ = rec
    out = {
        "segment": segment,
        "offset": offset,
        "routing_key": None if routing_key is None else routing_key.decode(),
        "key": None if key is None else key.decode(),
        "headers": headers,
        "published_at": ms_to_iso(published_ms),
        "deliver_at": None if deliver_at_ms is None else ms_to_iso(deliver_at_ms),
        "payload_b64": b2a_base64(payload, newline=False).decode(),
    }
    try:
        out["payload"] = payload.decode()
    except UnicodeDecodeError:
        pass
    return out


def event_json(sr: StreamRecord) -> dict:
    return record_json(sr.segment, sr.record)


def delivery_prefix(incarnation: int, stream_id: int, segment: str) -> str:
    """What every delivery id of a subscription's segment starts with (then `-offset-epoch`)."""
    return f"{incarnation}-{stream_id}-{segment}"

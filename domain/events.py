"""A publish batch, validated whole before a byte is written (a rejected batch appends nothing).

Input is the decoded JSON body of `POST /streams/{scope}/{name}/events/`; output is the list of
`EventIn` the segment store appends. Every error names the field, e.g. `events[3].payload_b64`.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from dataclasses import dataclass
from typing import NamedTuple

from domain.errors import FieldError
from domain.times import parse_time
from domain.ttl import TTL_HEADER, parse_ttl_s

# a key or routing key is stored with a 16-bit length; 0xFFFF marks it absent (store.framing)
MAX_KEY_BYTES = 0xFFFE


class EventIn(NamedTuple):
    """One event to append, already validated (parse_event); the segment store frames it. A
    large event's payload is the store's spooled payload (`store.large.SpooledPayload`), which
    only the store looks inside: typed as the bytes it stands for."""

    payload: bytes
    routing_key: bytes | None = None
    key: bytes | None = None
    headers: dict | None = None
    deliver_at_ms: int | None = None


ALLOWED_FIELDS = frozenset(
    {"payload", "payload_b64", "routing_key", "key", "headers", "deliver_at", "delay_ms", "ttl_s"}
)
# Headers the service writes itself (a dead letter's `cbr-dlq-*`, `groups.consuming.dead_letters`,
# which appends without this check): a publish may not set them, in any case, so that a header's
# meaning cannot be forged (`domain.dead_letters` still reads them as untrusted: older events).
RESERVED_HEADER_PREFIX = "cbr-"
# 9999-12-31T23:59:59.999Z: the last delivery time an answer can carry as ISO 8601 (Python's
# datetime ends there). A later one was stored, then failed every read of the stream (a 500).
LAST_DELIVER_AT_MS = 253_402_300_799_999


@dataclass(frozen=True, slots=True)
class PublishLimits:
    max_event_bytes: int
    max_batch_events: int
    max_delay_s: int | None = None
    require_key: bool = False  # a compacted stream: every event needs a compaction key


def parse_batch(body: object, limits: PublishLimits, now_ms: int) -> list[EventIn]:
    if not isinstance(body, dict):
        raise FieldError("events", "the body must be a JSON object with an 'events' list")
    unknown = sorted(set(body) - {"events"})
    if unknown:  # a typo (`event`, `evnets`) must not go unnoticed
        raise FieldError(unknown[0], "is not a field of a publish request (only 'events')")
    events = body.get("events")
    if not isinstance(events, list):
        raise FieldError("events", "must be a list of events")
    if not events:
        raise FieldError("events", "must hold at least one event")
    if len(events) > limits.max_batch_events:
        raise FieldError("events", f"holds {len(events)} events; at most {limits.max_batch_events}")
    parsed = [_parse_event(ev, f"events[{i}]", limits, now_ms) for i, ev in enumerate(events)]
    events.clear()  # a large body is not held twice while it is written (the request keeps `body`)
    return parsed


# A large event's fields, from its publish's query (`POST …/events/raw/?routing_key=…`): its
# payload is the request's body. Headers are not among them (a query is no place for an object).
RAW_FIELDS = ("routing_key", "key", "deliver_at", "delay_ms", "ttl_s")


def parse_raw_event(
    query: dict[str, list[str]], size: int | None, max_bytes: int, limits: PublishLimits, now_ms: int
) -> EventIn:
    """A large event's fields from its publish's query (each given once), its payload left empty
    for the caller to put the body in; `size` the body's announced length (None: not announced),
    refused above `max_bytes` before a byte of it is read. Errors name the query's field, or
    `body`."""
    if size is not None and size > max_bytes:
        raise FieldError(
            "body",
            f"is {size} bytes; the limit is {max_bytes} (CBR_MAX_LARGE_EVENT_BYTES)",
            code="event_too_large",
            details={"max": max_bytes},
        )
    fields: dict[str, object] = {}
    for name, values in query.items():
        if name not in RAW_FIELDS:
            raise FieldError(name, f"is not a field of a large event (only {', '.join(RAW_FIELDS)})")
        if len(values) != 1:
            raise FieldError(name, "is given more than once")
        value = values[0]
        if name in ("delay_ms", "ttl_s") or (name == "deliver_at" and value.isdigit()):  # (epoch ms)
            fields[name] = _number(value, name)
        else:
            fields[name] = value
    try:
        return _parse_event({**fields, "payload": ""}, "", limits, now_ms)
    except FieldError as exc:  # named as the query names it: `key`, not `.key`
        raise FieldError(exc.field.lstrip("."), exc.message, exc.code, exc.details) from None


def _number(text: str, field: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise FieldError(field, "must be a number") from None


def _parse_event(ev: object, field: str, limits: PublishLimits, now_ms: int) -> EventIn:
    # The common case first, cheaply: `{"payload": "<text>"}` within the size limit.
    if type(ev) is dict and len(ev) == 1 and not limits.require_key:
        text = ev.get("payload")
        if type(text) is str:
            payload = text.encode()
            if len(payload) <= limits.max_event_bytes:
                return EventIn(payload)
    if not isinstance(ev, dict):
        raise FieldError(field, "must be an object")
    if not ALLOWED_FIELDS.issuperset(ev):
        unknown = sorted(set(ev) - ALLOWED_FIELDS)
        raise FieldError(f"{field}.{unknown[0]}", "is not a field of an event")
    payload = _payload(ev, field)
    if len(payload) > limits.max_event_bytes:
        raise FieldError(
            f"{field}.payload",
            f"is {len(payload)} bytes; the limit is {limits.max_event_bytes}",
            code="event_too_large",
        )
    key = _key(ev.get("key"), f"{field}.key")
    if key is None and limits.require_key:
        raise FieldError(
            f"{field}.key", "is required: the stream is compacted (the view keeps the latest event per key)"
        )
    headers = _headers(ev.get("headers"), f"{field}.headers")
    ttl_s = ev.get("ttl_s")
    if ttl_s is not None:  # kept with the event as the service's own header (domain.ttl)
        headers = {**(headers or {}), TTL_HEADER: str(parse_ttl_s(ttl_s, f"{field}.ttl_s"))}
    return EventIn(
        payload,
        _key(ev.get("routing_key"), f"{field}.routing_key"),
        key,
        headers,
        _deliver_at(ev, field, limits, now_ms),
    )


def _payload(ev: dict, field: str) -> bytes:
    text = ev.get("payload")
    b64 = ev.get("payload_b64")
    if text is not None and b64 is not None:
        raise FieldError(f"{field}.payload", "give either payload or payload_b64, not both")
    if text is not None:
        if not isinstance(text, str):
            raise FieldError(f"{field}.payload", "must be a string (use payload_b64 for bytes)")
        return text.encode()
    if b64 is not None:
        if not isinstance(b64, str):
            raise FieldError(f"{field}.payload_b64", "must be a base64 string")
        try:
            return b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            raise FieldError(f"{field}.payload_b64", "is not valid base64") from None
    raise FieldError(f"{field}.payload", "is required (or payload_b64)")


def _key(value: object, field: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise FieldError(field, "must be a string")
    raw = value.encode()
    if len(raw) > MAX_KEY_BYTES:
        raise FieldError(field, f"is longer than {MAX_KEY_BYTES} bytes")
    return raw


def _headers(value: object, field: str) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise FieldError(field, "must be an object of string to string")
    for k, v in value.items():
        if k[: len(RESERVED_HEADER_PREFIX)].lower() == RESERVED_HEADER_PREFIX:
            raise FieldError(
                f"{field}.{k}",
                f"header names starting with {RESERVED_HEADER_PREFIX!r} are the service's own "
                "(a dead letter's cbr-dlq-* headers); give the header another name",
            )
        if not isinstance(v, str):
            raise FieldError(f"{field}.{k}", "header values must be strings")
    return value or None


def _deliver_at(ev: dict, field: str, limits: PublishLimits, now_ms: int) -> int | None:
    at = ev.get("deliver_at")
    delay = ev.get("delay_ms")
    if at is not None and delay is not None:
        raise FieldError(f"{field}.deliver_at", "give either deliver_at or delay_ms, not both")
    if delay is not None:
        if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
            raise FieldError(f"{field}.delay_ms", "must be a non-negative integer")
        when = now_ms + delay
    elif at is not None:
        when = _parse_time(at, f"{field}.deliver_at")
    else:
        return None
    if when <= now_ms:
        return None  # a time in the past makes an ordinary event
    if when > LAST_DELIVER_AT_MS:
        raise FieldError(
            f"{field}.delay_ms" if delay is not None else f"{field}.deliver_at",
            "is after 9999-12-31T23:59:59.999Z, the last delivery time CBR can show",
        )
    if limits.max_delay_s is not None and when - now_ms > limits.max_delay_s * 1000:
        raise FieldError(
            f"{field}.delay_ms" if delay is not None else f"{field}.deliver_at",
            f"is more than the stream's max_delay_s ({limits.max_delay_s} s) ahead",
        )
    return when


def _parse_time(value: object, field: str) -> int:
    if isinstance(value, bool):
        raise FieldError(field, "must be ISO 8601 or epoch milliseconds")
    if isinstance(value, int):
        if value < 0:
            raise FieldError(field, "must not be negative")
        return value
    if isinstance(value, str):
        return int(parse_time(value, field).timestamp() * 1000)
    raise FieldError(field, "must be ISO 8601 or epoch milliseconds")

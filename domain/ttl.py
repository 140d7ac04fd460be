"""An event's time to live: when it expires, and the checks on `ttl_s` and `message_ttl_s`.
Plain Python.

An event may carry its own `ttl_s`; a stream may set `message_ttl_s` for the events that carry
none. The event's own wins (the more specific setting, as a group's `subscriber_timeout_s` wins
over its streams'). The time counts from the event's delivery time when it is delayed, from its
publish time otherwise: a delayed event is not old before it is due.

Past its expiry, an event not yet processed by a group is processed for it without being handed
out (`groups/lua/hand_out.lua` for first deliveries, `groups.consuming.read_pass` for
redeliveries): floors and acknowledgement cuts pass it, and it is counted expired. An event
already held by a consumer when it expires stays that consumer's until acked or its lease ends;
it is not handed out again.

An event's own time to live is stored with it as the service's header `cbr-ttl-ms` (a consumer
sees it, as JetStream's consumers see `Nats-TTL`); a stream's is read at each hand-out, so a
change of `message_ttl_s` applies to the events already stored, as a policy does.
"""

from __future__ import annotations

from domain.errors import FieldError

TTL_HEADER = "cbr-ttl-ms"
# the longest time to live an event or a stream may set: ten years (a longer one is a mistake,
# or means "never": leave it out); the shortest, a millisecond (what is kept)
MAX_TTL_S = 10 * 365 * 24 * 3600
MIN_TTL_S = 0.001


def parse_ttl_s(value: object, field: str) -> int:
    """`ttl_s` as given (seconds, a whole or decimal number from `MIN_TTL_S` to `MAX_TTL_S`), in
    milliseconds."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(field, "must be a number of seconds")
    if not value >= MIN_TTL_S:  # (also refuses NaN)
        raise FieldError(field, f"must be at least {MIN_TTL_S} seconds (a millisecond)")
    if value > MAX_TTL_S:
        raise FieldError(field, f"must be at most {MAX_TTL_S} seconds (ten years)")
    return max(1, round(value * 1000))


def stream_ttl_ms(message_ttl_s: int | None) -> int | None:
    """A stream's `message_ttl_s` in milliseconds (None: it sets none)."""
    return message_ttl_s * 1000 if message_ttl_s else None


def own_ttl_ms(headers: dict | None) -> int | None:
    """An event's own time to live (ms) from its stored headers; None when it has none (or the
    header does not parse: written before the header was the service's)."""
    if not headers:
        return None
    raw = headers.get(TTL_HEADER)
    if type(raw) is not str or not raw.isdigit():
        return None
    return int(raw)


def expires_at_ms(
    published_ms: int, deliver_at_ms: int | None, own_ms: int | None, stream_ms: int | None
) -> int | None:
    """When an event expires (epoch ms), or None when it never does."""
    ttl = own_ms if own_ms is not None else stream_ms
    if ttl is None:
        return None
    return (published_ms if deliver_at_ms is None else deliver_at_ms) + ttl


def expired(
    published_ms: int, deliver_at_ms: int | None, own_ms: int | None, stream_ms: int | None, now_ms: int
) -> bool:
    """Whether an event has expired at `now_ms` (at its expiry instant it has)."""
    at = expires_at_ms(published_ms, deliver_at_ms, own_ms, stream_ms)
    return at is not None and at <= now_ms

"""Times given as input: the one parse of an ISO 8601 time that a request, a form, a query
parameter or a command gives (a reader group's start, a seek, an event's `deliver_at`, a cycle's
clock, a key's expiry, the event browser's start). Plain Python; it must never hand on a time that
UTC cannot hold.

Python's datetime runs from year 1 to year 9999 in every zone, so `0001-01-01T00:00:00+14:00`
(still year 0 in UTC) and `9999-12-31T23:59:59-14:00` (already year 10000) parse, then overflow on
the first conversion to UTC or read back from PostgreSQL: a 500 there, a 400 naming the field here.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo

from domain.errors import FieldError

FIRST = datetime.min.replace(tzinfo=UTC)  # 0001-01-01T00:00:00Z
LAST = datetime.max.replace(tzinfo=UTC)  # 9999-12-31T23:59:59.999999Z
EXAMPLE = "2026-11-26T09:30:00Z"
_SHOWN = 64  # of a refused value, at most these characters go back in the message


def parse_time(value: object, field: str, *, naive: tzinfo | None = None) -> datetime:
    """`value`, an ISO 8601 time with its UTC offset (or `Z`), as an aware datetime in UTC.
    A time without an offset is refused, or read in `naive` when the caller says which zone its
    input is in (the console's forms: UTC)."""
    if not isinstance(value, str):
        raise FieldError(field, f"must be an ISO 8601 time, e.g. {EXAMPLE}")
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise FieldError(
            field, f"{value[:_SHOWN]!r} is not an ISO 8601 time (years 1 to 9999), e.g. {EXAMPLE}"
        ) from None
    if at.tzinfo is None:
        if naive is None:
            raise FieldError(field, f"must carry its UTC offset (Z or ±hh:mm), e.g. {EXAMPLE}")
        at = at.replace(tzinfo=naive)
    return as_utc(at, field)


def as_utc(at: datetime, field: str) -> datetime:
    """An aware datetime (parsed by a form's field, say) in UTC; refused, naming `field`, when UTC
    does not hold it (before 0001-01-01T00:00:00Z or after 9999-12-31T23:59:59.999999Z)."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise FieldError(field, f"must carry its UTC offset (Z or ±hh:mm), e.g. {EXAMPLE}")
    try:
        return at.astimezone(UTC)
    except OverflowError:
        raise FieldError(
            field, f"{at.isoformat()} is outside the times UTC can hold ({_iso(FIRST)} to {_iso(LAST)})"
        ) from None


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")

"""`domain.times`, the one parse of a time given as input (issue 37, point 5): ISO 8601 with its
offset, in UTC; a time UTC cannot hold (year 0 or year 10000 once its offset is applied) is
refused naming the field, never an OverflowError. Plain Python."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from domain.errors import FieldError
from domain.events import PublishLimits, parse_batch
from domain.start_positions import parse_position, parse_seek
from domain.times import FIRST, LAST, as_utc, parse_time

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
OUTSIDE = [
    "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00+00:01",
    "0001-01-01T13:59:59.999999+14:00",
    "9999-12-31T23:59:59-14:00",
    "9999-12-31T23:59:59.999999-00:01",
    "9999-12-31T10:00:00-14:00",
]


@pytest.mark.parametrize("value", OUTSIDE)
def test_a_time_utc_cannot_hold_is_refused_naming_the_field(value):
    with pytest.raises(FieldError) as refused:
        parse_time(value, "start.time")
    assert refused.value.field == "start.time" and refused.value.code == "invalid"
    assert "outside the times UTC can hold (0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z)" in str(refused.value)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("0001-01-01T00:00:00Z", FIRST),
        ("0001-01-01T14:00:00+14:00", FIRST),
        ("0001-01-01T00:00:00-14:00", FIRST + timedelta(hours=14)),
        ("9999-12-31T23:59:59.999999Z", LAST),
        ("9999-12-31T09:59:59.999999-14:00", LAST),
        ("9999-12-31T23:59:59+14:00", datetime(9999, 12, 31, 9, 59, 59, tzinfo=UTC)),
        ("2026-11-26T09:30:00+01:00", datetime(2026, 11, 26, 8, 30, tzinfo=UTC)),
    ],
)
def test_the_ends_utc_holds_are_accepted_in_utc(value, expected):
    at = parse_time(value, "time")
    assert at == expected and at.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "value, says",
    [
        ("2026-11-26T09:30:00", "must carry its UTC offset"),
        ("10000-01-01T00:00:00Z", "is not an ISO 8601 time"),
        ("soon", "is not an ISO 8601 time"),
        ("", "is not an ISO 8601 time"),
        (1_700_000_000, "must be an ISO 8601 time"),
        (None, "must be an ISO 8601 time"),
        ("x" * 10_000, "is not an ISO 8601 time"),
    ],
)
def test_what_is_no_time_is_refused_naming_the_field(value, says):
    with pytest.raises(FieldError) as refused:
        parse_time(value, "time")
    assert refused.value.field == "time" and says in refused.value.message
    assert len(refused.value.message) < 200  # a long value is not echoed whole


def test_a_time_without_offset_is_read_in_the_zone_the_caller_names():
    assert parse_time("0001-01-01T00:00:00", "time", naive=UTC) == FIRST
    with pytest.raises(FieldError, match="outside"):
        parse_time("0001-01-01T00:00:00", "time", naive=timezone(timedelta(hours=1)))


def test_as_utc_refuses_an_aware_datetime_utc_cannot_hold_and_a_naive_one():
    plus14 = timezone(timedelta(hours=14))
    assert as_utc(datetime(2026, 1, 1, 14, tzinfo=plus14), "f") == datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(FieldError, match="outside") as refused:
        as_utc(datetime(1, 1, 1, tzinfo=plus14), "expires_at")
    assert refused.value.field == "expires_at"
    with pytest.raises(FieldError, match="must carry its UTC offset"):
        as_utc(datetime(2026, 1, 1), "f")


@pytest.mark.parametrize("value", OUTSIDE)
def test_every_parse_of_the_domain_refuses_them_naming_its_field(value):
    with pytest.raises(FieldError) as refused:
        parse_position({"time": value}, "start", NOW)
    assert refused.value.field == "start.time"
    with pytest.raises(FieldError) as refused:
        parse_seek({"time": value}, NOW)
    assert refused.value.field == "time"
    with pytest.raises(FieldError) as refused:
        parse_batch({"events": [{"payload": "x", "deliver_at": value}]}, PublishLimits(1024, 10), 0)
    assert refused.value.field == "events[0].deliver_at"

"""The bounds of a reader group's numeric settings: one table, which the API's serializers and
the console's forms both take their limits from."""

from __future__ import annotations

import re

from domain.errors import FieldError

# setting -> (lowest, highest)
BOUNDS: dict[str, tuple[int, int]] = {
    "ack_timeout_s": (1, 86400),
    "max_deliveries": (1, 1000),
    "max_ack_pending": (1, 1_000_000),
    "checkpoint_interval_s": (1, 7 * 86400),
    "consumer_timeout_s": (1, 86400),
    "subscriber_timeout_s": (0, 2_147_483_647),  # as a stream policy's (a PostgreSQL integer)
}

DEFAULTS: dict[str, int] = {"ack_timeout_s": 30, "max_deliveries": 5, "max_ack_pending": 1000, "consumer_timeout_s": 30}

MAX_SINKS = 16
SINK_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,64}")  # a sink's name (the API's schema says it too)


def check_sinks(value: list[str]) -> list[str]:
    """A fan-out group's sink names: at most 16, distinct, each 1-64 letters, digits, _ . : -."""
    if len(value) > MAX_SINKS:
        raise FieldError("sinks", f"at most {MAX_SINKS} sinks")
    for name in value:
        if not SINK_PATTERN.fullmatch(name):
            raise FieldError("sinks", f"sink {name!r}: 1-64 letters, digits, '_', '.', ':' or '-'")
    if len(set(value)) != len(value):
        raise FieldError("sinks", "sink names must be distinct")
    return value

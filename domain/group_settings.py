"""The bounds of a reader group's numeric settings: one table, which the API's serializers and
the console's forms both take their limits from."""

from __future__ import annotations

# setting -> (lowest, highest)
BOUNDS: dict[str, tuple[int, int]] = {
    "ack_timeout_s": (1, 86400),
    "max_deliveries": (1, 1000),
    "max_ack_pending": (1, 1_000_000),
    "checkpoint_interval_s": (1, 7 * 86400),
}

DEFAULTS: dict[str, int] = {"ack_timeout_s": 30, "max_deliveries": 5, "max_ack_pending": 1000}

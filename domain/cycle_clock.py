"""Which clock a cycle may be run with (`now`): a replay may go back, never forward, and never
behind the history it would write into. Plain Python; it must never read the database itself.

A clock ahead of the real time would let the max limit delete data that subscribers have not
read yet and that no real cycle would delete for years, and would date a truncation in the future,
ahead of every later one (the history would no longer tell the order things happened in). A clock
behind the stream's latest truncation would write a record earlier than one already there."""

from __future__ import annotations

from datetime import datetime, timedelta

SKEW = timedelta(seconds=60)  # a caller's clock may run this far ahead of the server's


def clock_problem(now: datetime, wall: datetime, latest_truncation: datetime | None) -> str | None:
    """Why `now` may not be a cycle's clock (None when it may): `wall` is the server's time,
    `latest_truncation` the time of the newest truncation the cycle could write after."""
    if now > wall + SKEW:
        return f"{now.isoformat()} is in the future (the server's time is {wall.isoformat(timespec='seconds')})"
    if latest_truncation is not None and now < latest_truncation:
        return (
            f"{now.isoformat()} is before the latest truncation ({latest_truncation.isoformat()}): "
            "the history would no longer be in the order things happened"
        )
    return None

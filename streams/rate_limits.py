"""A stream's publish rate, enforced across every web process (`domain.rate_limits` says what it
may be): one token bucket per stream in Redis (`lua/token_bucket.lua`), taken in one script call
by each publish of a stream that has a limit (none otherwise). A publish over it is refused
whole, before anything is written: 429 `rate_limited`, with `Retry-After`."""

from __future__ import annotations

import math
from importlib.resources import files

from domain.errors import FieldError
from store.redis_connection import get_redis, registered
from streams import wait_stats
from streams.models import Stream

_BUCKET = (files("streams") / "lua" / "token_bucket.lua").read_text()


def _script():
    return registered(get_redis(), _BUCKET)


def bucket_key(stream: Stream) -> str:
    return f"cbr:rate:{{{stream.storage_key}}}:publish"


def take_publish(stream: Stream, events: int, payload_bytes: int, now: float | None = None) -> float | None:
    """Take a publish of `events` events and `payload_bytes` bytes from the stream's buckets: None
    when taken (or the stream has no limit), else the seconds to wait before it would be.
    `now`: a clock of the caller's (tests); Redis's own clock otherwise, one for every process."""
    rate = stream.publish_rate or {}
    if not rate:
        return None
    answer = _script()(
        keys=[bucket_key(stream)],
        args=[
            "" if now is None else repr(now),
            events,
            payload_bytes,
            rate.get("events_per_s", 0),
            rate.get("bytes_per_s", 0),
        ],
    )
    if int(answer[0]) == 1:
        return None
    return float(answer[1])


def check_publish(stream: Stream, events: int, payload_bytes: int) -> None:
    """`take_publish`, raising 429 `rate_limited` (with how long to wait) when refused."""
    wait = take_publish(stream, events, payload_bytes)
    if wait is None:
        return
    wait_stats.counts.add("rate:limited:publish")
    rate = stream.publish_rate
    shown = ", ".join(f"{v:g} {k.removesuffix('_per_s').replace('_', ' ')}/s" for k, v in rate.items())
    raise FieldError(
        "publish_rate",
        f"the stream's publish rate ({shown}) is reached: nothing of this batch was written; retry in "
        f"{math.ceil(wait * 10) / 10:g} s",
        "rate_limited",
        details={"retry_after_s": wait},
    )

"""What every part of long-term storage for streams shares: the deployment's tier, what the database
records of a stream's copies (`Recorded`, read for many streams at once), and the counts that go
to `/metrics`. Without a tier, `tier()` is None and every part does nothing."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis
from django.conf import settings

from store.redis_connection import get_redis
from store.tier.base import Tier
from store.tier.opening import tier_for
from streams import wait_stats
from streams.models import Stream, TierFile, TierObject

log = logging.getLogger(__name__)


OFFLOAD_LOCK_S = 300


def tier() -> Tier | None:
    """The deployment's tier, or None (everything stays on CBR_DATA_DIR)."""
    return tier_for(settings.CBR_TIER_URL)


def publish_counts() -> None:
    """Add what this process counted of the tier (copies, their time, errors, reads of released
    chunks) into the figures `/metrics` shows; a worker calls it after its tier work (a web
    process's listener does it every second). Redis not answering keeps them for the next call."""
    try:
        wait_stats.flush(get_redis(), None)
    except redis.RedisError as e:
        log.warning("tier counts kept for later: %s", e)


@dataclass
class Recorded:
    """What the database records of a stream's copies, read once for a round's batch of streams
    (`recorded_for`) or for one stream; copies made during the round are added to it."""

    objects: list[TierObject]
    files: list[TierFile]


def recorded_for(streams: list[Stream]) -> dict[int, Recorded]:
    """Two queries for any number of streams."""
    out = {s.pk: Recorded([], []) for s in streams}
    for row in TierObject.objects.filter(stream_id__in=list(out)):
        out[row.stream_id].objects.append(row)
    for file in TierFile.objects.filter(stream_id__in=list(out)):
        out[file.stream_id].files.append(file)
    return out

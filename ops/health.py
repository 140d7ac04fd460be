"""What readiness (`/readyz`, the console's health panel) is decided from, and the heartbeats
it reads.

Each Celery worker keeps a heartbeat in Redis from a thread of its main process (its name, its
queues, the time on Redis's clock), refreshed every third of `CBR_HEALTH_STALE_S` and removed when
it stops; beat records its ticks the same way (`cbrweb.beat.Scheduler`). `observe()` reads them with
the database, Redis and the data directory's free space; `domain.health.assess` decides.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from pathlib import Path

import redis
from django.conf import settings
from django.db import connection

from domain.health import Limits, Observed, WorkerBeat, assess
from store.redis_connection import as_text, get_redis
from store.tier.base import TierError
from store.tier.opening import tier_for

WORKER_KEY = "cbr:health:worker:"
BEAT_KEY = "cbr:health:beat"


def _redis_now(r: redis.Redis) -> float:
    seconds, micros = r.time()
    return seconds + micros / 1e6


def _ttl() -> int:
    return max(60, int(settings.CBR_HEALTH_STALE_S * 3))


def record_worker(name: str, queues: list[str]) -> None:
    r = get_redis()
    body = json.dumps({"at": _redis_now(r), "queues": queues})
    r.set(WORKER_KEY + name, body, ex=_ttl())


def forget_worker(name: str) -> None:
    get_redis().delete(WORKER_KEY + name)


class WorkerHeartbeat:
    """The heartbeat thread of one worker process; a Redis that does not answer skips a beat
    (the worker itself carries on)."""

    def __init__(self, name: str, queues: list[str]):
        self.name, self.queues = name, queues
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cbr health heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        interval = max(0.2, settings.CBR_HEALTH_STALE_S / 3)
        while True:
            with contextlib.suppress(redis.RedisError):
                record_worker(self.name, self.queues)
            if self._stop.wait(interval):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        with contextlib.suppress(redis.RedisError):
            forget_worker(self.name)


class BeatTicks:
    """Beat's ticks, written at most every third of the staleness window."""

    def __init__(self) -> None:
        self._last = 0.0

    def tick(self) -> None:
        if time.monotonic() - self._last < settings.CBR_HEALTH_STALE_S / 3:
            return
        try:
            r = get_redis()
            r.set(BEAT_KEY, str(_redis_now(r)), ex=_ttl())
            self._last = time.monotonic()
        except redis.RedisError:
            pass


def _error(exc: Exception) -> str:
    """What failed, without the message (it may carry a host name or a URL with a password)."""
    return f"{type(exc).__module__.split('.')[0]}.{type(exc).__name__}"


def _database_error() -> str | None:
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        return None
    except Exception as exc:
        connection.close_if_unusable_or_obsolete()
        return _error(exc)


def _free_bytes(path: Path) -> int | None:
    """The free space where the data directory is (or will be: its nearest existing parent)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            try:
                return shutil.disk_usage(candidate).free
            except OSError:
                return None
    return None


def _tier_error() -> tuple[str | None, str | None]:
    """Long-term storage's kind (None: none configured) and, if it does not answer, why."""
    target = tier_for(settings.CBR_TIER_URL)
    if target is None:
        return None, None
    try:
        target.check()
        return target.kind, None
    except TierError as exc:
        return target.kind, _error(exc)


def observe() -> Observed:
    database_error = _database_error()
    free = _free_bytes(Path(settings.CBR_DATA_DIR))
    tier, tier_error = _tier_error()
    try:
        r = get_redis()
        now = _redis_now(r)
        keys = list(r.scan_iter(match=WORKER_KEY + "*", count=100))
        values = r.mget(keys) if keys else []
        beat = r.get(BEAT_KEY)
    except redis.RedisError as exc:
        return Observed(time.time(), database_error, _error(exc), free_bytes=free, tier=tier, tier_error=tier_error)
    workers = []
    for key, value in zip(keys, values, strict=True):
        if value is None:  # expired between the scan and the read
            continue
        body = json.loads(value)
        workers.append(WorkerBeat(as_text(key)[len(WORKER_KEY) :], float(body["at"]), tuple(body["queues"])))
    beat_at = float(as_text(beat)) if beat is not None else None
    return Observed(now, database_error, None, workers, beat_at, free, tier, tier_error)


def limits() -> Limits:
    return Limits(
        stale_after_s=settings.CBR_HEALTH_STALE_S,
        min_free_bytes=settings.CBR_MIN_FREE_BYTES,
        queues=(settings.CELERY_TASK_DEFAULT_QUEUE, settings.CBR_COMPACTION_QUEUE),
    )


def readiness() -> dict:
    return assess(observe(), limits())

"""Whether the service can do its work (`/readyz`, the console's health panel), decided from what
was observed, as plain values.

The service is ready when the database and Redis answer, every queue the service routes work to
has a worker whose heartbeat is fresh, beat has ticked recently, and the data directory has at
least the configured free space. While Redis does not answer, the workers' and beat's heartbeats
(kept there) cannot be read: they are reported unknown (`ok: None`), not down, and Redis alone is
named as down.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class WorkerBeat:
    name: str
    at: float  # seconds, on Redis's clock (every host compares on one clock)
    queues: tuple[str, ...]


@dataclass(frozen=True)
class Observed:
    now: float  # seconds, on Redis's clock when Redis answered
    database_error: str | None  # None: it answered
    redis_error: str | None
    workers: list[WorkerBeat] = field(default_factory=list)
    beat_at: float | None = None
    free_bytes: int | None = None  # None: the data directory could not be measured
    tier: str | None = None  # long-term storage's kind ("file", "s3"); None: none configured
    tier_error: str | None = None  # None: it answered


@dataclass(frozen=True)
class Limits:
    stale_after_s: float  # a heartbeat older than this is a process that is gone
    min_free_bytes: int
    queues: tuple[str, ...]  # the queues work is routed to: each needs a live worker


def _age(now: float, at: float | None) -> float | None:
    return None if at is None else round(max(0.0, now - at), 1)


def assess(seen: Observed, limits: Limits) -> dict:
    """The readiness answer: `ready`, `down` (what is not working, in a fixed order), `degraded`
    (what is not working but does not stop the service: long-term storage), and one entry per
    part: `database`, `redis`, `workers`, `beat`, `data_dir_free_bytes` (with `data_dir` saying
    whether that is enough), `tier` (`ok` null when none is configured)."""
    redis_up = seen.redis_error is None
    answer: dict = {
        "database": {"ok": seen.database_error is None, "error": seen.database_error},
        "redis": {"ok": redis_up, "error": seen.redis_error},
    }
    if redis_up:
        live = [w for w in seen.workers if seen.now - w.at <= limits.stale_after_s]
        served = {q for w in live for q in w.queues}
        missing = [q for q in limits.queues if q not in served]
        answer["workers"] = {
            "ok": not missing,
            "alive": [
                {"name": w.name, "queues": list(w.queues), "seen_s_ago": _age(seen.now, w.at)}
                for w in sorted(live, key=lambda w: w.name)
            ],
            "queues_without_worker": missing,
        }
        beat_age = _age(seen.now, seen.beat_at)
        answer["beat"] = {"ok": beat_age is not None and beat_age <= limits.stale_after_s, "last_tick_s_ago": beat_age}
    else:
        answer["workers"] = {"ok": None, "alive": [], "queues_without_worker": []}
        answer["beat"] = {"ok": None, "last_tick_s_ago": None}
    answer["data_dir_free_bytes"] = seen.free_bytes
    answer["data_dir"] = {
        "ok": seen.free_bytes is not None and seen.free_bytes >= limits.min_free_bytes,
        "min_free_bytes": limits.min_free_bytes,
    }
    # long-term storage: reads of local data and publishes go on without it, so it does not make
    # the service unready; offloads wait, and `degraded` says why
    answer["tier"] = {
        "ok": None if seen.tier is None else seen.tier_error is None,
        "kind": seen.tier,
        "error": seen.tier_error,
    }
    down = [part for part in ("database", "redis", "workers", "beat", "data_dir") if answer[part]["ok"] is False]
    degraded = ["tier"] if answer["tier"]["ok"] is False else []
    return {"ready": not down and redis_up, "down": down, "degraded": degraded, **answer}

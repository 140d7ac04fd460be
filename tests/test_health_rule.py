"""The readiness rule (domain.health.assess), without a service."""

from domain.health import Limits, Observed, WorkerBeat, assess

LIMITS = Limits(stale_after_s=30, min_free_bytes=100, queues=("celery", "compaction"))
BOTH = WorkerBeat("w@h", 990.0, ("celery", "compaction"))


def test_everything_working_is_ready():
    answer = assess(Observed(1000.0, None, None, [BOTH], 995.0, 1000), LIMITS)
    assert answer["ready"] and answer["down"] == []
    assert answer["workers"]["alive"] == [{"name": "w@h", "queues": ["celery", "compaction"], "seen_s_ago": 10.0}]
    assert answer["beat"] == {"ok": True, "last_tick_s_ago": 5.0}
    assert answer["data_dir_free_bytes"] == 1000


def test_a_stale_heartbeat_is_a_worker_gone_and_each_queue_needs_one():
    stale = WorkerBeat("old@h", 960.0, ("compaction",))
    fresh = WorkerBeat("new@h", 999.0, ("celery",))
    answer = assess(Observed(1000.0, None, None, [stale, fresh], 999.0, 1000), LIMITS)
    assert answer["down"] == ["workers"] and not answer["ready"]
    assert answer["workers"]["queues_without_worker"] == ["compaction"]
    assert [w["name"] for w in answer["workers"]["alive"]] == ["new@h"]


def test_beat_never_seen_or_stale_is_down():
    assert assess(Observed(1000.0, None, None, [BOTH], None, 1000), LIMITS)["down"] == ["beat"]
    assert assess(Observed(1000.0, None, None, [BOTH], 969.0, 1000), LIMITS)["down"] == ["beat"]
    assert assess(Observed(1000.0, None, None, [BOTH], 970.0, 1000), LIMITS)["down"] == []


def test_redis_down_leaves_workers_and_beat_unknown_not_down():
    answer = assess(Observed(1000.0, None, "redis.ConnectionError", free_bytes=1000), LIMITS)
    assert answer["down"] == ["redis"] and not answer["ready"]
    assert answer["workers"]["ok"] is None and answer["beat"]["ok"] is None


def test_database_down_and_a_full_disk_are_named():
    answer = assess(Observed(1000.0, "psycopg.OperationalError", None, [BOTH], 999.0, 99), LIMITS)
    assert answer["down"] == ["database", "data_dir"]
    assert answer["database"] == {"ok": False, "error": "psycopg.OperationalError"}
    unmeasured = assess(Observed(1000.0, None, None, [BOTH], 999.0, None), LIMITS)
    assert unmeasured["down"] == ["data_dir"]


def test_long_term_storage_that_does_not_answer_degrades_but_does_not_unready():
    working = dict(now=1000.0, database_error=None, redis_error=None, workers=[BOTH], beat_at=995.0, free_bytes=1000)
    none = assess(Observed(**working), LIMITS)
    assert none["tier"] == {"ok": None, "kind": None, "error": None} and none["degraded"] == []
    up = assess(Observed(**working, tier="s3"), LIMITS)
    assert up["tier"]["ok"] is True and up["degraded"] == [] and up["ready"]
    down = assess(Observed(**working, tier="s3", tier_error="store.TierUnavailable"), LIMITS)
    assert down["tier"] == {"ok": False, "kind": "s3", "error": "store.TierUnavailable"}
    assert down["degraded"] == ["tier"] and down["down"] == [] and down["ready"]

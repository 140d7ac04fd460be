"""A compaction run's first Spark job makes the sealed chunks' Parquet copies in the executors,
which a real SparkSession reads back event for event; a real Celery worker refreshes Segment rows,
runs queued cycles and delayed-bucket maintenance."""

import time

import pytest

from compaction.runs import chunk_copies, sealed_after
from domain.events import EventIn
from domain.policy_spec import parse_policy
from integration.conftest import WORKER_CHUNK_BYTES
from retention import services as retention_services
from streams import logs, services, tasks
from streams.delaying import stream_index
from streams.models import DelayedBucket, DelayedOp

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_executors_make_the_sealed_chunks_copies_and_spark_reads_every_event(settings, spark, tmp_path):
    # given a stream whose chunks rolled several times, none copied yet
    settings.CBR_DATA_DIR = tmp_path
    settings.CBR_CHUNK_BYTES = WORKER_CHUNK_BYTES
    stream = services.do_create_stream(scope="it", name="sealed", segment_count=2)
    for b in range(20):
        services.do_publish(
            stream, [EventIn(f"b{b}-e{i}".encode() * 4, routing_key=f"k{i % 4}".encode(), key=b"k") for i in range(25)]
        )
    log = logs.stream_log(stream)
    assert not log.parquet_paths()

    # when the copies job runs over the sealed chunks (a task per chunk, in the executors)
    facts = chunk_copies(stream, sealed_after(stream, {}))

    # then every sealed chunk has its copy, counted right, and Spark sees exactly the sealed events
    sealed = {s: log.segment(s).sealed_chunks() for s in stream.segment_ids}
    assert [f["made"] for f in facts] == [True] * sum(len(b) for b in sealed.values()) and facts
    frame = spark.read.parquet(*[str(p) for p in log.parquet_paths()])
    rows = frame.select("segment", "offset", "payload_size").collect()
    for seg, bases in sealed.items():
        active = log.segment(seg).committed_tail().active_base
        offsets = sorted(r.offset for r in rows if r.segment == seg)
        assert offsets == list(range(bases[0], active))
    sizes = sum(log.segment(s).size_till(log.segment(s).committed_tail().active_base) for s in stream.segment_ids)
    assert sum(r.payload_size for r in rows) == sizes == sum(f["bytes"] for f in facts)
    assert sum(f["events"] for f in facts) == len(rows)

    # and a second job makes nothing again and counts the same
    again = chunk_copies(stream, sealed_after(stream, {}))
    assert again == [{**f, "made": False} for f in facts]


def test_the_worker_refreshes_segment_rows_from_the_store(celery_worker, settings):
    settings.CBR_DATA_DIR = celery_worker.data_dir
    stream = services.do_create_stream(scope="it", name="stats", segment_count=1)
    services.do_publish(stream, [EventIn(b"abc")] * 7)
    tasks.refresh_segment_stats.delay().get(timeout=60)
    row = stream.segments.get()
    assert (row.tail_offset, row.tail_size) == (7, 21)


def test_a_cycle_queued_over_the_api_runs_on_the_worker_and_reports_progress(celery_worker, settings, api):
    settings.CBR_DATA_DIR = celery_worker.data_dir
    settings.REDIS_URL = celery_worker.broker_url
    stream = retention_services.do_create_stream(
        scope="it", name="cycled", segment_count=2, policy=parse_policy({"limit_type": "size", "min": 100})
    )
    services.do_publish(stream, [EventIn(b"x" * 10, routing_key=f"k{i}".encode()) for i in range(50)])
    # a first cycle records the tail; a second, an interval later, truncates keeping >= 100 bytes
    first = api.post("/api/v1/retention/cycles/", {"now": "2026-11-21T10:00:00Z"}, format="json")
    assert first.status_code == 201 and first.json()["state"] == "queued"
    _wait_done(api, first.json()["id"])
    services.do_publish(stream, [EventIn(b"x" * 10, routing_key=f"k{i}".encode()) for i in range(20)])
    second = api.post("/api/v1/retention/cycles/", {"now": "2026-11-21T11:00:00Z"}, format="json")
    done = _wait_done(api, second.json()["id"])
    assert done["progress"] == 1.0 and done["streams_done"] == done["streams_total"] == 1
    assert done["truncations"] == 1 and done["bytes_reclaimed"] == 500
    history = api.get("/api/v1/streams/it/cycled/truncations/").json()["results"]
    assert history[0]["rule"] == "size:limit_min" and history[0]["trigger"] == "api"


def _wait_done(api, cycle_id, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = api.get(f"/api/v1/retention/cycles/{cycle_id}/").json()
        if body["state"] in ("done", "failed"):
            assert body["state"] == "done", body["error"]
            return body
        time.sleep(0.2)
    raise AssertionError(f"cycle {cycle_id} did not finish: {body}")


def test_a_publish_that_fills_the_mutable_delayed_bucket_has_the_worker_seal_it(celery_worker, settings):
    settings.CBR_DATA_DIR = celery_worker.data_dir
    settings.REDIS_URL = celery_worker.broker_url  # the worker's Redis holds the index too
    stream = services.do_create_stream(scope="it", name="later", delayed_index={"min_index_count_per_bucket": 10})
    due_ms = int(time.time() * 1000) + 3_600_000
    for b in range(3):  # batches 2 and 3 each find 10 indexes in the mutable bucket: sealed
        services.do_publish(stream, [EventIn(f"{b}-{i}".encode(), deliver_at_ms=due_ms + i) for i in range(10)])
    deadline = time.monotonic() + 60
    while DelayedBucket.objects.filter(stream=stream).count() < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [b.index_count for b in DelayedBucket.objects.filter(stream=stream)] == [10, 10]
    assert DelayedOp.objects.filter(stream=stream, type="create", state="succeed").count() == 2
    counts = stream_index.index_of(stream).counts()
    assert counts["mutable"] == 10 and counts["sealing"] == 0 and counts["queue"] > 0
    assert tasks.delayed_maintenance.delay().get(timeout=60) >= 1  # beat's round, on the worker

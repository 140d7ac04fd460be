"""Celery tasks of compaction (thin wrappers taking ids) and what queues them."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from celery import current_app, shared_task
from celery.signals import worker_process_init
from django.conf import settings
from django.db import connection

from compaction.models import CompactionRun
from compaction.runs import CompactionBusy, execute, fail_dead_runs, is_running, warm_up
from spark_tasks import scheduler_pool
from streams.jobs import queue_job
from streams.models import CleanupPolicy, Stream


@shared_task
def run_compaction(run_id: int) -> str:
    """A run queued from the console or the API."""
    run = CompactionRun.objects.select_related("stream__scope").get(pk=run_id)
    if run.state != CompactionRun.State.QUEUED:
        return run.state  # a redelivered task does nothing twice
    try:
        return execute(run).state
    except CompactionBusy:
        return "busy"


@shared_task
def compact_due_streams() -> int:
    """Beat: compact every compacted stream, `CBR_COMPACTION_STREAMS_AT_ONCE` at once, each
    thread's Spark jobs in a scheduler pool of their own (a stream with nothing new records a
    skipped run only when it has never been compacted; one running already is left alone).
    How many streams got a run."""
    streams = [
        s
        for s in Stream.objects.filter(cleanup_policy__in=CleanupPolicy.compacted()).select_related("scope")
        if not is_running(s)
    ]
    at_once = 1 if connection.vendor == "sqlite" else settings.CBR_COMPACTION_STREAMS_AT_ONCE
    if at_once == 1 or len(streams) < 2:
        return sum(_compact_due(stream) for stream in streams)
    slots = itertools.count()

    def own_pool() -> None:
        scheduler_pool(f"compaction-{next(slots)}")

    with ThreadPoolExecutor(min(at_once, len(streams)), thread_name_prefix="compaction", initializer=own_pool) as pool:
        return sum(pool.map(_in_thread, streams))


def _in_thread(stream: Stream) -> int:
    try:
        return _compact_due(stream)
    finally:
        connection.close()  # this thread's own


def _compact_due(stream: Stream) -> int:
    run = CompactionRun.objects.create(stream=stream, trigger="beat")
    try:
        execute(run)
    except CompactionBusy:
        return 0
    except Exception:  # recorded as failed on the run; the others still get theirs
        return 0
    if run.state == CompactionRun.State.SKIPPED and CompactionRun.objects.filter(stream=stream).count() > 1:
        run.delete()  # nothing new: no history line every interval
        return 0
    return 1


def queue_run(stream: Stream, trigger: str) -> CompactionRun:
    """A run to be done by the worker (console, API); 409 when one is running."""
    if is_running(stream):
        raise CompactionBusy(stream.full_name)
    fail_dead_runs(stream)
    if CompactionRun.objects.filter(stream=stream, state=CompactionRun.State.QUEUED).exists():
        raise CompactionBusy(stream.full_name)
    run = CompactionRun.objects.create(stream=stream, trigger=trigger)
    queue_job(run, run_compaction)  # when the broker is down, the run says failed, with why
    return run


@worker_process_init.connect
def _warm_up_compactor(**_):
    """A pool process of the compactor (the worker of the compaction queue) starts its
    SparkSession and warms it up in the background (`compaction.runs.warm_up`); a run that
    arrives meanwhile shares the session. (Here the pool process has 4 s to start.)"""
    queues = current_app.conf.get("cbr_worker_queues") or []
    if settings.CBR_COMPACTION_WARM_UP and settings.CBR_COMPACTION_QUEUE in queues:
        threading.Thread(target=_warm_up, name="compaction-warm-up", daemon=True).start()


def _warm_up():
    log, started = logging.getLogger(__name__), time.monotonic()
    try:
        warm_up()
    except Exception:  # the first real run pays for it instead
        log.exception("the compaction warm-up failed")
    else:
        log.warning("compaction warm-up done in %.1f s", time.monotonic() - started)

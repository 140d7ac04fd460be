"""Celery tasks of compaction: thin wrappers taking ids."""

from __future__ import annotations

from celery import shared_task

from streams.models import CleanupPolicy, Stream

from compaction.models import CompactionRun
from compaction.runs import CompactionBusy, execute, is_running


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
    """Beat: compact every compacted stream (a stream with nothing new records a skipped run
    only when it has never been compacted; one running already is left alone)."""
    done = 0
    for stream in Stream.objects.filter(cleanup_policy__in=CleanupPolicy.compacted()).select_related("scope"):
        if is_running(stream):
            continue
        run = CompactionRun.objects.create(stream=stream, trigger="beat")
        try:
            execute(run)
        except CompactionBusy:
            continue
        except Exception:  # recorded as failed on the run; the others still get theirs
            continue
        if run.state == CompactionRun.State.SKIPPED and CompactionRun.objects.filter(stream=stream).count() > 1:
            run.delete()  # nothing new: no history line every interval
        else:
            done += 1
    return done

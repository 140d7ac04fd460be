"""Queueing a job for the worker, one rule for every job a person or a program asks for (a
retention cycle, a compaction run): the job's row is made first, by its app; then its task is
sent; when the task queue (Redis, Celery's broker) does not take it, the row is marked failed,
saying why, so that the console's and the API's lists show what happened. The API then answers
503 `broker_unavailable` (`QueueDown`); the console shows the failed row. Never a job left
"queued" that no worker will ever run."""

from __future__ import annotations

from typing import Any

from kombu.exceptions import OperationalError

FAILED = "failed"  # the state of a job that could not be queued (every job's table has it)


class QueueDown(Exception):
    """The task queue did not take a job: its row says failed (`row`)."""

    def __init__(self, row: Any):
        super().__init__(row.error)
        self.row = row


def queue_job(row: Any, task: Any) -> bool:
    """Send `task` for the job of `row` (a row with `pk`, `state` and `error`): True once the
    queue has it, False when it did not take it (the row is then failed, with why)."""
    try:
        task.delay(row.pk)
    except (OperationalError, OSError) as exc:  # the broker is down or unreachable
        row.state, row.error = FAILED, f"the task queue did not take it: {exc}"
        row.save(update_fields=["state", "error"])
        return False
    return True

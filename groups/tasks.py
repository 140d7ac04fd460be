"""Celery tasks of reader groups: thin wrappers around services, idempotent, safe to retry.
Beat names them by these paths (`CELERY_BEAT_SCHEDULE` in cbrweb/settings.py)."""

from __future__ import annotations

from celery import shared_task

from groups import consuming, sampling


@shared_task
def periodic_checkpoints() -> int:
    """Checkpoint AUTOMATIC reader groups whose `checkpoint_interval_s` has passed (their
    acknowledgement cuts follow)."""
    return consuming.periodic_checkpoints()


@shared_task
def sample_rates() -> int:
    """The console's rates and backlog over time (`groups.sampling`)."""
    return sampling.take_samples()

"""The Celery app: configuration comes from Django settings (CELERY_*)."""

import os

from celery import Celery
from celery.signals import after_setup_logger, celeryd_init, worker_ready, worker_shutdown
from django.conf import settings

from cbrweb.routine_logs import quiet_routine_ticks
from ops.health import WorkerHeartbeat

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbrweb.settings")

app = Celery("cbrweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@after_setup_logger.connect
def _quiet_routine_ticks(**_):
    """Beat's routine ticks logged at DEBUG, not INFO (`cbrweb.routine_logs`)."""
    quiet_routine_ticks(entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values())


@celeryd_init.connect
def _note_queues(sender=None, options=None, **_):
    """The queues this worker consumes (`-Q`), kept in the app's configuration for its pool's
    processes (forked after), where `compaction.tasks` warms the compactor up."""
    queues = (options or {}).get("queues") or []
    app.conf.cbr_worker_queues = queues.split(",") if isinstance(queues, str) else list(queues)
    app.conf.cbr_worker_name = sender


@worker_ready.connect
def _start_heartbeat(**_):
    """The worker's heartbeat for /readyz (`ops.health`), from its main process."""
    queues = app.conf.get("cbr_worker_queues") or [app.conf.task_default_queue]
    app.conf.cbr_heartbeat = WorkerHeartbeat(app.conf.get("cbr_worker_name") or "worker", queues)
    app.conf.cbr_heartbeat.start()


@worker_shutdown.connect
def _stop_heartbeat(**_):
    heartbeat = app.conf.get("cbr_heartbeat")
    if heartbeat is not None:
        heartbeat.stop()

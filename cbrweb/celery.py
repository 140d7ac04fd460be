"""The Celery app: configuration comes from Django settings (CELERY_*)."""

import os
import threading

from celery import Celery
from celery.signals import celeryd_init, worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbrweb.settings")

app = Celery("cbrweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

_queues: list[str] = []


@celeryd_init.connect
def _note_queues(options=None, **_):
    """The queues this worker consumes (`-Q`), seen by its pool's processes (forked after)."""
    queues = (options or {}).get("queues") or []
    _queues[:] = queues.split(",") if isinstance(queues, str) else list(queues)


@worker_process_init.connect
def _warm_up_compactor(**_):
    """A pool process of the compactor (the worker of the compaction queue) starts its
    SparkSession and warms it up in the background (`compaction.runs.warm_up`); a run that
    arrives meanwhile shares the session. (Here the pool process has 4 s to start.)"""
    from django.conf import settings

    if settings.CBR_COMPACTION_WARM_UP and settings.CBR_COMPACTION_QUEUE in _queues:
        threading.Thread(target=_warm_up, name="compaction-warm-up", daemon=True).start()


def _warm_up():
    import logging
    import time

    from compaction.runs import warm_up

    log, started = logging.getLogger(__name__), time.monotonic()
    try:
        warm_up()
    except Exception:  # the first real run pays for it instead
        log.exception("the compaction warm-up failed")
    else:
        log.warning("compaction warm-up done in %.1f s", time.monotonic() - started)

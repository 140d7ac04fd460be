"""The Celery app: configuration comes from Django settings (CELERY_*)."""

import os

from celery import Celery
from celery.signals import celeryd_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbrweb.settings")

app = Celery("cbrweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@celeryd_init.connect
def _note_queues(options=None, **_):
    """The queues this worker consumes (`-Q`), kept in the app's configuration for its pool's
    processes (forked after), where `compaction.tasks` warms the compactor up."""
    queues = (options or {}).get("queues") or []
    app.conf.cbr_worker_queues = queues.split(",") if isinstance(queues, str) else list(queues)

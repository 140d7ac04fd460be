"""Beat's scheduler: django-celery-beat's database scheduler (schedules kept in the database,
edited in the console), recording its ticks for `/readyz` (`store.health`)."""

from __future__ import annotations

from django_celery_beat.schedulers import DatabaseScheduler

from store.health import BeatTicks


class Scheduler(DatabaseScheduler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._ticks = BeatTicks()

    def tick(self, *args, **kwargs):
        self._ticks.tick()
        return super().tick(*args, **kwargs)

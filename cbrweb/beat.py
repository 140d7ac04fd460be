"""Beat's scheduler: django-celery-beat's database scheduler (schedules kept in the database,
edited in the console), recording its ticks for `/readyz` (`ops.health`), and leaving alone
the entries an operator edited (`domain.schedules`): django-celery-beat writes the settings'
schedule over every entry each time beat starts, which undid a console edit at the next restart."""

from __future__ import annotations

from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from domain.schedules import EDITED
from ops.health import BeatTicks


class Scheduler(DatabaseScheduler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._ticks = BeatTicks()

    def tick(self, *args, **kwargs):
        self._ticks.tick()
        return super().tick(*args, **kwargs)

    def update_from_dict(self, mapping):
        edited = set(
            PeriodicTask.objects.filter(name__in=list(mapping), description__startswith=EDITED).values_list(
                "name", flat=True
            )
        )
        # the edited entries stay as the operator left them; the schedule reads them from the table
        super().update_from_dict({name: entry for name, entry in mapping.items() if name not in edited})

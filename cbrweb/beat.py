"""Beat's scheduler: django-celery-beat's database scheduler (schedules kept in the database,
edited in the console), recording its ticks for `/readyz` (`ops.health`), and leaving alone
the entries an operator edited (`domain.schedules`): django-celery-beat writes the settings'
schedule over every entry each time beat starts, which undid a console edit at the next restart.
An edited entry still takes the task path the settings name (a task that moved keeps running)."""

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
        edited = {
            task.name: task
            for task in PeriodicTask.objects.filter(name__in=list(mapping), description__startswith=EDITED)
        }
        # The edited entries keep the operator's interval and on/off; the schedule reads them from
        # the table. Which task an entry runs is never the operator's (the console does not change
        # it): it follows the settings, so an entry edited before its task moved (issue 39: what was
        # "streams.tasks.periodic_checkpoints" is `groups.tasks.periodic_checkpoints`) does not
        # go on naming a task no worker has.
        for name, task in edited.items():
            declared = mapping[name].get("task")
            if declared and task.task != declared:
                task.task = declared
                task.save(update_fields=["task"])  # its save tells a running beat to read the table again
        super().update_from_dict({name: entry for name, entry in mapping.items() if name not in edited})

"""Beat's schedules as operators change them, one service for the console (and any edge that
comes): every periodic task with its interval, on or off, and the settings' value it started
from; an interval or an on/off changed here is the operator's from then on (beat, when it starts,
writes the settings' values only into entries nobody edited: `cbrweb.beat.Scheduler`,
`domain.schedules`); put back, an entry follows the settings again. Checked by the domain
(`check_interval`): a refusal names the field."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from domain.errors import FieldError
from domain.schedules import check_interval, edited_note, is_edited

_PERIOD_S = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}


@dataclass(frozen=True)
class Schedule:
    """A periodic task as the console lists it."""

    task: PeriodicTask
    every_s: int | None  # None: a crontab, changed in the admin
    declared_s: float | None  # the settings' value (None: not declared there)
    edited: bool
    note: str


def declared() -> dict[str, float]:
    """Each periodic task's interval as the settings declare it (`CELERY_BEAT_SCHEDULE`)."""
    return {name: entry["schedule"] for name, entry in settings.CELERY_BEAT_SCHEDULE.items()}


def schedules() -> list[Schedule]:
    """Every periodic task, by name."""
    values = declared()
    return [
        Schedule(
            task=t,
            every_s=t.interval.every * _PERIOD_S.get(t.interval.period, 1) if t.interval else None,
            declared_s=values.get(t.name),
            edited=is_edited(t.description),
            note=t.description,
        )
        for t in PeriodicTask.objects.select_related("interval", "crontab").order_by("name")
    ]


def set_schedule(task: PeriodicTask, every_s: object, enabled: bool, by: str) -> int:
    """The task runs every `every_s` seconds (checked: `every_s` names the field), on or off, as
    `by` set it; the interval set."""
    if task.interval is None:  # a crontab (celery's result cleanup): not an interval to set here
        raise FieldError("every_s", "a crontab schedule, changed in the admin")
    every = check_interval(every_s)
    _save(task, every, enabled, edited_note(by, timezone.now().isoformat(timespec="seconds")))
    return every


def reset_schedule(task: PeriodicTask) -> int:
    """The task follows the settings again: their interval, on; the interval."""
    if task.interval is None:
        raise FieldError("reset", "a crontab schedule, changed in the admin")
    value = declared().get(task.name)
    if value is None:
        raise FieldError("reset", "this task has no value in the settings to go back to")
    every = int(value)
    _save(task, every, True, "")
    return every


def _save(task: PeriodicTask, every: int, enabled: bool, note: str) -> None:
    with transaction.atomic():
        task.interval, _ = IntervalSchedule.objects.get_or_create(every=every, period=IntervalSchedule.SECONDS)
        task.enabled, task.description = enabled, note
        task.save()

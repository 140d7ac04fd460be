"""Beat's schedules in the console: every periodic task with its interval, on or off, its last
run and how many times it ran; operators change the interval and switch a task on or off, and
put it back to the settings' value. An edited entry keeps its values when beat restarts
(`cbrweb.beat.Scheduler`, `domain.schedules`)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.db import transaction
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from access.permissions import can, console_access
from access.rules import Action
from domain.errors import FieldError
from domain.schedules import check_interval, edited_note, is_edited


def _declared() -> dict[str, float]:
    return {name: entry["schedule"] for name, entry in settings.CELERY_BEAT_SCHEDULE.items()}


@console_access({"GET": Action.VIEW})
def schedules(request):
    declared = _declared()
    rows = [
        {
            "task": t,
            "every_s": t.interval.every
            * {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}.get(t.interval.period, 1)
            if t.interval
            else None,
            "declared_s": declared.get(t.name),
            "edited": is_edited(t.description),
            "note": t.description,
        }
        for t in PeriodicTask.objects.select_related("interval", "crontab").order_by("name")
    ]
    return render(request, "console/schedules/list.html", {"rows": rows, "can_edit": can(request, Action.RUN_JOBS)})


@console_access({"POST": Action.RUN_JOBS})
def edit_schedule(request, pk):
    task = get_object_or_404(PeriodicTask.objects.select_related("interval"), pk=pk)
    if task.interval is None:  # a crontab (celery's result cleanup): not an interval to set here
        messages.error(request, f"{task.name}: a crontab schedule, changed in the admin")
        return redirect("console:schedules")
    reset = request.POST.get("reset") == "1"
    declared = _declared().get(task.name)
    try:
        if reset:
            if declared is None:
                raise FieldError("reset", "this task has no value in the settings to go back to")
            every = int(declared)
        else:
            every = check_interval(request.POST.get("every_s", ""))
    except FieldError as exc:
        messages.error(request, f"{task.name}: {exc.field}: {exc.message}")
        return redirect("console:schedules")
    with transaction.atomic():
        task.interval, _ = IntervalSchedule.objects.get_or_create(every=every, period=IntervalSchedule.SECONDS)
        if reset:
            task.enabled, task.description = True, ""
        else:
            task.enabled = request.POST.get("enabled") == "on"
            task.description = edited_note(request.user.username, timezone.now().isoformat(timespec="seconds"))
        task.save()
    state = "on" if task.enabled else "off"
    messages.success(request, f"{task.name}: every {every} s, {state}{' (the settings’ value)' if reset else ''}.")
    return redirect("console:schedules")

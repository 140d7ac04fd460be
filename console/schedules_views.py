"""Beat's schedules in the console: every periodic task with its interval, on or off, its last
run and how many times it ran; operators change the interval and switch a task on or off, and
put it back to the settings' value. Thin: `ops.schedules` does the work."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django_celery_beat.models import PeriodicTask

from access.permissions import can, console_access
from access.rules import Action
from domain.errors import FieldError
from ops import schedules as service
from streams.found import found_or_404


@console_access({"GET": Action.VIEW})
def schedules(request):
    rows = service.schedules()
    return render(request, "console/schedules/list.html", {"rows": rows, "can_edit": can(request, Action.RUN_JOBS)})


@console_access({"POST": Action.RUN_JOBS})
def edit_schedule(request, pk):
    task = found_or_404(PeriodicTask.objects.select_related("interval"), f"schedule {pk}", pk=pk)
    reset = request.POST.get("reset") == "1"
    try:
        if reset:
            every = service.reset_schedule(task)
        else:
            every = service.set_schedule(
                task, request.POST.get("every_s", ""), request.POST.get("enabled") == "on", request.user.username
            )
    except FieldError as exc:
        messages.error(request, f"{task.name}: {exc.field}: {exc.message}")
        return redirect("console:schedules")
    state = "on" if task.enabled else "off"
    messages.success(request, f"{task.name}: every {every} s, {state}{' (the settings’ value)' if reset else ''}.")
    return redirect("console:schedules")

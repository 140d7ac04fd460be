"""Beat's schedules edited in the console: an operator's interval and on/off survive a beat
restart (django-celery-beat rewrote every entry from the settings at each start), "back to the
settings" undoes the edit, viewers read only; and the admin shows segments, subscriptions and
checkpoints without offering to edit them."""

import factories
import pytest
from django_celery_beat.models import PeriodicTask
from page_text import text

from cbrweb.beat import Scheduler
from cbrweb.celery import app

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def keep_the_test_connection(monkeypatch):
    """The scheduler closes connections it takes for stale between ticks; inside a test's
    transaction that would close the test's own."""
    monkeypatch.setattr("django_celery_beat.schedulers.close_old_connections", lambda: None)


def beat_starts():
    Scheduler(app=app)  # what beat does when it starts: the settings' schedule into the table


def every(name: str) -> tuple[int, bool]:
    task = PeriodicTask.objects.select_related("interval").get(name=name)
    return task.interval.every, task.enabled


def test_an_edit_survives_a_beat_restart_and_goes_back_to_the_settings(operator_user, settings):
    beat_starts()
    declared = int(settings.CELERY_BEAT_SCHEDULE["retention-cycle"]["schedule"])
    assert every("retention-cycle") == (declared, True)
    operator = factories.console_client(operator_user)
    pk = PeriodicTask.objects.get(name="retention-cycle").pk
    answer = operator.post(f"/schedules/{pk}/", {"every_s": "120"})  # and off: the box unticked
    assert answer.status_code == 302
    page = text(operator.get("/schedules/").content.decode())
    assert "retention-cycle: every 120 s, off." in page and "edited by" in page
    PeriodicTask.objects.filter(name="seal-due-chunks").update(description="")  # untouched by anyone

    beat_starts()
    assert every("retention-cycle") == (120, False)
    assert every("seal-due-chunks")[0] == int(settings.CELERY_BEAT_SCHEDULE["seal-due-chunks"]["schedule"])

    operator.post(f"/schedules/{pk}/", {"reset": "1"})
    assert every("retention-cycle") == (declared, True)
    assert PeriodicTask.objects.get(name="retention-cycle").description == ""


def test_an_edited_entry_whose_task_moved_runs_the_task_where_it_is_now(operator_user, settings):
    """An installation upgraded from before the groups app: its edited "periodic-checkpoints"
    names "streams.tasks.periodic_checkpoints", which no worker has any more. Beat's start points
    it at the settings' task, and leaves the operator's interval and on/off alone."""
    # given: the entry as an older release wrote it, then edited by an operator
    beat_starts()
    operator = factories.console_client(operator_user)
    pk = PeriodicTask.objects.get(name="periodic-checkpoints").pk
    operator.post(f"/schedules/{pk}/", {"every_s": "45", "enabled": "on"})
    PeriodicTask.objects.filter(pk=pk).update(task="streams.tasks.periodic_checkpoints")

    # when
    beat_starts()

    # then
    task = PeriodicTask.objects.get(pk=pk)
    assert task.task == settings.CELERY_BEAT_SCHEDULE["periodic-checkpoints"]["task"]
    assert task.task == "groups.tasks.periodic_checkpoints"
    assert every("periodic-checkpoints") == (45, True)
    assert task.description.startswith("cbr:edited")


def test_every_scheduled_task_is_one_a_worker_has(settings):
    """Each task the settings schedule is registered with the Celery app (a moved task's old path
    in the schedule would be dropped by every worker as unregistered)."""
    app.loader.import_default_modules()
    for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
        assert entry["task"] in app.tasks, name


def test_refusals_and_roles(operator_user, plain_user):
    beat_starts()
    pk = PeriodicTask.objects.get(name="retention-cycle").pk
    before = every("retention-cycle")
    operator = factories.console_client(operator_user)
    answer = operator.post(f"/schedules/{pk}/", {"every_s": "0", "enabled": "on"}, follow=True)
    assert "every_s: must be between 1 and 604800 seconds" in text(answer.content.decode())
    assert every("retention-cycle") == before
    cleanup = PeriodicTask.objects.get(name="celery.backend_cleanup")  # celery's own, on a crontab
    answer = operator.post(f"/schedules/{cleanup.pk}/", {"every_s": "60", "enabled": "on"}, follow=True)
    assert "a crontab schedule, changed in the admin" in text(answer.content.decode())
    cleanup.refresh_from_db()
    assert cleanup.crontab is not None and cleanup.interval is None
    viewer = factories.console_client(plain_user)
    assert viewer.post(f"/schedules/{pk}/", {"every_s": "60"}).status_code == 403
    page = viewer.get("/schedules/").content.decode()
    assert "retention-cycle" in page and "Save" not in page


def test_the_admin_shows_segments_and_subscriptions_without_editing_them(admin_client, data_dir):
    stream = factories.make_stream("orders")
    sub = factories.subscribe(stream, "billing", {"0": 0})
    segment = stream.segments.get()
    assert admin_client.get("/admin/streams/segment/add/").status_code == 403
    assert admin_client.get("/admin/groups/subscription/add/").status_code == 403
    for url in (f"/admin/streams/segment/{segment.pk}/change/", f"/admin/groups/subscription/{sub.pk}/change/"):
        page = admin_client.get(url)
        assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
        assert admin_client.post(url, {"acknowledgement_cut": '{"0": 5}'}).status_code == 403
    sub.refresh_from_db()
    assert sub.acknowledgement_cut == {"0": 0}

"""Celery beat, on its own, schedules retention cycles that a real worker runs (docs/design/retention.md: the
cycle runs every CBR_RETENTION_INTERVAL, declared in code, kept in django-celery-beat's tables)."""

import os
import subprocess
import sys
import time

import pytest
from django.db import connection
from django_celery_beat.models import PeriodicTask

from domain.events import EventIn
from domain.policy_spec import parse_policy
from groups.models import ReaderGroup, Subscription
from integration.conftest import ROOT, _database_url
from retention import services as retention_services
from retention.models import RetentionCycle, TruncationRecord
from streams import logs, services
from streams.models import Scope

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_beat_schedules_the_cycle_and_the_worker_truncates(celery_worker, settings, tmp_path):
    settings.CBR_DATA_DIR = celery_worker.data_dir
    stream = retention_services.do_create_stream(
        scope="beat",
        name="orders",
        policy=parse_policy({"limit_type": "size", "min": 90, "max": 180, "consumption_based": True}),
    )
    services.do_publish(stream, [EventIn(b"x" * 30)] * 7)
    group = ReaderGroup.objects.create(
        scope=Scope.objects.get(name="beat"), name="A", retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT"
    )
    Subscription.objects.create(reader_group=group, stream=stream, acknowledgement_cut={"0": 3})

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
        "DATABASE_URL": _database_url(connection.settings_dict),
        "REDIS_URL": celery_worker.broker_url,
        "CBR_DATA_DIR": str(celery_worker.data_dir),
        "CBR_RETENTION_INTERVAL": "2",  # the schedule beat installs from the settings
    }
    log = open(tmp_path / "beat.log", "w")
    beat = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "cbrweb",
            "beat",
            "-l",
            "info",
            "-s",
            str(tmp_path / "beat-schedule"),
            "--max-interval",
            "1",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        # the record is written mid-cycle: wait for the cycle to be done too
        while not (
            TruncationRecord.objects.filter(stream=stream).exists()
            and RetentionCycle.objects.filter(trigger="beat", state="done").exists()
        ):
            assert beat.poll() is None, (tmp_path / "beat.log").read_text()[-2000:]
            assert time.monotonic() < deadline, (tmp_path / "beat.log").read_text()[-2000:]
            time.sleep(0.5)
    finally:
        beat.terminate()
        beat.wait(20)
        log.close()

    # the schedule lives in the database, where the console edits it
    task = PeriodicTask.objects.get(name="retention-cycle")
    assert task.task == "retention.tasks.run_retention_cycle" and task.interval.every == 2
    record = TruncationRecord.objects.get(stream=stream)
    assert (record.trigger, record.rule, record.after_cut) == ("beat", "cbr:case-i:slb", {"0": 3})
    assert RetentionCycle.objects.filter(trigger="beat", state="done").exists()
    assert logs.stream_log(stream).head_cut() == {"0": 3}

"""Celery's lines about beat's routine ticks are DEBUG, not INFO (cbrweb/routine_logs.py): at
`-l info` `make run` prints none of them, a tick that fails still prints its error, and the lines
of any other task stay."""

import logging

import pytest
from celery.app import trace
from django.conf import settings

from cbrweb.celery import _quiet_routine_ticks
from cbrweb.routine_logs import LOGGERS, RoutineTicks

ROUTINE = "streams.tasks.delayed_maintenance"
OTHER = "compaction.tasks.compact_stream"


@pytest.fixture
def celery_loggers():
    """The filter as a worker's and beat's logging set-up puts it; taken off afterwards."""
    _quiet_routine_ticks()
    yield
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for f in [f for f in logger.filters if isinstance(f, RoutineTicks)]:
            logger.removeFilter(f)


def lines_celery_writes(task: str) -> None:
    """The lines Celery writes for a tick, with its own loggers and formats (the last when the
    tick expired before a worker took it)."""
    logging.getLogger("celery.beat").info("Scheduler: Sending due task %s (%s)", "a-tick", task)
    logging.getLogger("celery.worker.strategy").info(trace.LOG_RECEIVED, {"name": task, "id": "1"})
    logging.getLogger("celery.app.trace").info(
        trace.LOG_SUCCESS, {"name": task, "id": "1", "runtime": 0.01, "return_value": None}
    )
    logging.getLogger("celery.worker.request").info("Discarding revoked task: %s[%s]", task, "2")


def test_the_routine_ticks_of_the_beat_schedule_are_quiet_at_info(celery_loggers, caplog):
    assert ROUTINE in {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    caplog.set_level(logging.INFO)
    lines_celery_writes(ROUTINE)
    assert caplog.records == []

    lines_celery_writes(OTHER)  # a task beat does not tick: as Celery writes it
    assert [r.getMessage() for r in caplog.records] == [
        f"Scheduler: Sending due task a-tick ({OTHER})",
        f"Task {OTHER}[1] received",
        f"Task {OTHER}[1] succeeded in 0.01s: None",
        f"Discarding revoked task: {OTHER}[2]",
    ]


def test_a_failing_tick_still_says_so(celery_loggers, caplog):
    caplog.set_level(logging.INFO)
    logging.getLogger("celery.app.trace").error(
        trace.LOG_FAILURE, {"name": ROUTINE, "id": "1", "exc": "boom", "description": "raised unexpected"}
    )
    assert [r.levelname for r in caplog.records] == ["ERROR"]


def test_at_debug_they_are_shown_as_debug_lines(celery_loggers, caplog):
    caplog.set_level(logging.DEBUG)
    lines_celery_writes(ROUTINE)
    assert [r.levelname for r in caplog.records] == ["DEBUG"] * 4

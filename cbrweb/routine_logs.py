"""Celery's lines about beat's routine ticks, at DEBUG rather than INFO.

Beat sends its periodic tasks every few seconds (delayed maintenance, checkpoints, sampling …),
and at INFO Celery writes three lines for each (beat's "Sending due task", the worker's
"received" and "succeeded"): most of what `make run` printed, scrolling away what a person needs
(the admin's password, an error). Those lines of the tasks `CELERY_BEAT_SCHEDULE` names are
written at DEBUG (`-l debug` shows them again). A tick that fails is still an ERROR, and what a
task logs itself (a retention cycle's truncations) is untouched."""

from __future__ import annotations

import logging
from collections.abc import Iterable

# the loggers Celery writes those lines with (and "Discarding revoked task", a tick that expired
# before a busy worker took it)
LOGGERS = ("celery.beat", "celery.worker.strategy", "celery.app.trace", "celery.worker.request")


class RoutineTicks(logging.Filter):
    def __init__(self, tasks: Iterable[str]):
        super().__init__()
        self.tasks = frozenset(tasks)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO or not self._about_a_tick(record):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)

    def _about_a_tick(self, record: logging.LogRecord) -> bool:
        """Whether the line names a routine task: Celery's worker lines carry a dict with its
        `name`; beat's "Sending due task %s (%s)" and "Discarding revoked task: %s[%s]" name it
        among their arguments."""
        args = record.args
        if isinstance(args, dict):
            return args.get("name") in self.tasks
        return isinstance(args, tuple) and any(isinstance(a, str) and a in self.tasks for a in args)


def quiet_routine_ticks(tasks: Iterable[str]) -> None:
    """Put the filter on Celery's loggers (once: a second call replaces the first)."""
    routine = RoutineTicks(tasks)
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, RoutineTicks)]:
            logger.removeFilter(old)
        logger.addFilter(routine)

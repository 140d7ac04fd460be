"""A waiting read that holds no thread: what the read view and the ASGI front (`cbrweb.front`)
say to each other. The front runs the Django application in its threads and marks a request it
can park (`PARK` in the WSGI environ). A read that finds nothing answers `Parked` instead of
waiting in its thread: the front waits for its wake-up without a thread, then calls its `resume`
in a thread, which reads once more and answers as the view would have (the carried ack applied
once, by the first pass), or parks again. The request went through authentication and the
middleware once; a parked read keeps only what its next pass needs (the group and its
positions, the request's arguments), a few kilobytes. Without the front (a WSGI server, the tests'
client) `PARK` is absent and the read waits in its thread."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.http import HttpResponse

from domain.errors import FieldError
from streams import waking

PARK = "cbr.park"  # in the environ: this server can park a read


class Parked(HttpResponse):
    """A read's answer when it found nothing and may wait without its thread: the front waits
    for `wait` (`streams.waking.Wait`), then calls `resume(cause)` in a thread for
    the answer (or another `Parked`). Never sent to a client. Reads that can be read once more
    together (one pass for many groups: `consuming.read_woken`) say how (`together`)."""

    # many parked reads of this kind read once more in one call: their answers, in order
    together: Callable[[list[Parked], list[str]], list[HttpResponse | Exception]] | None = None

    def __init__(self, wait: Any, resume: Callable[[str], HttpResponse] | None = None):
        super().__init__(status=202)
        self.wait = wait
        self._resume = resume

    def resume(self, cause: str) -> HttpResponse:
        """The read once more, in a thread of the front's: as a request's would, with the
        database connections checked before and tidied after."""
        return resume_all([self], [cause])[0]  # type: ignore[return-value]


def resume_all(parked: list[Parked], causes: list[str], tidy: bool = True) -> list[HttpResponse | Exception]:
    """Woken reads read once more, in a thread of the front's, as requests would be (database
    connections checked before, tidied after; `tidy=False`: the caller tidies them, once the
    answers are on their way): those of a kind that reads together in one call each, the others
    one by one. Each read's answer, or what it raised (a bug: the front answers it as Django
    answers one)."""
    close_old_connections()
    try:
        out: list[HttpResponse | Exception | None] = [None] * len(parked)
        kinds: dict[Any, list[int]] = defaultdict(list)
        for i, read in enumerate(parked):
            kinds[type(read).together].append(i)
        for together, which in kinds.items():
            try:
                if together is None:
                    answers = [_one(parked[i], causes[i]) for i in which]
                else:
                    answers = together([parked[i] for i in which], [causes[i] for i in which])
            except Exception as exc:  # noqa: BLE001 - answered by the front, as a bug
                answers = [exc] * len(which)
            for i, answer in zip(which, answers, strict=True):
                out[i] = answer
        return out  # type: ignore[return-value]
    finally:
        if tidy:
            close_old_connections()


def _one(read: Parked, cause: str) -> HttpResponse | Exception:
    try:
        assert read._resume is not None, "a parked read says how it reads again"
        return read._resume(cause)
    except Exception as exc:  # noqa: BLE001 - answered by the front, as a bug
        return exc


def check_room_to_wait() -> None:
    """A process holds at most `CBR_MAX_WAITING_READS` waiting reads: past it, a read that would
    wait is refused at once (503, `Retry-After`) rather than stalling anything else."""
    if waking.listener().count >= settings.CBR_MAX_WAITING_READS:
        raise FieldError(
            "wait_ms",
            f"this server process holds {settings.CBR_MAX_WAITING_READS} waiting reads already "
            "(CBR_MAX_WAITING_READS); retry, or read without waiting",
            "too_many_waiting_reads",
        )

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

import itertools
import logging
import queue
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.http import HttpResponse, StreamingHttpResponse

from domain.errors import FieldError
from streams import waking

log = logging.getLogger(__name__)
PARK = "cbr.park"  # in the environ: this server can park a read


class ReadyAnswer:
    """A woken read's answer (200, JSON or binary), for the front (or `waited`) to send: what it
    reads of a response — its status, its headers, its body — without Django's response object,
    whose making was a tenth of a woken read's time in the pass (its headers' mapping, its
    charset, its content's setter), for an answer that never goes back through Django."""

    __slots__ = ("content", "content_type")
    status_code = 200

    def __init__(self, content: bytes, content_type: str):
        self.content = content
        self.content_type = content_type

    def items(self) -> list[tuple[str, str]]:
        return [("Content-Type", self.content_type)]

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.content_type if name.lower() == "content-type" else default


Answer = HttpResponse | ReadyAnswer  # what a woken read is answered


class Parked(HttpResponse):
    """A read's answer when it found nothing and may wait without its thread: the front waits
    for `wait` (`streams.waking.Wait`), then calls `resume(cause)` in a thread for
    the answer (or another `Parked`). Never sent to a client. Reads that can be read once more
    together (one pass for many groups: `consuming.read_woken`) say how (`together`)."""

    # many parked reads of this kind read once more in one call: their answers, in order
    together: Callable[[list[Parked], list[str]], list[Answer | Exception]] | None = None

    def __init__(self, wait: Any, resume: Callable[[str], HttpResponse] | None = None):
        super().__init__(status=202)
        self.wait = wait
        self._resume = resume

    def resume(self, cause: str) -> HttpResponse:
        """The read once more, in a thread of the front's: as a request's would, with the
        database connections checked before and tidied after."""
        return resume_all([self], [cause])[0]  # type: ignore[return-value]


def resume_all(parked: list[Parked], causes: list[str], tidy: bool = True) -> list[Answer | Exception]:
    """Woken reads read once more, in a thread of the front's, as requests would be (database
    connections checked before, tidied after; `tidy=False`: the caller tidies them, once the
    answers are on their way): those of a kind that reads together in one call each, the others
    one by one. Each read's answer, or what it raised (a bug: the front answers it as Django
    answers one)."""
    close_old_connections()
    try:
        return read_again(parked, causes)
    finally:
        if tidy:
            close_old_connections()


def read_again(parked: list[Parked], causes: list[str]) -> list[Answer | Exception]:
    """`resume_all` without the database connections' care (the caller's): those of a kind that
    reads together in one call each, the others one by one."""
    out: list[Answer | Exception | None] = [None] * len(parked)
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


def _one(read: Parked, cause: str) -> Answer | Exception:
    try:
        assert read._resume is not None, "a parked read says how it reads again"
        return read._resume(cause)
    except Exception as exc:  # noqa: BLE001 - answered by the front, as a bug
        return exc


def check_room_to_wait(taken: int = 0) -> None:
    """A process holds at most `CBR_MAX_WAITING_READS` waiting reads: past it, a read that would
    wait is refused at once (503, `Retry-After`) rather than stalling anything else. `taken`:
    reads of the same request already let in, not yet waiting."""
    if waking.listener().count + taken >= settings.CBR_MAX_WAITING_READS:
        raise FieldError(
            "wait_ms",
            f"this server process holds {settings.CBR_MAX_WAITING_READS} waiting reads already "
            "(CBR_MAX_WAITING_READS); retry, or read without waiting",
            "too_many_waiting_reads",
        )


class ManyReads(StreamingHttpResponse):
    """The answer to many reads sent in one request (`api.many_reads`): one line of JSON per
    read as each is answered (`line`), in the order they are answered; the answer ends when
    every read has one. `answers`: each read's index and its first answer, a `Parked` for a read
    that waits. The ASGI front waits for the parked ones without a thread, as for a lone read
    (`cbrweb.front`); without it (a WSGI server, the tests' client) this answer waits for them in
    its thread as it is sent (`waited`)."""

    def __init__(self, answers: list[tuple[int, Answer | Exception]]):
        super().__init__(waited(answers), content_type=MANY_READS_MEDIA_TYPE)
        self.answers = answers


MANY_READS_MEDIA_TYPE = "application/x-ndjson"
_SERVER_ERROR = b'{"code":"server_error","message":"the server failed to answer this read"}'


def line(n: int, status: int, content: bytes, retry_after: str | None = None) -> bytes:
    """One read's answer in a `ManyReads`: `{"read": n, "status": s, "answer": <the lone read's
    answer>}` and, when the answer says when to retry, `"retry_after"` (seconds)."""
    more = b',"retry_after":%d' % int(retry_after) if retry_after and retry_after.isdigit() else b""
    return b'{"read":%d,"status":%d%s,"answer":%s}\n' % (n, status, more, content)


def answer_line(n: int, response: Answer | Exception) -> bytes:
    """`line` of a read's final answer (an exception: a bug, answered as Django answers one)."""
    if isinstance(response, Exception):
        log.error("one of many reads failed", exc_info=response)
        return line(n, 500, _SERVER_ERROR)
    return line(n, response.status_code, response.content, response.get("Retry-After"))


def waited(answers: list[tuple[int, Answer | Exception]]) -> Iterator[bytes]:
    """In the request's thread: each read's line, the parked ones once woken (or their wait
    over) and read again, as the front does without a thread."""
    wakeups: queue.SimpleQueue[tuple[int, int, str]] = queue.SimpleQueue()
    listener = waking.listener()
    waiting: dict[int, tuple[Parked, waking.Waiter, float]] = {}

    def park(n: int, parked: Parked) -> None:
        wait = parked.wait
        token = next(tokens)
        waiter = listener.park(wait.channels, wait.group, wait.seen, lambda cause: wakeups.put((n, token, cause)))
        waiting[n] = (parked, waiter, time.monotonic() + wait.timeout_s)
        waiters[n] = token

    tokens = itertools.count()
    waiters: dict[int, int] = {}
    try:
        for n, response in answers:
            if isinstance(response, Parked):
                park(n, response)
            else:
                yield answer_line(n, response)
        while waiting:
            now = time.monotonic()
            causes: dict[int, str] = {}
            try:
                woken = [wakeups.get(timeout=max(0.0, min(due for _, _, due in waiting.values()) - now))]
            except queue.Empty:
                woken = []
            while not wakeups.empty():
                woken.append(wakeups.get_nowait())
            for n, token, cause in woken:
                if n in waiting and waiters[n] == token:
                    causes[n] = cause
            now = time.monotonic()
            for n, (_, _, due) in waiting.items():
                if due <= now and n not in causes:
                    causes[n] = "timeout"
            which = list(causes)
            for n in which:
                listener.unpark(waiting[n][1])
            parked = [waiting.pop(n)[0] for n in which]
            for n, response in zip(which, read_again(parked, [causes[n] for n in which]), strict=True):
                if isinstance(response, Parked):
                    park(n, response)
                else:
                    yield answer_line(n, response)
    finally:
        for _, waiter, _ in waiting.values():
            listener.unpark(waiter)

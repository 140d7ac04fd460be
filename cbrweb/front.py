"""The web process's front (ASGI, under uvicorn's worker in gunicorn): it runs the Django
application (WSGI) in a pool of threads, as a threaded WSGI server would, and parks the reads that
wait (`api.parking`) without a thread: a waiting read costs its socket and an entry in the
process's wake-up table (`streams.waking`), so thousands may wait while the threads serve
publishes, acks, health checks and the console.

A request goes to a thread with its body read from the connection as the application asks for it;
a small body of known length (`READ_AHEAD_BYTES`, a publish of a few events) is read whole on the
loop first, so its thread does not hop to the loop and back for it.
A read answered `Parked` is not sent: the front waits for what it waits for (a wake-up, its due
time, the end of its wait), or for the client to go away (then nothing more is done: a parked read
holds no lease), and calls its `resume` in a thread, which reads once more. Any other answer is
sent as it is; a streamed one chunk by chunk from its thread.

It must never run the application on the event loop's thread, nor hold a thread while a read
waits. The connection's `CBR_WEB_KEEPALIVE_REQUESTS`-th answer closes it (`cbrweb.gunicorn_conf`
says why)."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

from django.db import close_old_connections
from django.http import HttpResponse

from api.parking import MANY_READS_MEDIA_TYPE, PARK, Answer, ManyReads, Parked, answer_line, line, resume_all
from cbrweb.body_limit import after_large_body
from cbrweb.url_limit import url_bytes
from streams import waking

log = logging.getLogger(__name__)
_CONNECTIONS_KEPT = 50_000  # connections whose requests are counted (the oldest forgotten first)
# A body of known length up to this is read on the loop before its request goes to a thread:
# asked for by the thread, each piece cost a hop to the loop and back (~0.07 ms of a one-event
# publish, more when the loop's core was idle). Far below any `CBR_MAX_REQUEST_BYTES`
# (cbrweb/body_limit.py refuses a longer body unread); a larger one is read as the thread asks.
READ_AHEAD_BYTES = 64 * 1024
_RESUMING = 2  # calls reading woken reads at once (one may wait on Redis or the database)
_TOGETHER = 1000  # woken reads read together in one call at most
_QUIET_FROM = 64  # woken reads read together from which the collector waits for the call's end


class Front:
    """`Front(wsgi_app, threads, keepalive_requests)`: the ASGI application."""

    def __init__(
        self,
        wsgi_app: Callable,
        threads: int,
        keepalive_requests: int = 0,
        lane: Lane | None = None,
    ):
        self.app = wsgi_app
        self.lane = lane
        self.threads = threads
        self.keepalive_requests = keepalive_requests
        self.pool: ThreadPoolExecutor | None = None
        self.requests_on: OrderedDict[tuple, int] = OrderedDict()  # connection -> requests so far
        self.woken: list[_Woken] = []  # woken reads waiting for a thread (`_resume`)
        self.resuming = 0  # calls reading woken reads now
        self.wakeups: _Wakeups | None = None  # the loop's, from the listener's thread

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Callable, send: Callable) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.pool is not None:
                    self.pool.shutdown(wait=False, cancel_futures=True)
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _start(self) -> ThreadPoolExecutor:
        if self.pool is None:
            self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix="cbr-web")
        return self.pool

    async def _http(self, scope: dict, receive: Callable, send: Callable) -> None:
        loop = asyncio.get_running_loop()
        pool = self._start()
        body = _Body(receive, loop)
        environ = _environ(scope, body)
        environ[PARK] = True
        if 0 < _content_length(environ) <= READ_AHEAD_BYTES:
            await body.read_ahead()
        close = self._last_on_connection(scope)
        whole = body.whole() if self.lane is not None and self.lane.takes(environ) else None
        if whole is not None and len(whole) != _content_length(environ):
            whole = None  # the client went away mid-body: the application says what that is
        gone: asyncio.Future | None = None
        try:
            answered = loop.create_future()
            job = loop.run_in_executor(pool, self._run, environ, send, loop, close, answered, whole)
            job.add_done_callback(functools.partial(_finished, answered))
            answer = await answered
            if isinstance(answer, tuple) and isinstance(answer[0], ManyReads):
                await self._many(answer[0], answer[1], send, body, receive, close)
                return
            while isinstance(answer, tuple) and isinstance(answer[0], Parked):
                parked, middleware_headers = answer
                if gone is None:
                    gone = asyncio.ensure_future(_disconnected(body, receive))
                cause = await _parked(parked, self._wakeups(loop), gone)
                if cause is None:  # the client went away: nothing more to do
                    return
                answer = await self._resume(_Woken(parked, cause, middleware_headers, close, loop.create_future()))
            if answer is not None:
                status, headers, content = answer
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": content})
        finally:
            if gone is not None and not gone.done():
                gone.cancel()

    async def _many(
        self, many: ManyReads, middleware_headers: list, send: Callable, body: _Body, receive: Callable, close: bool
    ) -> None:
        """Many reads of one request (`api.many_reads`): each read's line sent as soon as it has
        one, those that wait parked each as a lone read is (woken, read again with the others
        woken about the same time: `_ManyWaits`); the answer ends once every read has its line.
        Lines made in one turn of the loop go out in one write. The client gone, nothing more is
        done."""
        loop = asyncio.get_running_loop()
        headers = _headers([*middleware_headers, ("Content-Type", MANY_READS_MEDIA_TYPE)], close)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        lines = _Lines(send)
        writer = asyncio.ensure_future(lines.run())
        gone = asyncio.ensure_future(_disconnected(body, receive))
        waits = _ManyWaits(self, loop, lines)
        try:
            for n, response in many.answers:
                if isinstance(response, Parked):
                    waits.park(n, response)
                else:
                    lines.add(answer_line(n, response))
            waits.check_done()
            gone.add_done_callback(lambda _: waits.leave())
            await waits.done
            lines.close()
            await writer
            if not gone.done():
                await send({"type": "http.response.body", "body": b""})
        finally:
            waits.leave()
            for task in (gone, writer):
                if not task.done():
                    task.cancel()

    def _resume(self, woken: _Woken) -> asyncio.Future:
        """A woken read's answer, to come: read once more in a thread with the others woken about
        the same time (one pass for many groups' reads: `api.parking.resume_all`). At most
        `_RESUMING` such calls run at once; reads woken meanwhile wait for the next, so that a
        publish that wakes thousands of reads is read in a few large passes, and a lone read at
        once."""
        self.woken.append(woken)
        self._resume_more(asyncio.get_running_loop())
        return woken.answer

    def _resume_more(self, loop: asyncio.AbstractEventLoop) -> None:
        while self.woken and self.resuming < _RESUMING:
            batch, self.woken = self.woken[:_TOGETHER], self.woken[_TOGETHER:]
            self.resuming += 1
            task = loop.run_in_executor(self._start(), _resumed, batch, loop)
            task.add_done_callback(functools.partial(self._hand_back, batch, loop))

    def _hand_back(self, batch: list[_Woken], loop: asyncio.AbstractEventLoop, task: asyncio.Future) -> None:
        """A call's answers to the reads that wait for them; then the next call, if any waits."""
        self.resuming -= 1
        error = RuntimeError("the server is stopping") if task.cancelled() else task.exception()
        if error is not None:
            answers = [
                _answer(woken, error if isinstance(error, Exception) else RuntimeError(error)) for woken in batch
            ]
        else:
            answers = task.result()
        for woken, answer in zip(batch, answers, strict=True):
            if not woken.answer.done():
                woken.answer.set_result(answer)
        self._resume_more(loop)

    def _wakeups(self, loop: asyncio.AbstractEventLoop) -> _Wakeups:
        if self.wakeups is None or self.wakeups.loop is not loop:
            self.wakeups = _Wakeups(loop)
        return self.wakeups

    def _last_on_connection(self, scope: dict) -> bool:
        """Whether this request's answer closes its connection (the n-th on it)."""
        if not self.keepalive_requests or scope.get("client") is None:
            return False
        key = (tuple(scope["client"]), tuple(scope.get("server") or ()))
        n = self.requests_on.pop(key, 0) + 1
        if n >= self.keepalive_requests:
            return True
        self.requests_on[key] = n
        while len(self.requests_on) > _CONNECTIONS_KEPT:
            self.requests_on.popitem(last=False)
        return False

    def _run(
        self,
        environ: dict,
        send: Callable,
        loop: asyncio.AbstractEventLoop,
        close: bool,
        answered: asyncio.Future,
        whole: bytes | None = None,
    ) -> Any:
        """In a thread: the application's answer. A parked read's `Parked`, with the headers the
        middleware gave it; a streamed answer is sent from here, chunk by chunk (None returned);
        any other is handed whole (status, headers, body) to the loop to send as soon as it is
        made (`answered`), before Django's end of the request (`request_finished`: its
        connections tidied) and the memory trim of a large body, which follow in this thread.
        A request the lane takes (`whole`: its body, read whole) is answered by the lane when it
        can, by the application otherwise."""
        if whole is not None and self.lane is not None:
            close_old_connections()  # as Django's start of a request does
            response = self.lane.answer(environ, whole)
            if response is not None:
                try:
                    return self._lane_answer(response, loop, close, answered)
                finally:
                    close_old_connections()  # and its end
        started: list = []

        def start_response(status: str, headers: list, exc_info: Any = None) -> Callable:
            if exc_info is not None and started:
                raise exc_info[1].with_traceback(exc_info[2])
            started[:] = [status, headers]
            return _no_write

        result = self.app(environ, start_response)
        try:
            if isinstance(result, (Parked, ManyReads)):
                return result, [(k, v) for k, v in started[1] if k.lower() not in _OWN_HEADERS]
            status = int(started[0].split(" ", 1)[0])
            headers = _headers(started[1], close)
            if not getattr(result, "streaming", False) and not hasattr(result, "file_to_stream"):
                answer = _whole(status, headers, b"".join(result))
                loop.call_soon_threadsafe(_settle, answered, answer)
                return answer

            def blocking(message: dict) -> None:
                asyncio.run_coroutine_threadsafe(send(message), loop).result()

            blocking({"type": "http.response.start", "status": status, "headers": headers})
            for chunk in result:
                if chunk:
                    blocking({"type": "http.response.body", "body": chunk, "more_body": True})
            blocking({"type": "http.response.body", "body": b""})
            return None
        finally:
            close_result = getattr(result, "close", None)
            if close_result is not None:
                close_result()  # Django's request_finished: this thread's connections are tidied
            after_large_body(environ)

    @staticmethod
    def _lane_answer(
        response: HttpResponse, loop: asyncio.AbstractEventLoop, close: bool, answered: asyncio.Future
    ) -> Any:
        if isinstance(response, Parked):
            return response, [(k, v) for k, v in response.items() if k.lower() not in _OWN_HEADERS]
        answer = _whole(response.status_code, _headers(list(response.items()), close), response.content)
        loop.call_soon_threadsafe(_settle, answered, answer)
        return answer


@dataclass
class Lane:
    """The API's hot requests answered without Django's request handling (`api.lane`), for
    requests within the application's limits: a body read whole on the loop, up to `max_body`
    bytes, a URL up to `max_url` bytes (longer ones Django's wrappers refuse)."""

    answer: Callable[[dict, bytes], HttpResponse | None]
    max_body: int
    max_url: int

    def takes(self, environ: dict) -> bool:
        return (
            environ["REQUEST_METHOD"] == "POST"
            and 0 < _content_length(environ) <= min(self.max_body, READ_AHEAD_BYTES)
            and url_bytes(environ) <= self.max_url
        )


_SERVER_ERROR = b'{"code":"server_error","message":"the server failed to answer this read"}'
_OWN_HEADERS = {"content-type", "content-length"}  # a resumed read's answer has its own


def _headers(pairs: list, close: bool) -> list[tuple[bytes, bytes]]:
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in pairs]
    if close:
        headers.append((b"connection", b"close"))
    return headers


def _whole(status: int, headers: list[tuple[bytes, bytes]], content: bytes) -> tuple:
    if not any(name == b"content-length" for name, _ in headers):
        headers.append((b"content-length", str(len(content)).encode()))
    return status, headers, content


@dataclass
class _Woken:
    """A parked read woken, to be read once more (`Front._resume`)."""

    parked: Parked
    cause: str
    middleware_headers: list
    close: bool
    answer: asyncio.Future  # what `_answer` makes of its response


def _resumed(batch: list[_Woken], loop: asyncio.AbstractEventLoop) -> list[tuple]:
    """In a thread: woken reads read once more, together (`api.parking.resume_all`). Their
    answers go to the loop as soon as they are made, before the thread's connections are tidied
    (as a request's answer goes before Django's end of the request)."""
    try:
        with _COLLECTOR.quiet(len(batch) >= _QUIET_FROM):
            responses = resume_all([woken.parked for woken in batch], [woken.cause for woken in batch], tidy=False)
            answers = [_answer(woken, response) for woken, response in zip(batch, responses, strict=True)]
        loop.call_soon_threadsafe(_settle_each, batch, answers)
        return answers
    finally:
        close_old_connections()


class _Collector:
    """The garbage collector kept waiting while a call reads many woken reads together. Such a
    call holds every read's objects until its answers are made (a thousand reads' worth): they
    survive young collections and are walked again by each older one, which found nothing to
    free (80-160 ms each in a 10 000-group fan-out, seen with a collector callback; a 1 000-read
    pass costs 15 % less CPU with the collector waiting: bench/RESULTS.md). Reference counting still frees what they drop; what cycles they leave are
    collected once no such call runs (a second or so), not lost. Whoever turned the collector
    off before is obeyed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holding = 0
        self.was_enabled = True

    @contextmanager
    def quiet(self, wanted: bool) -> Iterator[None]:
        if not wanted:
            yield
            return
        with self.lock:
            if self.holding == 0:
                self.was_enabled = gc.isenabled()
                gc.disable()
            self.holding += 1
        try:
            yield
        finally:
            with self.lock:
                self.holding -= 1
                if self.holding == 0 and self.was_enabled:
                    gc.enable()


_COLLECTOR = _Collector()


def _settle_each(batch: list[_Woken], answers: list[tuple]) -> None:
    for woken, answer in zip(batch, answers, strict=True):
        _settle(woken.answer, answer)


def _answer(woken: _Woken, response: Answer | Exception) -> tuple:
    """A woken read's response: parked again (with the same headers), or its answer, with the
    headers the middleware gave the request."""
    middleware_headers, close = woken.middleware_headers, woken.close
    if isinstance(response, Exception):  # a bug: answered as Django answers one, never a dropped connection
        log.error("a waiting read failed when woken", exc_info=response)
        return _whole(500, _headers([("Content-Type", "application/json")], close), _SERVER_ERROR)
    if isinstance(response, Parked):
        return response, middleware_headers
    own = list(response.items())
    names = {k.lower() for k, _ in own}
    pairs = [(k, v) for k, v in middleware_headers if k.lower() not in names] + own
    return _whole(response.status_code, _headers(pairs, close), response.content)


async def _parked(answer: Parked, wakeups: _Wakeups, gone: asyncio.Future) -> str | None:
    """Wait, holding no thread, for what the parked read waits for; the cause ("timeout" when
    nothing came), or None when the client went away first."""
    wait = answer.wait
    woken: asyncio.Future = wakeups.loop.create_future()

    def wake(cause: str) -> None:  # from the listener's thread
        wakeups.add(woken, cause)

    listener = waking.listener()
    waiter = listener.park(wait.channels, wait.group, wait.seen, wake)
    try:
        await asyncio.wait({woken, gone}, timeout=wait.timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        listener.unpark(waiter)
    if gone.done():
        return None
    return woken.result() if woken.done() else "timeout"


class _ManyWaits:
    """The parked reads of one request of many reads (`Front._many`). Each waits as a lone read
    does — for the listener's wake-up, its timer, or the client's leaving — and is read again with
    the other reads woken about the same time (`Front._resume`), but without a task or an
    `asyncio.wait` of its own: its wake-up and its timer call `_woken`, its answer's future calls
    `_answered` (a fan-out to ten thousand of them costs the loop a few calls each)."""

    def __init__(self, front: Front, loop: asyncio.AbstractEventLoop, lines: _Lines):
        self.front, self.loop, self.lines = front, loop, lines
        self.wakeups = front._wakeups(loop)
        self.listener = waking.listener()
        self.waiting: dict[int, tuple[Parked, waking.Waiter, asyncio.TimerHandle]] = {}
        self.resuming = 0  # reads being read again now
        self.gone = False
        self.done = loop.create_future()  # every read has its line, or the client went away

    def park(self, n: int, parked: Parked) -> None:
        wait = parked.wait
        woken = functools.partial(self._woken, n, parked)
        waiter = self.listener.park(wait.channels, wait.group, wait.seen, functools.partial(self.wakeups.add, woken))
        self.waiting[n] = (parked, waiter, self.loop.call_later(wait.timeout_s, woken, "timeout"))

    def _woken(self, n: int, parked: Parked, cause: str) -> None:
        entry = self.waiting.get(n)
        if entry is None or entry[0] is not parked:  # its timer and its wake-up both came; or it left
            return
        del self.waiting[n]
        _, waiter, timer = entry
        timer.cancel()
        self.listener.unpark(waiter)
        answer = self.loop.create_future()
        answer.add_done_callback(functools.partial(self._answered, n))
        self.resuming += 1
        self.front._resume(_Woken(parked, cause, [], False, answer))

    def _answered(self, n: int, future: asyncio.Future) -> None:
        self.resuming -= 1
        if self.gone:
            return
        if future.cancelled():
            self.lines.add(answer_line(n, RuntimeError("the server is stopping")))
        elif isinstance(future.result()[0], Parked):
            self.park(n, future.result()[0])
        else:
            status, headers, content = future.result()
            retry_after = next((v.decode("latin-1") for k, v in headers if k == b"retry-after"), None)
            self.lines.add(line(n, status, content, retry_after))
        self.check_done()

    def check_done(self) -> None:
        if not self.waiting and not self.resuming:
            _settle(self.done, None)

    def leave(self) -> None:
        """The client went away (or the answer ended): nothing more is waited for."""
        self.gone = True
        for _, waiter, timer in self.waiting.values():
            timer.cancel()
            self.listener.unpark(waiter)
        self.waiting.clear()
        _settle(self.done, None)


class _Lines:
    """The lines of many reads' answer (`Front._many`), written by one task: those added in one
    turn of the loop in one write."""

    def __init__(self, send: Callable):
        self.send = send
        self.parts: list[bytes] = []
        self.more = asyncio.Event()
        self.done = False

    def add(self, part: bytes) -> None:
        self.parts.append(part)
        self.more.set()

    def close(self) -> None:
        self.done = True
        self.more.set()

    async def run(self) -> None:
        while True:
            await self.more.wait()
            self.more.clear()
            if self.parts:
                chunk, self.parts = b"".join(self.parts), []
                await self.send({"type": "http.response.body", "body": chunk, "more_body": True})
            if self.done and not self.parts:
                return


class _Wakeups:
    """Wake-ups from the listener's thread handed to the loop in one call, however many came at
    once: a publish that wakes thousands of reads writes once to the loop's self-pipe, not
    thousands of times."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.lock = threading.Lock()
        self.due: list[tuple[asyncio.Future | Callable[[str], None], str]] = []

    def add(self, woken: asyncio.Future | Callable[[str], None], cause: str) -> None:
        """`woken` (a future to settle with the cause, or a function to call with it) on the loop."""
        with self.lock:
            self.due.append((woken, cause))
            first = len(self.due) == 1
        if first:
            self.loop.call_soon_threadsafe(self._settle_all)

    def _settle_all(self) -> None:
        with self.lock:
            due, self.due = self.due, []
        for woken, cause in due:
            if isinstance(woken, asyncio.Future):
                _settle(woken, cause)
            else:
                woken(cause)


def _settle(future: asyncio.Future, result: Any) -> None:
    if not future.done():
        future.set_result(result)


def _finished(answered: asyncio.Future, job: asyncio.Future) -> None:
    """A request's thread is done: its answer, unless it handed one over already (then only a
    failure after it, in Django's end of the request, is logged)."""
    error = None if job.cancelled() else job.exception()
    if answered.done():
        if error is not None:
            log.error("a request failed after its answer was made", exc_info=error)
    elif job.cancelled():
        answered.cancel()
    elif error is not None:
        answered.set_exception(error)
    else:
        answered.set_result(job.result())


async def _disconnected(body: _Body, receive: Callable) -> None:
    """Returns once the client has gone away (what is left of the body is read and dropped)."""
    while True:
        message = await body.receive_next()
        if message["type"] == "http.disconnect":
            return


def _no_write(data: bytes) -> None:
    raise RuntimeError("the WSGI write() callable is not supported: return the body")


class _Body:
    """The request's body, read from the connection as a thread asks for it (the application's
    `wsgi.input`)."""

    def __init__(self, receive: Callable, loop: asyncio.AbstractEventLoop):
        self._receive = receive
        self._loop = loop
        self._buffer = b""
        self._more = True
        self._lock = asyncio.Lock()

    async def receive_next(self) -> dict:
        async with self._lock:
            return await self._receive()

    def whole(self) -> bytes | None:
        """The body, when it was read whole on the loop (`read_ahead`)."""
        return None if self._more else self._buffer

    async def read_ahead(self) -> None:
        """On the loop: the whole body into the buffer, for the thread's reads to find there."""
        parts = [self._buffer]
        while self._more:
            message = await self.receive_next()
            if message["type"] == "http.disconnect":
                self._more = False
                break
            self._more = message.get("more_body", False)
            parts.append(message.get("body", b""))
        self._buffer = b"".join(parts)

    def _chunk(self) -> bytes:
        """The next piece of the body, from a thread (b"": no more)."""
        while self._more:
            message = asyncio.run_coroutine_threadsafe(self.receive_next(), self._loop).result()
            if message["type"] == "http.disconnect":
                self._more = False
                return b""
            self._more = message.get("more_body", False)
            data = message.get("body", b"")
            if data:
                return data
        return b""

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            parts = [self._buffer]
            self._buffer = b""
            while chunk := self._chunk():
                parts.append(chunk)
            return b"".join(parts)
        while len(self._buffer) < size and (chunk := self._chunk()):
            self._buffer += chunk
        out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out

    def readline(self, size: int = -1) -> bytes:
        while b"\n" not in self._buffer and (chunk := self._chunk()):
            self._buffer += chunk
        end = self._buffer.find(b"\n") + 1 or len(self._buffer)
        if size is not None and size >= 0:
            end = min(end, size)
        out, self._buffer = self._buffer[:end], self._buffer[end:]
        return out


def _environ(scope: dict, body: _Body) -> dict:
    """The WSGI environ of an ASGI HTTP request (PEP 3333)."""
    server = scope.get("server") or ("localhost", 80)
    client = scope.get("client") or ("", 0)
    path = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string", b"")
    if b"?" in path:
        path = path.split(b"?", 1)[0]
    raw_uri = path + (b"?" + query if query else b"")
    root = scope.get("root_path", "").encode()
    if root and path.startswith(root):
        path = path[len(root) :]
    environ: dict[str, Any] = {
        "RAW_URI": raw_uri.decode("latin-1"),  # as gunicorn gives it
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": root.decode("latin-1"),
        "PATH_INFO": _unquote(path).decode("latin-1"),
        "QUERY_STRING": query.decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1]),
        "REMOTE_ADDR": client[0],
        "REMOTE_PORT": str(client[1]),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": body,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        value = raw_value.decode("latin-1")
        key = name if name == "CONTENT_LENGTH" or name == "CONTENT_TYPE" else "HTTP_" + name
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    return environ


def _content_length(environ: dict) -> int:
    """The body's declared length (0: none, or not a number: the application refuses that)."""
    raw = environ.get("CONTENT_LENGTH", "")
    return int(raw) if raw.isdigit() else 0


def _unquote(path: bytes) -> bytes:
    """A raw path's %-escapes decoded, as a WSGI server gives PATH_INFO."""
    return unquote_to_bytes(path) if b"%" in path else path

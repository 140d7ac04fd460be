"""Waking waiting reads (docs/api.md): a read with `wait_ms` that finds nothing waits for
something to become available to its group, instead of polling the store.

Whatever makes events available says so on a Redis pub/sub channel: a publish on its stream's
(`stream_channel`), a nack, a seek or the leases of a hand-out on the group's (`group_channel`).
A message is empty (available now) or a time in milliseconds (due then: a nack's delay, a lease's
expiry, a delayed event's delivery time). Each process has one `Listener`: one thread, one Redis
connection subscribed to every channel, which wakes the reads waiting in this process. It wakes
one waiting read of a group per message (a group's competing consumers are not all woken for one
event: the one woken that fills its batch wakes the next, `Listener.wake_more`), and keeps due
times in a timer instead of having reads look for them.

A read takes a `snapshot` of the channels it waits on before it looks at the store, and parks
with it: a message that came in between wakes it at once, so nothing published while it looked
is missed. If the connection drops, every waiting read is woken (each looks once more) and reads
poll every `FALLBACK_POLL_S` until the listener is subscribed again, when all are woken once more.

It must never hold a waiting read's thread or connection: a parked read is an entry in a dict.
Both ways of waiting use it: `wait` blocks a thread (a WSGI server, the tests' client), and the
ASGI front parks a read with a callback (`cbrweb.front`)."""

from __future__ import annotations

import atexit
import heapq
import logging
import os
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import redis as redis_lib
from django.conf import settings

from store.redis_connection import as_text, get_redis
from streams import wait_stats

log = logging.getLogger(__name__)

PREFIX = "cbr:wake:"
DUE_CHANNEL = f"{PREFIX}due"  # a time, then the channels on which something comes due then
CHANGED_CHANNEL = f"{PREFIX}changed"  # then `:<database>`: a memo whose lookups changed (`streams.memo`)
FALLBACK_POLL_S = 1.0  # how often waiting reads look while the listener is not subscribed
FLUSH_S = 1.0  # how often the process's figures go to Redis (`streams.wait_stats`)
_TICK_S = 1.0  # the listener's longest sleep: how soon it notices it should stop


def changed_channel(client: redis_lib.Redis) -> str:
    """The channel on which memos' changes are said (`streams.memo`) among the processes of the
    Redis database `client` uses. Pub/sub ignores databases: two services on one Redis server,
    each its own database (or two test processes), would otherwise make each other forget."""
    return f"{CHANGED_CHANNEL}:{client.connection_pool.connection_kwargs.get('db', 0)}"


def stream_channel(storage_key: str) -> str:
    return f"{PREFIX}s:{storage_key}"


def group_channel(state_key: str) -> str:
    return f"{PREFIX}g:{state_key}"


def notify_due(pipe, channels: Iterable[str], due_ms: int, now_ms: int | None = None) -> None:
    """Say that something comes due at `due_ms` on each of these channels, in one message on
    `DUE_CHANNEL` (a pass that hands out leases for thousands of groups sends one message, not
    one per group for every process's listener to read).

    A channel on which this process said already that something comes due at a time still to
    come (after `now_ms`), and no later than `due_ms`, is left out: the reads waiting there wake
    at that earlier time, look, and wait on until the next time their group's counts name (a
    lease's expiry among them). A steady consumer's reads hand out leases many times a lease
    period; each said so, and each message woke every process's listener, and with it any read
    of the group parking at that moment, for nothing."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    fresh = []
    with _DUE_SAID_LOCK:
        if len(_DUE_SAID) >= _DUE_SAID_MAX:  # a bound, not a policy: saying one again costs a look
            _DUE_SAID.clear()
        for channel in channels:
            said = _DUE_SAID.get(channel)
            if said is not None and now_ms < said <= due_ms:
                continue
            _DUE_SAID[channel] = int(due_ms)
            fresh.append(channel)
    if fresh:
        pipe.publish(DUE_CHANNEL, f"{int(due_ms)} {' '.join(fresh)}")


_DUE_SAID: dict[str, int] = {}  # channel -> the due time this process last said on it (ms)
_DUE_SAID_LOCK = threading.Lock()
_DUE_SAID_MAX = 100_000


def notify(pipe, channels: Iterable[str], due_ms: int | None = None) -> None:
    """Say on these channels that something is available now (or at `due_ms`); queued on `pipe`
    (a pipeline, or a client: one command each)."""
    message = "" if due_ms is None else str(int(due_ms))
    for channel in channels:
        pipe.publish(channel, message)


@dataclass(eq=False)
class Waiter:
    """One read waiting in this process: woken once, by `wake(cause)`."""

    group: str  # the group's channel
    channels: tuple[str, ...]  # its streams' channels, then its group's
    on_wake: Callable[[str], None]
    woken: bool = False


@dataclass
class Snapshot:
    """What the listener had seen of some channels, taken before a read looks at the store."""

    counts: tuple[int, ...]
    epoch: int


@dataclass
class Wait:
    """What a read that found nothing waits for: a message or timer on `channels` (its waiter's
    key among them is `group`) seen after `seen`, for at most `timeout_s`; the read ends at
    `deadline` (`time.monotonic()`), and began to wait at `since`."""

    channels: tuple[str, ...]
    group: str
    seen: Snapshot
    timeout_s: float
    deadline: float
    since: float


@dataclass
class _Timers:
    heap: list[tuple[float, str]] = field(default_factory=list)
    known: set[tuple[float, str]] = field(default_factory=set)


class Listener:
    """The process's subscriber: one thread, one Redis connection."""

    def __init__(self, url: str):
        self.url = url
        self.changed = changed_channel(redis_lib.Redis.from_url(url))  # (no connection made)
        self.lock = threading.Lock()
        self.seen: defaultdict[str, int] = defaultdict(int)  # channel -> messages and timers so far
        # channel -> group channel -> its reads waiting there, oldest first
        self.waiting: defaultdict[str, OrderedDict[str, OrderedDict[int, Waiter]]] = defaultdict(OrderedDict)
        self.count = 0  # reads waiting
        self.epoch = 0  # +1 each time the subscription is lost or made again
        self.changes: defaultdict[str, int] = defaultdict(int)  # memo -> changes heard (`streams.memo`)
        self.subscribed = False
        self.timers = _Timers()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="cbr-wake-listener", daemon=True)
        self.thread.start()

    # -- reads ------------------------------------------------------------------------------

    def snapshot(self, channels: Iterable[str]) -> Snapshot:
        return self.snapshots([channels])[0]

    def snapshots(self, reads: Iterable[Iterable[str]]) -> list[Snapshot]:
        """A snapshot of each read's channels, taken together (one hold of the lock)."""
        with self.lock:
            seen, epoch = self.seen, self.epoch
            return [Snapshot(tuple(seen[c] for c in channels), epoch) for channels in reads]

    def park(self, channels: tuple[str, ...], group: str, seen: Snapshot, on_wake: Callable[[str], None]) -> Waiter:
        """Wait for a message on `channels` (the group's streams' and the group's own, `group`)
        or a timer of theirs; `on_wake(cause)` is called once, from the listener's thread (or
        from this call, when something came since `seen`). Take the read out with `unpark`."""
        waiter = Waiter(group, channels, on_wake)
        with self.lock:
            missed = seen.epoch != self.epoch or any(self.seen[c] != n for c, n in zip(channels, seen.counts))
            if not missed:
                for channel in channels:
                    self.waiting[channel].setdefault(group, OrderedDict())[id(waiter)] = waiter
                self.count += 1
        if missed:
            self._fire(waiter, "missed")
        return waiter

    def unpark(self, waiter: Waiter) -> None:
        with self.lock:
            self._remove(waiter)

    def wake_more(self, group: str, channels: Iterable[str]) -> None:
        """A woken read filled its batch: more may be there for the group's next waiting read."""
        with self.lock:
            waiter = self._first(channels, group)
        if waiter is not None:
            self._fire(waiter, "more")

    @property
    def healthy(self) -> bool:
        return self.subscribed

    # -- the thread -------------------------------------------------------------------------

    def stop(self) -> None:
        self.stopped.set()

    def _run(self) -> None:
        backoff = 0.1
        flushed = time.monotonic()
        while not self.stopped.is_set():
            client = redis_lib.Redis.from_url(self.url, socket_keepalive=True, health_check_interval=30)
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.psubscribe(f"{PREFIX}*")
                self._subscribed(True)
                backoff = 0.1
                while not self.stopped.is_set():
                    message = pubsub.get_message(timeout=self._sleep())
                    if message is not None and message["type"] == "pmessage":
                        self._message(as_text(message["channel"]), as_text(message["data"]))
                    self._due_timers()
                    if time.monotonic() - flushed >= FLUSH_S:
                        flushed = time.monotonic()
                        wait_stats.flush(client, self.count)
            except (redis_lib.ConnectionError, redis_lib.TimeoutError, OSError) as exc:
                if not self.stopped.is_set():
                    log.warning("wake-up channel lost (%s); waiting reads poll until it is back", exc)
            finally:
                self._subscribed(False)
                try:
                    pubsub.close()
                    client.close()
                except Exception:  # noqa: BLE001 - closing a broken connection
                    pass
            if self.stopped.wait(backoff):
                return
            backoff = min(backoff * 2, 2.0)

    def _sleep(self) -> float:
        with self.lock:
            if not self.timers.heap:
                return _TICK_S
            return max(0.0, min(_TICK_S, self.timers.heap[0][0] - time.time()))

    def _subscribed(self, on: bool) -> None:
        """Lost or made again: every waiting read looks once more (a message may have been
        missed while nobody listened)."""
        with self.lock:
            if self.subscribed == on:
                return
            self.subscribed = on
            self.epoch += 1
            everyone = list(self._all())
        for waiter in everyone:
            self._fire(waiter, "channel")

    def _message(self, channel: str, data: str) -> None:
        if channel == self.changed:
            self.changes[data] += 1
        elif channel.startswith(CHANGED_CHANNEL):
            return  # another Redis database's memos
        elif channel == DUE_CHANNEL:
            due_ms, _, names = data.partition(" ")
            self._due(names.split(" "), due_ms)
        elif data:
            self._due([channel], data)
        else:
            self._wake_on(channel, _cause(channel))

    def _due(self, channels: list[str], due_ms: str) -> None:
        """Something comes due on these channels at `due_ms`: a timer for the reads waiting there
        now (one that parks later finds the due time in Redis itself, and one looking at the
        store meanwhile looks again: `seen` moved); already due, they are woken now."""
        try:
            due = int(due_ms) / 1000
        except ValueError:
            due = 0.0
        if due <= time.time():
            for channel in channels:
                self._wake_on(channel, _cause(channel))
            return
        with self.lock:
            for channel in channels:
                self.seen[channel] += 1
                if channel in self.waiting and (due, channel) not in self.timers.known:
                    self.timers.known.add((due, channel))
                    heapq.heappush(self.timers.heap, (due, channel))

    def _due_timers(self) -> None:
        now = time.time()
        fired = []
        with self.lock:
            while self.timers.heap and self.timers.heap[0][0] <= now:
                item = heapq.heappop(self.timers.heap)
                self.timers.known.discard(item)
                fired.append(item[1])
        for channel in fired:
            self._wake_on(channel, "timer")

    def _wake_on(self, channel: str, cause: str) -> None:
        """One waiting read of each group waiting on `channel`: taken out of the table in one
        hold of the lock however many groups wait there, and counted once (taking 500 reads out
        one by one, each with its own hold of the lock and count, was 0.93 ms against 0.55)."""
        with self.lock:
            self.seen[channel] += 1
            chosen = [next(iter(reads.values())) for reads in self.waiting.get(channel, {}).values() if reads]
            for waiter in chosen:
                waiter.woken = True
                self._remove(waiter)
        self._call(chosen, cause)

    # -- the table --------------------------------------------------------------------------

    def _fire(self, waiter: Waiter, cause: str) -> None:
        with self.lock:
            if waiter.woken:
                return
            waiter.woken = True
            self._remove(waiter)
        self._call([waiter], cause)

    @staticmethod
    def _call(waiters: list[Waiter], cause: str) -> None:
        """Waiters taken out of the table (`woken` set, with the lock held) told why."""
        if waiters:
            wait_stats.woken(cause, len(waiters))
        for waiter in waiters:
            try:
                waiter.on_wake(cause)
            except Exception:  # noqa: BLE001 - a waiter gone (its loop closed) must not stop the others
                log.exception("waking a waiting read")

    def _remove(self, waiter: Waiter) -> None:
        """With the lock held."""
        found = False
        for channel in waiter.channels:
            groups = self.waiting.get(channel)
            reads = groups.get(waiter.group) if groups else None
            if reads is not None and reads.pop(id(waiter), None) is not None:
                found = True
                if not reads:
                    del groups[waiter.group]  # type: ignore[union-attr]
                    if not groups:
                        del self.waiting[channel]
        if found:
            self.count -= 1

    def _first(self, channels: Iterable[str], group: str) -> Waiter | None:
        for channel in channels:
            groups = self.waiting.get(channel)
            reads = groups.get(group) if groups is not None else None
            if reads:
                return next(iter(reads.values()))
        return None

    def _all(self) -> Iterable[Waiter]:
        seen: dict[int, Waiter] = {}
        for groups in self.waiting.values():
            for reads in groups.values():
                seen.update(reads)
        return seen.values()


def _cause(channel: str) -> str:
    """What a message on `channel` that is due now wakes a read for."""
    return "stream" if channel.startswith(PREFIX + "s:") else "group"


_listener: Listener | None = None
_listener_lock = threading.Lock()


def listener() -> Listener:
    """The process's listener for REDIS_URL, started on first use (and again for another URL)."""
    global _listener
    url = settings.REDIS_URL
    current = _listener
    if current is not None and current.url == url:
        return current
    with _listener_lock:
        if _listener is None or _listener.url != url:
            if _listener is not None:
                _listener.stop()
            _listener = Listener(url)
        return _listener


def stop_listener(timeout_s: float = 5.0) -> None:
    """Stop the process's listener, if one runs, and wait for its thread to end (its Redis goes
    away; a test reads the counters it flushes every second); the next use starts another."""
    global _listener
    with _listener_lock:
        current, _listener = _listener, None
    if current is not None:
        current.stop()
        current.thread.join(timeout_s)


@atexit.register
def _stop_at_exit() -> None:
    if _listener is not None:
        _listener.stop()


def _forget_in_child() -> None:
    """A forked child has none of its parent's threads: its listener is started afresh on first
    use (the parent's, copied, would look subscribed while hearing nothing, and the process's
    memos would trust what no one tells them has changed)."""
    global _listener
    _listener = None


os.register_at_fork(after_in_child=_forget_in_child)


def wait(channels: tuple[str, ...], group: str, seen: Snapshot, timeout_s: float) -> str:
    """Block this thread until something for these channels comes (or `timeout_s` passes);
    returns the cause ("timeout" when none came)."""
    got: list[str] = []
    event = threading.Event()

    def woken(cause: str) -> None:
        got.append(cause)
        event.set()

    lst = listener()
    waiter = lst.park(channels, group, seen, woken)
    try:
        event.wait(timeout_s)
    finally:
        lst.unpark(waiter)
    return got[0] if got else "timeout"


def publish_notice(channels: Iterable[str], due_ms: int | None = None) -> None:
    """`notify` now, on the process's Redis client. A notice that cannot be sent is not an error
    of the request that sends it (what it announces is durable already): waiting reads then find
    it at their next look."""
    try:
        pipe = get_redis().pipeline(transaction=False)
        notify(pipe, channels, due_ms)
        pipe.execute()
    except redis_lib.RedisError as exc:
        log.warning("wake-up notice not sent: %s", exc)

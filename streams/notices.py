"""The wake-up notices a publish sends once its events are committed (`streams.waking.notify`),
written to Redis before the publish is answered but without waiting for Redis's replies there:
waiting for them was ~0.1 ms of a one-event publish (0.5 ms at its p99), for an answer that
changes nothing (a notice that cannot be sent is not an error of the publish: what it announces
is durable already). Each thread keeps a connection of its own for them, and reads the replies
that have come back when it sends the next notices.

It must never lose a notice that a connection still open could carry: a connection found broken
(Redis restarted, the connection dropped) sends again, on a new one, every notice it had not
confirmed, with the new ones. A notice sent twice costs a spurious wake-up (the read looks,
finds nothing new, and waits on); one lost would leave reads waiting for their whole wait."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterable

import redis
from redis.connection import ConnectionInterface

from store.redis_connection import get_redis
from streams.waking import notify

log = logging.getLogger(__name__)

# Notices whose replies a thread may leave unread; past this it waits for them (a Redis that
# stopped answering would otherwise let them pile up in both ends' buffers).
MAX_UNCONFIRMED = 1000


class _Commands(list):
    """What `notify` queues, as commands to pack."""

    def publish(self, channel: str, message: str) -> None:
        self.append(("PUBLISH", channel, message))


class _Line(threading.local):
    """A thread's connection for notices, and the notices sent on it not yet confirmed."""

    client: redis.Redis | None = None
    connection: ConnectionInterface | None = None
    unconfirmed: deque | None = None


_line = _Line()


def send_notice(channels: Iterable[str], due_ms: int | None = None) -> None:
    """`notify` now (written to Redis when this returns), its reply read later."""
    commands = _Commands()
    notify(commands, channels, due_ms)
    try:
        try:
            _send(commands)
        except (redis.ConnectionError, redis.TimeoutError):
            # the connection broke, before or while these went: what it may have lost goes again
            lost = list(_line.unconfirmed or ()) + commands
            _drop()
            _send(lost)
    except redis.RedisError as exc:
        _drop()
        log.warning("wake-up notice not sent: %s", exc)


def _send(commands: list) -> None:
    connection = _connection()
    _confirm(connection, len(commands))
    connection.send_packed_command(connection.pack_commands(commands), check_health=False)
    assert _line.unconfirmed is not None
    _line.unconfirmed.extend(commands)


def _connection() -> ConnectionInterface:
    client = get_redis()
    if _line.client is not client:  # none yet, or REDIS_URL changed (tests)
        _drop()
        _line.client = client
    if _line.connection is None:
        _line.connection = client.connection_pool.make_connection()
        _line.unconfirmed = deque()
    return _line.connection


def _confirm(connection: ConnectionInterface, room: int) -> None:
    """Read the replies that have come back (all of them once too many are unread). Asking also
    finds a connection that Redis closed (`ConnectionError`) before anything is sent on it. A
    reply that is an error (Redis refused a notice) is logged: sent again, it would meet the same."""
    unconfirmed = _line.unconfirmed
    assert unconfirmed is not None
    while len(unconfirmed) + room > MAX_UNCONFIRMED or connection.can_read(timeout=0):
        if not unconfirmed:
            raise redis.ConnectionError("Redis sent what no notice asked for")
        try:
            connection.read_response()
        except redis.ResponseError as exc:
            log.warning("wake-up notice refused: %s", exc)
        unconfirmed.popleft()


def _drop() -> None:
    if _line.connection is not None:
        _line.connection.disconnect()
    _line.connection = None
    _line.unconfirmed = None

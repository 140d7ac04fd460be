"""A publish's wake-up notices go to Redis before it is answered, their replies read later
(streams/notices.py): none is lost while a connection can carry it, not even one sent on a
connection Redis had closed."""

from __future__ import annotations

import time

import pytest

from streams import notices
from streams.waking import stream_channel


@pytest.fixture
def subscriber(redis):
    pubsub = redis.pubsub()
    channel = stream_channel(f"notices-{time.monotonic_ns()}")
    pubsub.subscribe(channel)
    assert pubsub.get_message(timeout=2)["type"] == "subscribe"
    yield pubsub, channel
    pubsub.close()


def received(pubsub, count: int) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + 5
    while len(got) < count and time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.5)
        if message is not None and message["type"] == "message":
            got.append(message["data"])
    return got


def test_a_notice_reaches_the_reads_that_listen(subscriber):
    # given
    pubsub, channel = subscriber
    # when
    notices.send_notice([channel])
    notices.send_notice([channel], 1234)
    # then
    assert received(pubsub, 2) == [b"", b"1234"]


def test_a_notice_after_redis_closed_the_connection_goes_on_a_new_one(subscriber, redis):
    # given a thread's connection, which Redis then closes (a restart, a dropped connection)
    pubsub, channel = subscriber
    notices.send_notice([channel], 1)
    assert received(pubsub, 1) == [b"1"]
    kill(redis, notices._line.connection)
    # when
    notices.send_notice([channel], 2)
    # then
    assert received(pubsub, 1) == [b"2"]


def test_notices_whose_replies_never_came_go_again_on_the_new_connection(subscriber, redis):
    # given a notice whose reply never came back before Redis closed the connection
    pubsub, channel = subscriber
    notices.send_notice([channel], 1)
    assert received(pubsub, 1) == [b"1"]
    notices._line.connection.read_response()  # the reply taken away: as if it had never come
    kill(redis, notices._line.connection)
    # when
    notices.send_notice([channel], 2)
    # then it goes again with the new one: a spurious wake-up at worst, never a lost one
    assert received(pubsub, 2) == [b"1", b"2"]


def kill(redis, connection) -> None:
    host, port = connection._sock.getsockname()
    redis.client_kill(f"{host}:{port}")


def test_a_thread_leaves_only_so_many_replies_unread(subscriber, monkeypatch):
    # given
    pubsub, channel = subscriber
    monkeypatch.setattr(notices, "MAX_UNCONFIRMED", 3)
    # when
    for i in range(10):
        notices.send_notice([channel], i)
    # then
    assert len(notices._line.unconfirmed) <= 3
    assert received(pubsub, 10) == [str(i).encode() for i in range(10)]

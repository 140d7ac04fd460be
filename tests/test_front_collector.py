"""The web front's garbage collector while it reads many woken reads together (cbrweb/front.py):
kept waiting for the call's end from `_QUIET_FROM` reads, left alone for fewer, and given back
as it was found, however many such calls overlap."""

import asyncio
import gc

import pytest
from django.http import HttpResponse

from api.parking import Parked
from cbrweb import front

# the front tidies the thread's database connections after a call, as a request's end does
pytestmark = pytest.mark.django_db

seen: list[bool] = []


def _together(parked: list, causes: list) -> list:
    seen.append(gc.isenabled())
    return [HttpResponse(b"{}", content_type="application/json") for _ in parked]


class _Read(Parked):
    together = staticmethod(_together)


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _batch(loop, n: int) -> list:
    return [front._Woken(_Read(wait=None), "stream", [], False, loop.create_future()) for _ in range(n)]


def test_many_woken_reads_are_read_with_the_collector_waiting_and_it_runs_again_after(loop):
    seen.clear()
    assert gc.isenabled()
    answers = front._resumed(_batch(loop, front._QUIET_FROM), loop)
    assert seen == [False]
    assert gc.isenabled()
    assert [status for status, _, _ in answers] == [200] * front._QUIET_FROM


def test_a_few_woken_reads_leave_the_collector_alone(loop):
    seen.clear()
    front._resumed(_batch(loop, front._QUIET_FROM - 1), loop)
    assert seen == [True]


def test_overlapping_calls_give_the_collector_back_when_the_last_ends_and_as_it_was_found():
    collector = front._Collector()
    with collector.quiet(True):
        with collector.quiet(True):
            assert not gc.isenabled()
        assert not gc.isenabled()  # the other call still reads
    assert gc.isenabled()

    gc.disable()  # turned off by someone else: left off
    try:
        with collector.quiet(True):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()

"""A consumer's next read carries the ack of its last batch and, finding nothing, parks (under the
ASGI front: `read(..., park=True)`). The ack has its effect in Redis at once; the floors it moves
are persisted once the read is parked (`Waiting.settle`, run by the thread that parked it), and
the read's answer, whenever it comes, waits for them: a read woken first persists them itself,
and one whose floors could not be persisted answers that failure. Against the run's real Redis
and database."""

import pytest
from django.db import OperationalError

from domain.events import EventIn
from groups import consuming, reader_groups
from groups.consuming import floors
from groups.models import ReadPosition
from streams import services

pytestmark = pytest.mark.django_db


def group_with_a_batch():
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail")
    services.do_publish(stream, [EventIn(b"one"), EventIn(b"two")])
    batch = consuming.read(group, 10, consumer="c")
    return stream, group, {"delivery_ids": [d["delivery_id"] for d in batch.deliveries]}


def floor(group) -> int:
    return ReadPosition.objects.get(subscription__reader_group=group).floor


def test_a_parked_reads_ack_is_persisted_once_it_is_parked(redis):
    _, group, ack = group_with_a_batch()

    result = consuming.read(group, 10, 30_000, "c", ack=ack, park=True)

    assert result.wait is not None and result.acked.acked == 2
    assert floor(group) == 0  # not yet: the read parks first
    assert result.wait.reading.settle() is None
    assert floor(group) == 2
    assert result.wait.reading.settle() is None and floor(group) == 2  # once


def test_a_read_woken_before_its_ack_was_persisted_persists_it_before_its_answer(redis):
    stream, group, ack = group_with_a_batch()
    waiting = consuming.read(group, 10, 30_000, "c", ack=ack, park=True).wait.reading
    services.do_publish(stream, [EventIn(b"three")])

    [result] = consuming.read_woken([waiting], ["stream"])

    assert [d["payload"] for d in result.deliveries] == ["three"] and result.acked.acked == 2
    assert floor(group) == 2


def test_a_read_whose_ack_could_not_be_persisted_answers_that(redis, monkeypatch):
    _, group, ack = group_with_a_batch()
    waiting = consuming.read(group, 10, 30_000, "c", ack=ack, park=True).wait.reading

    def lost(*_args, **_kwargs):
        raise OperationalError("the database went away")

    monkeypatch.setattr(floors, "_update_positions_postgresql", lost)
    monkeypatch.setattr(floors, "_update_positions", lost)
    waiting.settle()  # (the thread that parked it: the failure is kept for its answer)
    monkeypatch.undo()

    [result] = consuming.read_woken([waiting], ["timeout"])

    assert isinstance(result, OperationalError)  # answered 503 database_unavailable by the view
    assert floor(group) == 0


def test_a_read_that_hands_out_at_once_persists_its_ack_before_it_answers(redis):
    stream, group, ack = group_with_a_batch()
    services.do_publish(stream, [EventIn(b"three")])

    result = consuming.read(group, 10, 30_000, "c", ack=ack, park=True)

    assert result.wait is None and [d["payload"] for d in result.deliveries] == ["three"]
    assert floor(group) == 2

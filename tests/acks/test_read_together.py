"""Parked reads woken together (`consuming.read_woken`): many groups' reads in one pass, against
the run's real Redis and database. Each group gets what it would get read alone; two reads of one
group in one pass never get the same event; and the pass costs the same few statements however
many groups it reads. A read that waited reads its group as it is when woken: after a seek,
new settings or a deletion, never as it was when the read began."""

import factories
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from domain.errors import FieldError
from domain.events import EventIn
from groups import consuming, reader_groups
from groups.models import ReaderGroup, ReadPosition
from streams import services

pytestmark = pytest.mark.django_db


def parked_reads(stream, names, max_events=10, consumer="c"):
    """A read of each group that found nothing and parked."""
    reads = []
    for name in names:
        group = ReaderGroup.objects.filter(scope__name="t", name=name).first()
        group = group or reader_groups.do_create_reader_group(scope="t", name=name, streams=[stream], start="tail")
        result = consuming.read(group, max_events, 30_000, consumer, park=True)
        assert result.wait is not None and not result.parts
        reads.append(result.wait.reading)
    return reads


def payloads(result):
    return [d["payload"] for d in result.deliveries]


def test_every_group_woken_together_gets_what_it_would_alone(redis):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=3)
    reads = parked_reads(stream, [f"g{i}" for i in range(40)], max_events=5)
    services.do_publish(stream, [EventIn(f"e{i}".encode(), routing_key=f"k{i}".encode()) for i in range(4)])

    results = consuming.read_woken(reads, ["stream"] * len(reads))

    assert [sorted(payloads(r)) for r in results] == [["e0", "e1", "e2", "e3"]] * len(reads)
    ids = [d["delivery_id"] for r in results for d in r.deliveries]
    assert len(set(ids)) == len(ids)  # each group's deliveries are its own
    # how far each group handed out is in the database before the answers leave
    handed = ReadPosition.objects.filter(subscription__stream=stream).values_list("handed", flat=True)
    assert sum(handed) == 4 * len(reads)
    # and each group acknowledges its own
    for read, result in zip(reads, results, strict=True):
        assert consuming.ack(read.group, [d["delivery_id"] for d in result.deliveries]).acked == 4


def test_two_reads_of_one_group_in_one_pass_share_its_events(redis):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    first = parked_reads(stream, ["g"], max_events=2, consumer="a")
    second = parked_reads(stream, ["g"], max_events=2, consumer="b")
    services.do_publish(stream, [EventIn(f"e{i}".encode()) for i in range(3)])

    a, b = consuming.read_woken(first + second, ["stream", "more"])

    assert payloads(a) == ["e0", "e1"] and payloads(b) == ["e2"]
    assert ReadPosition.objects.get(subscription__stream=stream).handed == 3


def test_a_read_that_finds_nothing_when_woken_parks_again(redis):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    waiting = parked_reads(stream, ["g"], consumer="a") + parked_reads(stream, ["h"])
    services.do_publish(stream, [EventIn(b"one")])
    got = consuming.read(waiting[0].group, 10, consumer="other")  # another consumer of g takes it

    a, h = consuming.read_woken(waiting, ["stream", "stream"])

    assert payloads(got) == ["one"] and payloads(h) == ["one"]
    assert not a.parts and a.wait is not None and a.wait.reading is waiting[0]  # waits on, same deadline


def test_a_pass_costs_the_same_statements_for_five_groups_or_fifty(redis):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=2)
    statements = []
    for n, batch in ((5, "a"), (50, "b")):
        reads = parked_reads(stream, [f"{batch}{i}" for i in range(n)])
        services.do_publish(stream, [EventIn(b"x", routing_key=b"k")])
        with CaptureQueriesContext(connection) as queries:
            results = consuming.read_woken(reads, ["stream"] * n)
        assert [len(r.parts) for r in results] == [1] * n
        # the groups' generations and the streams' epochs, asked (one query each, for all the
        # reads) only when a change may have gone unheard: whether the listener has heard the
        # groups' creation yet is a matter of timing, so they are counted apart
        asked = [q["sql"] for q in queries if '"generation"' in q["sql"] or '"epoch"' in q["sql"]]
        assert len(asked) in (0, 2), asked
        statements.append(len(queries) - len(asked))
    # the states' start, the floors' UPDATE (and its lock)
    assert statements[0] == statements[1] <= 4


def test_a_read_woken_after_a_seek_reads_from_the_seek_target(redis):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=2)
    services.do_publish(stream, [EventIn(f"e{i}".encode(), routing_key=f"k{i}".encode()) for i in range(6)])
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail")
    [waiting] = parked_reads(stream, ["g"])
    reader_groups.do_seek(group, {"position": "head"})
    services.do_publish(stream, [EventIn(b"new")])

    [result] = consuming.read_woken([waiting], ["group"])

    assert sorted(payloads(result)) == sorted([f"e{i}" for i in range(6)] + ["new"])
    # its deliveries are the group's as it is now: they acknowledge
    assert consuming.ack(waiting.group, [d["delivery_id"] for d in result.deliveries]).acked == 7


def test_a_read_woken_after_its_group_changed_streams_reads_the_new_ones(redis):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    other = services.do_create_stream(scope="t", name="refunds", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="head")
    [waiting] = parked_reads(stream, ["g"])
    reader_groups.do_update_reader_group(group, {}, streams=[other])
    services.do_publish(stream, [EventIn(b"old stream")])
    services.do_publish(other, [EventIn(b"new stream")])

    [result] = consuming.read_woken([waiting], ["group"])

    assert payloads(result) == ["new stream"]
    # and when it waits again, it waits on the new stream's channel
    services.do_publish(other, [EventIn(b"more")])
    [again] = consuming.read_woken([waiting], ["group"])
    assert payloads(again) == ["more"]


def test_a_read_woken_after_its_group_was_deleted_is_told_so_and_the_others_read(
    redis, django_capture_on_commit_callbacks
):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    reads = parked_reads(stream, ["gone", "kept"])
    with django_capture_on_commit_callbacks(execute=True):  # its Redis state goes once the deletion commits
        reader_groups.do_delete_reader_group(reads[0].group)
    services.do_publish(stream, [EventIn(b"x")])

    gone, kept = consuming.read_woken(reads, ["stream", "stream"])

    assert isinstance(gone, FieldError) and gone.code == "reader_group_not_found"
    assert payloads(kept) == ["x"]
    # nothing of the deleted group came back to Redis
    kept_keys = [key for key in redis.keys("*") if reads[1].group.state_key.encode() in key]
    assert kept_keys and not [key for key in redis.keys("*") if reads[0].group.state_key.encode() in key]


def test_a_woken_read_asks_for_its_groups_generation_only_after_a_group_changed(redis):
    factories.listening()  # changes are heard: a read trusts its group until one is
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    reads = parked_reads(stream, ["g", "h"])
    other = reader_groups.do_create_reader_group(scope="t", name="other", streams=[stream])

    def generation_queries(read) -> int:
        services.do_publish(stream, [EventIn(b"x")])
        with CaptureQueriesContext(connection) as queries:
            [result] = consuming.read_woken([read], ["stream"])
        assert payloads(result)[-1:] == ["x"]
        return sum(1 for q in queries.captured_queries if '"generation"' in q["sql"])

    assert generation_queries(reads[0]) == 0
    reader_groups.do_seek(other, {"position": "tail"})  # any group's change
    assert generation_queries(reads[1]) == 1
    assert generation_queries(reads[1]) == 0  # and it trusts it again

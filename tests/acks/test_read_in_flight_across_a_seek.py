"""A read in flight while its group is sought (or changes streams): the seek starts the group's
positions afresh, and the read, which loaded them before, persists nothing onto what the seek
removed: its answer is a read's answer, never a server error, and the group goes on from the
seek's target."""

import threading

import psycopg
import pytest
from django.db import connection

from domain.events import EventIn
from groups import consuming, reader_groups
from groups.consuming import floors
from groups.models import DeliveryCount
from streams import services

pytestmark = pytest.mark.django_db


def test_redelivery_counts_of_a_position_a_seek_removed_are_dropped_and_the_others_kept(redis):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], retention_type="NONE")
    before = consuming.slots(group)[0].position.pk
    reader_groups.do_seek(group, {"position": "head"})
    now = consuming.slots(group)[0].position.pk

    floors.persist_delivery_counts([(before, 0, 2), (now, 0, 2), (now, 0, 3), (now, 1, 2)])

    assert sorted(DeliveryCount.objects.values_list("position_id", "offset", "count")) == [(now, 0, 3), (now, 1, 2)]
    # a row keeps its highest count
    floors.persist_delivery_counts([(now, 0, 2), (now, 1, 4)])
    assert sorted(DeliveryCount.objects.values_list("offset", "count")) == [(0, 3), (1, 4)]


def test_a_read_that_loaded_its_positions_before_a_seek_answers_and_the_group_reads_on(redis, clock):
    # given: two events handed out and not acknowledged; their leases expire
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    services.do_publish(stream, [EventIn(b"a"), EventIn(b"b")])
    group = reader_groups.do_create_reader_group(
        scope="t", name="g", streams=[stream], retention_type="NONE", ack_timeout_s=5
    )
    assert len(consuming.read(group, 10).deliveries) == 2
    clock.now += 10
    # when: a read loads the group's positions, then a seek starts them afresh before it reads
    loaded = consuming.slots(group)
    reader_groups.do_seek(group, {"position": "head"})
    stale = consuming.read(group, 10, group_slots=loaded)

    # then: the read answered (its redeliveries' counts went nowhere), and the group reads on
    # from the seek's target, counting from one
    assert [d["delivery_count"] for d in stale.deliveries] == [2, 2]
    assert not DeliveryCount.objects.exists()
    fresh = consuming.read(group, 10)
    assert [(d["payload"], d["delivery_count"]) for d in fresh.deliveries] == [("a", 1), ("b", 1)]


@pytest.mark.django_db(transaction=True)
def test_a_seek_committed_while_the_counts_statement_runs_costs_the_read_nothing(redis):
    """The statement's EXISTS sees the position (its snapshot is older) while its foreign key
    check, made after the seek committed, does not: once more, and the counts are left out."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite takes one writer at a time: no statement runs while another commits")
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], retention_type="NONE")
    before = consuming.slots(group)[0].position.pk
    settings = connection.settings_dict
    other = psycopg.connect(
        dbname=settings["NAME"], user=settings["USER"], host=settings["HOST"], port=settings["PORT"] or 5432
    )
    other.execute("DELETE FROM streams_readposition WHERE id = %s", [before])  # a seek, not committed yet
    committed = threading.Timer(1.0, other.commit)  # … commits while the statement waits on its lock
    committed.start()
    try:
        floors.persist_delivery_counts([(before, 0, 2)])
    finally:
        committed.join()
        other.close()
    assert not DeliveryCount.objects.filter(position_id=before).exists()

"""The retention set kept as one row per stream: stored and read back exactly, trimmed by a manual
truncation, and carried over from the row-per-record table by the migration."""

from datetime import UTC, datetime, timedelta

import factories
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from domain.events import EventIn
from retention import services as retention_services
from retention import set_store
from retention.cycle.gathering import prepare_batch
from streams import services

T0 = datetime(2026, 11, 21, 10, 0, 0, 123457, tzinfo=UTC)


@pytest.fixture
def stream(db):
    return factories.make_stream(policy={"limit_type": "size", "min": 90, "max": 180, "consumption_based": True})


@pytest.mark.django_db
def test_sets_are_read_back_as_written_with_exact_times(stream):
    other = services.do_create_stream(scope="shop", name="other", segment_count=1)
    rows = [
        set_store.stored(T0, 30, {"0": 1}, {"0": 30}),
        set_store.stored(T0 + timedelta(hours=1), 90, {"0": 3}, None),
    ]
    # when
    set_store.write_sets({stream.pk: rows})
    set_store.write_sets({stream.pk: rows[1:]})  # written again whole: replaces
    # then
    assert set_store.read_sets([stream.pk, other.pk]) == {stream.pk: rows[1:]}
    (entry,) = set_store.entries(stream)
    assert entry == (T0 + timedelta(hours=1), 90, {"0": 3}, None)
    assert set_store.as_records(rows)[0].time == T0.timestamp()


@pytest.mark.django_db
def test_a_manual_truncation_drops_the_records_at_or_before_its_cut(stream):
    services.do_publish(stream, [EventIn(b"x" * 30)] * 7)
    rows = [set_store.stored(T0 + timedelta(hours=k), 30 * k, {"0": k}, {"0": 30 * k}) for k in (2, 4, 6)]
    set_store.write_sets({stream.pk: rows})
    # when
    retention_services.do_truncate(stream, {"0": 5}, rule="manual", trigger="api")
    # then: the newest record at or before the cut ({"0": 4}) and everything older are gone
    assert [e.cut for e in set_store.entries(stream)] == [{"0": 6}]


@pytest.mark.django_db
def test_a_cycle_reads_the_stored_set_and_records_the_tail_only_when_applied(stream):
    services.do_publish(stream, [EventIn(b"x" * 30)] * 7)
    set_store.write_sets({stream.pk: [set_store.stored(T0, 60, {"0": 2}, {"0": 60})]})
    # when
    (prepared,) = prepare_batch([stream], T0 + timedelta(hours=1), interval=1800)
    # then: the tail is in the decision's inputs, not yet stored
    assert [dict(r.cut) for r in prepared.inputs.retention_set] == [{"0": 2}, {"0": 7}]
    assert [e.cut for e in set_store.entries(stream)] == [{"0": 2}]
    assert prepared.retention_set_after(None) == prepared.rset_rows
    assert prepared.retention_set_after({"0": 3}) == prepared.rset_rows[1:]


@pytest.mark.django_db(transaction=True)
def test_the_migration_carries_each_streams_records_over_in_set_order():
    executor = MigrationExecutor(connection)
    others = [node for node in executor.loader.graph.leaf_nodes() if node[0] != "retention"]
    before = [*others, ("retention", "0008_truncation_pending_index")]
    after = [*others, ("retention", "0009_retention_set_one_row")]
    executor.migrate(before)
    try:
        apps = executor.loader.project_state(before).apps
        Stream = apps.get_model("streams", "Stream")
        Scope = apps.get_model("streams", "Scope")
        Record = apps.get_model("retention", "RetentionSetRecord")
        scope = Scope.objects.create(name="shop")
        a = Stream.objects.create(scope=scope, name="a", segment_count=1)
        b = Stream.objects.create(scope=scope, name="b", segment_count=1)
        Stream.objects.create(scope=scope, name="none", segment_count=1)
        # inserted out of order; two records at the same time are ordered by id
        Record.objects.create(
            stream=a, recorded_at=T0 + timedelta(hours=1), size_bytes=60, cut={"0": 2}, sizes={"0": 60}
        )
        Record.objects.create(stream=a, recorded_at=T0, size_bytes=30, cut={"0": 1}, sizes=None)
        Record.objects.create(stream=a, recorded_at=T0, size_bytes=31, cut={"0": 1}, sizes=None)
        Record.objects.create(stream=b, recorded_at=T0, size_bytes=90, cut={"0": 3}, sizes={"0": 90})
        # when
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        # then
        Stored = executor.loader.project_state(after).apps.get_model("retention", "StoredRetentionSet")
        us = set_store.microseconds(T0)
        assert {s.stream_id: s.records for s in Stored.objects.all()} == {
            a.pk: [[us, 30, {"0": 1}, None], [us, 31, {"0": 1}, None], [us + 3_600_000_000, 60, {"0": 2}, {"0": 60}]],
            b.pk: [[us, 90, {"0": 3}, {"0": 90}]],
        }
    finally:
        MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

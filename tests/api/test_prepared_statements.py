"""The group-and-positions query and the floors' UPDATE every read and ack runs are prepared on
PostgreSQL once per connection (`streams.db.prepared_cursor`), and give what the unprepared
statements give; with `CBR_DB_PREPARED` off, or on SQLite, nothing is prepared."""

import factories
import psycopg
import pytest
from django.db import connection

from domain.events import EventIn
from groups.consuming.floors import _load_positions
from streams import services

pytestmark = pytest.mark.django_db

G = "/api/v1/reader-groups/shop/billing/"


@pytest.fixture
def group(api):
    stream = factories.make_stream(segment_count=2)
    for seg in "01":
        key = factories.routing_key_for(stream, seg)
        services.do_publish(stream, [EventIn(f"{seg}:{i}".encode(), routing_key=key) for i in range(10)])
    factories.create_group_over_api(api, retention_type="NONE")


# the positions query of reads and acks, which find their group by scope and name (the group's
# creation, which has the group, finds it by id: the same query otherwise)
BY_NAME = 'FROM "streams_readposition" p'


def prepared_positions_queries(marker: str = BY_NAME) -> list[tuple[str, int]]:
    """This connection's prepared statements that read the positions by the group's name (or
    hold `marker`): (statement, times run)."""
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements")
        found = [(sql, runs) for sql, runs in cursor.fetchall() if marker in sql]
    return [(sql, runs) for sql, runs in found if marker != BY_NAME or 'WHERE gs."name"' in sql]


def read(api, ack=None) -> list[str]:
    answer = api.post(G + "read/", {"max_events": 3, **({"ack": {"delivery_ids": ack}} if ack else {})}, format="json")
    assert answer.status_code == 200, answer.content
    return [d["delivery_id"] for d in answer.json()["deliveries"]]


def as_rows(positions) -> list[tuple]:
    return [
        (
            p.pk,
            p.segment_id,
            p.floor,
            p.subscription.pk,
            p.subscription.stream.full_name,
            p.subscription.reader_group.pk,
        )
        for p in positions
    ]


def test_reads_and_acks_run_one_prepared_positions_query(api, group):
    # when a group reads three times, each read carrying the previous batch's ack, then acks
    ids = read(api)
    ids = read(api, ack=ids)
    ids = read(api, ack=ids)
    assert api.post(G + "ack/", {"delivery_ids": ids}, format="json").json()["acked"] == 3

    # then on PostgreSQL one statement was prepared and run by all four requests, and the floors
    # were moved by a prepared UPDATE (moving both segments' floors, the same statement each time)
    prepared = prepared_positions_queries()
    updates = prepared_positions_queries('UPDATE "streams_readposition"')
    if connection.vendor == "postgresql":
        assert len(prepared) == 1 and prepared[0][1] >= 4, prepared
        assert len(updates) == 1 and updates[0][1] >= 3, updates
    else:
        assert prepared == updates == []
    # and the prepared query gives what it gives unprepared (as it runs while queries are logged)
    got = _load_positions("shop", "billing")
    connection.force_debug_cursor = True
    try:
        plain = _load_positions("shop", "billing")
    finally:
        connection.force_debug_cursor = False
    assert as_rows(got) == as_rows(plain) and sum(p.floor for p in got) == 9  # 9 acked, in order per segment
    assert [p.subscription.reader_group.retention_type for p in got] == ["NONE", "NONE"]
    assert as_rows(_load_positions(got[0].subscription.reader_group.pk)) == as_rows(got)  # by id: the same


def test_with_prepared_statements_off_nothing_is_prepared(api, group, settings):
    settings.CBR_DB_PREPARED = False
    ids = read(api)
    read(api, ack=ids)
    assert prepared_positions_queries() == prepared_positions_queries('UPDATE "streams_readposition"') == []


@pytest.mark.django_db(transaction=True)
def test_a_read_on_a_kept_connection_sends_no_health_check_of_its_own(api, group, monkeypatch):
    # given a connection kept from an earlier request, its health not yet checked in this one
    read(api)
    connection.health_check_done = False  # as a request's start leaves a kept connection
    checks = []
    real = connection.is_usable
    monkeypatch.setattr(connection, "is_usable", lambda: checks.append(1) or real())

    # when the group reads
    assert len(read(api)) == 3

    # then on PostgreSQL its first statement was the check: no SELECT 1 before it
    if connection.vendor == "postgresql":
        assert checks == []


@pytest.mark.django_db(transaction=True)
def test_a_read_whose_connection_was_lost_between_requests_is_answered_on_a_new_one(api, group):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite is a file: it has no connection to lose")
    # given a connection kept from an earlier request, then ended by the server meanwhile
    read(api)
    lost = connection.connection.info.backend_pid
    with psycopg.connect(_dsn(), autocommit=True) as other:
        assert other.execute("SELECT pg_terminate_backend(%s)", [lost]).fetchone()[0]
    connection.health_check_done = False  # the next request starts on the kept connection

    # when the group reads again, then it is answered (the statement sent again on a new
    # connection), and nothing it was handed was lost
    assert len(read(api)) == 3
    assert connection.connection.info.backend_pid != lost


def _dsn() -> str:
    params = connection.get_connection_params()
    return psycopg.conninfo.make_conninfo(
        **{k: v for k, v in params.items() if k in ("dbname", "user", "password", "host", "port")}
    )

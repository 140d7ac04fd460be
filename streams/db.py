"""Writing many rows at once where the ORM would be slow: Django's `bulk_update` builds a CASE
expression per row and field (seconds for a few thousand rows); one UPDATE … FROM arrays
(PostgreSQL) or a VALUES list (SQLite 3.33+) does the same in milliseconds. And the cursor of
the statements every read and ack runs, prepared on PostgreSQL (`prepared_cursor`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import orjson
import psycopg
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, models

CHUNK = 500


def update_rows(model, fields: list[str], rows: list[tuple]) -> None:
    """Set `fields` of the rows of `model` named by primary key: rows are (pk, *values)."""
    if not rows:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    pk = connection.ops.quote_name(model._meta.pk.column)
    columns = [model._meta.get_field(f).column for f in fields]
    names = ", ".join(connection.ops.quote_name(c) for c in ["id", *columns])
    assignments = ", ".join(f"{connection.ops.quote_name(c)} = v.{connection.ops.quote_name(c)}" for c in columns)
    if connection.vendor == "postgresql":
        # one array parameter per column: a VALUES list of thousands of placeholders costs
        # more to convert in the driver than the update itself
        types = [model._meta.pk.db_type(connection)]
        types += [model._meta.get_field(f).db_type(connection) for f in fields]
        arrays = ", ".join(f"%s::{t}[]" for t in types)
        sql = (
            f"UPDATE {table} SET {assignments} FROM unnest({arrays}) AS v({names}) "
            f"WHERE {table}.{pk} = v.{connection.ops.quote_name('id')}"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [list(col) for col in zip(*rows)])
        return
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        values = ", ".join("(" + ", ".join(["%s"] * len(chunk[0])) + ")" for _ in chunk)
        sql = (
            f"WITH v({names}) AS (VALUES {values}) "
            f"UPDATE {table} SET {assignments} FROM v WHERE {table}.{pk} = v.{connection.ops.quote_name('id')}"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [x for row in chunk for x in row])


def delete_pairs(model, key: str, segment: str, pairs: list[tuple[int, str]]) -> None:
    """Delete the rows of `model` whose (`key` id, `segment` text) columns are one of `pairs`
    (rows with no dependents): one statement with two array parameters on PostgreSQL, chunks of
    a VALUES list elsewhere. An OR of thousands of conditions took seconds to plan."""
    if not pairs:
        return
    q = connection.ops.quote_name
    table = q(model._meta.db_table)
    a, b = q(model._meta.get_field(key).column), q(model._meta.get_field(segment).column)
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            keys, segments = zip(*pairs)
            cur.execute(
                f"DELETE FROM {table} t USING unnest(%s::bigint[], %s::text[]) AS v(k, s) "
                f"WHERE t.{a} = v.k AND t.{b} = v.s",
                [list(keys), list(segments)],
            )
            return
        for start in range(0, len(pairs), CHUNK):
            chunk = pairs[start : start + CHUNK]
            values = ", ".join(["(%s, %s)"] * len(chunk))
            cur.execute(
                f"DELETE FROM {table} WHERE ({a}, {b}) IN (VALUES {values})", [x for pair in chunk for x in pair]
            )


def delete_rows(model, pks: list[int]) -> None:
    """Delete rows of a model with no dependents by primary key: one array parameter on
    PostgreSQL (converting tens of thousands of IN parameters costs more than the delete)."""
    if not pks:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    pk = connection.ops.quote_name(model._meta.pk.column)
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute(f"DELETE FROM {table} WHERE {pk} = ANY(%s)", [list(pks)])
            return
        for start in range(0, len(pks), CHUNK):
            chunk = pks[start : start + CHUNK]
            cur.execute(f"DELETE FROM {table} WHERE {pk} IN ({', '.join(['%s'] * len(chunk))})", chunk)


def insert_rows(model, objs: list) -> None:
    """Insert model instances in one statement and set their primary keys, like `bulk_create`
    but with one array parameter per column on PostgreSQL (`unnest`), where Django's thousands
    of placeholders cost more to convert in the driver than the insert itself. Values go through
    each field's own `get_db_prep_save`, as the ORM would send them."""
    if not objs:
        return
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    table = connection.ops.quote_name(model._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    pk = connection.ops.quote_name(model._meta.pk.column)
    with connection.cursor() as cur:
        if connection.vendor == "postgresql" and all(type(f) in _AS_JSON for f in fields):
            # the rows as one JSON document: the driver quotes arrays of text (JSON values above
            # all) element by element with a regular expression, slower than the insert itself
            document = orjson.dumps([[f.pre_save(obj, True) for f in fields] for obj in objs]).decode()
            picks = ", ".join(_json_pick(f, i) for i, f in enumerate(fields))
            cur.execute(
                f"INSERT INTO {table} ({columns}) SELECT {picks} "
                f"FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS r(v, n) ORDER BY r.n "
                f"RETURNING {pk}",
                [document],
            )
            ids = [row[0] for row in cur.fetchall()]
        elif connection.vendor == "postgresql":
            values = [[f.get_db_prep_save(f.pre_save(obj, True), connection) for obj in objs] for f in fields]
            arrays = ", ".join(f"%s::{f.db_type(connection)}[]" for f in fields)
            cur.execute(f"INSERT INTO {table} ({columns}) SELECT * FROM unnest({arrays}) RETURNING {pk}", values)
            ids = [row[0] for row in cur.fetchall()]
        else:
            values = [[f.get_db_prep_save(f.pre_save(obj, True), connection) for obj in objs] for f in fields]
            ids = []
            rows = list(zip(*values))
            per = max(1, 900 // len(fields))  # SQLite's default limit of 999 parameters
            for start in range(0, len(rows), per):
                chunk = rows[start : start + per]
                marks = ", ".join("(" + ", ".join(["%s"] * len(fields)) + ")" for _ in chunk)
                cur.execute(
                    f"INSERT INTO {table} ({columns}) VALUES {marks} RETURNING {pk}",
                    [x for row in chunk for x in row],
                )
                ids += [row[0] for row in cur.fetchall()]
    for obj, ident in zip(objs, ids):
        obj.pk = ident
        obj._state.adding = False
        obj._state.db = connection.alias


# Field types whose Python values orjson writes as PostgreSQL reads them back from JSON text
# (datetimes as RFC 3339 with their offset; JSON values as themselves, None as SQL NULL).
_AS_JSON = (
    models.BigIntegerField,
    models.IntegerField,
    models.PositiveIntegerField,
    models.SmallIntegerField,
    models.CharField,
    models.TextField,
    models.BooleanField,
    models.DateTimeField,
    models.JSONField,
    models.ForeignKey,
    models.FloatField,
)


def _json_pick(field, i: int) -> str:
    if isinstance(field, models.JSONField):
        return f"nullif(r.v->{i}, 'null'::jsonb)"
    return f"(r.v->>{i})::{field.db_type(connection)}"


# Django's connections prepare nothing (`prepare_threshold` None, for poolers' sake); the
# threshold `prepared_cursor` sets instead is never reached by counting, so only its own
# statements, which ask for it, are prepared.
_ONLY_WHEN_ASKED = 2**62


class _PreparingCursor(psycopg.Cursor):
    """Binds on the server and prepares each statement on its connection's first use of it."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        return super().execute(query, params, prepare=True, binary=binary)


@contextmanager
def prepared_cursor() -> Iterator:
    """A cursor for a statement run on every read and ack, with the same SQL every time (the
    group-and-positions join, the floors' UPDATE): on PostgreSQL (and `CBR_DB_PREPARED`, the
    default) parsed and planned once per connection and then only executed. The join took
    0.56 ms of the server's time planned afresh each time, 0.10 ms prepared (pgbench,
    bench/RESULTS.md 2026-11-27). Otherwise, and on SQLite, Django's own cursor; and while
    queries are logged (`DEBUG`, a test capturing them), which a prepared statement's execution
    would leave without its SQL. Django's execute wrappers and error classes apply to it as to
    any cursor."""
    if connection.vendor != "postgresql" or not settings.CBR_DB_PREPARED or connection.queries_logged:
        with connection.cursor() as plain:
            yield plain
        return
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    raw = connection.connection
    with connection.wrap_database_errors:
        if raw.prepare_threshold is None:
            raw.prepare_threshold = _ONLY_WHEN_ASKED
        cursor = _PreparingCursor(raw)
    connection.validate_thread_sharing()
    with connection.make_cursor(cursor) as wrapped:  # type: ignore[arg-type]  # (stubs: it wraps a DB-API cursor)
        yield wrapped


def run_prepared(sql: str, params: list, fetch: bool = False) -> list | None:
    """Run a statement of every read and ack on `prepared_cursor`; its rows when `fetch`.

    The first statement of a request on a connection kept from an earlier one is also the
    connection's health check. Django would first send `SELECT 1` (`CONN_HEALTH_CHECKS`), a
    round trip on every read and ack; here the statement goes at once, and when it fails because
    the connection was lost meanwhile (a restart, a failover, `pg_terminate_backend`), it is sent
    again, once, on a new connection, as the health check would have replaced it first. Only
    outside a transaction, and only on PostgreSQL (SQLite has no connection to lose)."""
    # Django's own health-check state (`CONN_HEALTH_CHECKS`, Django 4.1+; not in the stubs)
    checking = (
        connection.vendor == "postgresql"
        and connection.connection is not None
        and getattr(connection, "health_check_enabled", False)
        and not getattr(connection, "health_check_done", True)
        and not connection.in_atomic_block
    )
    if checking:
        setattr(connection, "health_check_done", True)  # this statement is the check
    try:
        return _run(sql, params, fetch)
    except (OperationalError, InterfaceError):
        if not checking or connection.is_usable():
            raise  # not a lost connection: the error is the statement's own
        connection.close()
        return _run(sql, params, fetch)


def _run(sql: str, params: list, fetch: bool) -> list | None:
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if fetch else None

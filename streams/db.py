"""Writing many rows at once where the ORM would be slow: Django's `bulk_update` builds a CASE
expression per row and field (seconds for a few thousand rows); one UPDATE … FROM arrays
(PostgreSQL) or a VALUES list (SQLite 3.33+) does the same in milliseconds."""

from __future__ import annotations

from django.db import connection

CHUNK = 500


def update_rows(model, fields: list[str], rows: list[tuple]) -> None:
    """Set `fields` of the rows of `model` named by primary key: rows are (pk, *values)."""
    if not rows:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    pk = connection.ops.quote_name(model._meta.pk.column)
    columns = [model._meta.get_field(f).column for f in fields]
    names = ", ".join(connection.ops.quote_name(c) for c in ["id", *columns])
    assignments = ", ".join(
        f"{connection.ops.quote_name(c)} = v.{connection.ops.quote_name(c)}" for c in columns
    )
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


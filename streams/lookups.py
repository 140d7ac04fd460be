"""The stream a publish appends to, looked up by one prepared statement (`streams.db`): a
publish of one event spends most of its time in Django, and the ORM's query for the row (built
afresh, and sent after a `SELECT 1` health check) was a third of it. The process remembers what
it found (`PUBLISHED_STREAMS`, a `streams.memo.Memo`), forgotten by every process as soon as a
stream or a scope is saved or deleted, or a retention cycle marks a stream full or frees it: the
lookup's round trip was a fifth of a one-event publish."""

from __future__ import annotations

import copy
import functools
from typing import Any, cast

from django.db import connection
from django.db.models import Field
from django.db.models.signals import post_delete, post_save

from streams.db import run_prepared
from streams.memo import Memo
from streams.models import Scope, Stream

# what a publish reads of the stream (the rest stays deferred on the instance)
PUBLISH_FIELDS = (
    "id",
    "storage_key",
    "segment_count",
    "scaled_segments",
    "max_delay_s",
    "delayed_index",
    "cleanup_policy",
    "full_since",
    "publish_rate",
)


@functools.cache
def _publish_query(vendor: str) -> tuple[str, list[str], list[tuple[int, Any, Any]]]:
    """The SQL, the fields' attribute names, and their value converters (index, converter,
    column), as Django's compiler applies them."""
    q = connection.ops.quote_name
    # in the model's order: `Model.from_db` takes the values of the fields it is given so
    fields = [f for f in Stream._meta.concrete_fields if f.name in PUBLISH_FIELDS]
    converters = []
    for i, f in enumerate(fields):
        col = f.get_col("s")
        converters += [
            (i, conv, col) for conv in [*connection.ops.get_db_converters(col), *col.get_db_converters(connection)]
        ]
    columns = ", ".join(f"s.{q(cast(str, f.column))}" for f in fields)
    scope_fk = cast(Field, Stream._meta.get_field("scope")).column
    sql = (
        f"SELECT {columns} FROM {q(Stream._meta.db_table)} s JOIN {q(Scope._meta.db_table)} sc "
        f"ON sc.{q('id')} = s.{q(cast(str, scope_fk))} WHERE sc.{q('name')} = %s AND s.{q('name')} = %s"
    )
    return sql, [f.attname for f in fields], converters


PUBLISHED_STREAMS = Memo("streams", "CBR_STREAM_CACHE_S")


def stream_for_publish(scope: str, name: str) -> Stream | None:
    """The stream `scope/name` with the fields a publish reads (a copy of its own), or None (not
    remembered: a stream made next is found at once)."""
    found, ticket = PUBLISHED_STREAMS.get((scope, name))
    if found is None:
        found = _look_up(scope, name)
        if found is None:
            return None
        PUBLISHED_STREAMS.keep((scope, name), ticket, found)
    return copy.copy(found)


def forget_streams(**_signal_arguments: Any) -> None:
    """What a publish reads of a stream changed (a signal receiver as it is)."""
    PUBLISHED_STREAMS.forget()


for _model in (Stream, Scope):
    post_save.connect(forget_streams, sender=_model, dispatch_uid=f"cbr-published-streams-{_model.__name__}-saved")
    post_delete.connect(forget_streams, sender=_model, dispatch_uid=f"cbr-published-streams-{_model.__name__}-deleted")


def _look_up(scope: str, name: str) -> Stream | None:
    sql, names, converters = _publish_query(connection.vendor)
    rows = run_prepared(sql, [scope, name], fetch=True)
    if not rows:
        return None
    values = list(rows[0])
    for i, conv, col in converters:
        values[i] = conv(values[i], col, connection)
    return Stream.from_db(connection.alias, names, values)

"""A reader group's floors: one `Slot` per segment of each of its streams (the persisted
`ReadPosition`, with its floor, handed count and delivery counts, and the Redis tracker), floors
persisted only upwards, the group's last-seen time and consumers, and the clock every lease and
delay uses (`clock`; tests replace it)."""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from django.db import IntegrityError, connection, transaction
from django.db.models import Field, ForeignObjectRel, Model
from django.db.models.expressions import Col
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from groups.ack_tracker import KnownCounts, SegmentTracker
from groups.models import DeliveryCount, ReaderGroup, ReadPosition, Subscription
from store.framing import Frame, Record
from store.redis_connection import get_redis
from streams import wait_stats
from streams.db import run_prepared
from streams.delaying.index import state_key as delayed_state_key
from streams.logs import stream_log
from streams.lookups import PUBLISHED_STREAMS
from streams.memo import Memo, Ticket
from streams.models import Scope, Stream

SEEN_TTL_S = 30 * 86400
clock = time.time  # the clock of leases and delays (tests replace it)


@dataclass
class Slot:
    """One group's position on one segment of one of its streams."""

    subscription: Subscription
    stream: Stream
    segment: str
    position: ReadPosition
    tracker: SegmentTracker


def slots(group: ReaderGroup) -> list[Slot]:
    """The group's positions on every segment of its streams (rows made on first use). One query
    when every position exists (`group_and_slots`'s: each subscription and stream made once,
    not once per segment)."""
    positions = _load_positions(group.pk)
    for p in positions:
        p.subscription.reader_group = group  # the caller's group, not a copy of it
    return _slots_of(group, positions)


# The tables joined by `group_and_slots`, each as (model, alias, the alias it hangs from and the
# foreign key that points at it): position → subscription → stream → scope, subscription → group → scope.
_JOINED = (
    (ReadPosition, "p", None, None),
    (Subscription, "s", "p", "subscription"),
    (Stream, "st", "s", "stream"),
    (Scope, "sc", "st", "scope"),
    (ReaderGroup, "g", "s", "reader_group"),
    (Scope, "gs", "g", "scope"),
)


# Columns `group_and_slots` leaves out: what no read or ack looks at, and most of what each row
# would cost to load (times, JSON); an instance has them deferred (loaded if ever asked for).
_NOT_LOADED = {
    Scope: {"created_at"},
    Stream: {"full_since", "inherited", "description", "created_at", "updated_at"},
    ReaderGroup: {"removed_streams", "start_at", "created_at", "updated_at"},
    Subscription: {"acknowledgement_sizes", "created_at"},
    ReadPosition: {"updated_at"},
}

# The models of one row of `group_and_slots`, in `_JOINED`'s order.
_Row = tuple[ReadPosition, Subscription, Stream, Scope, ReaderGroup, Scope]

# A joined model in a row: the model, its fields' attribute names, its column slice (start, stop),
# its value converters (index, converter, column) and the index of its primary key.
_Layout = tuple[type[Model], list[str], int, int, list[tuple[int, Any, Col]], int]


def _column(field: Field | ForeignObjectRel) -> str:
    """A concrete field's column (the stubs allow for a field without one)."""
    if not isinstance(field, Field) or field.column is None:
        raise TypeError(f"{field!r} has no column")
    return field.column


@functools.cache
def _positions_query(vendor: str, by_pk: bool) -> tuple[str, list[_Layout]]:
    """The SQL of `group_and_slots` (made once: it is the same for every request), the group
    found by its scope and name or (`by_pk`) by its id, and for each joined model the attribute
    names of the fields it loads, their column slice and value converters."""
    q = connection.ops.quote_name
    columns: list[str] = []
    layout: list[_Layout] = []
    for model, alias, _, _ in _JOINED:
        fields = [f for f in model._meta.concrete_fields if f.name not in _NOT_LOADED.get(model, ())]
        converters: list[tuple[int, Any, Col]] = []  # (index, converter, column) as Django's compiler applies them
        for i, f in enumerate(fields):
            col = f.get_col(alias)
            converters += [
                (i, conv, col) for conv in [*connection.ops.get_db_converters(col), *col.get_db_converters(connection)]
            ]
        pk = fields.index(model._meta.pk)
        layout.append((model, [f.attname for f in fields], len(columns), len(columns) + len(fields), converters, pk))
        columns += [f"{alias}.{q(_column(f))}" for f in fields]
    joins = []
    for model, alias, parent, fk in _JOINED[1:]:
        parent_model = next(m for m, a, _, _ in _JOINED if a == parent)
        column = _column(parent_model._meta.get_field(fk))
        joins.append(
            f"JOIN {q(model._meta.db_table)} {alias} ON {alias}.{q(_column(model._meta.pk))} = {parent}.{q(column)}"
        )
    name = q("name")
    where = f"g.{q(_column(ReaderGroup._meta.pk))} = %s" if by_pk else f"gs.{name} = %s AND g.{name} = %s"
    sql = (
        f"SELECT {', '.join(columns)} FROM {q(ReadPosition._meta.db_table)} p {' '.join(joins)} "
        f"WHERE {where} ORDER BY sc.{name}, st.{name}, p.{q('segment_id')}"
    )
    return sql, layout


def _load_positions(*found_by: str | int) -> list[ReadPosition]:
    """The positions of a group (found by its scope and name, or by its id) with their
    subscription, stream (and its scope) and the group (and its scope) attached, as
    `select_related` would give them, from one prepared query."""
    sql, layout = _positions_query(connection.vendor, len(found_by) == 1)
    rows = cast(list, run_prepared(sql, list(found_by), fetch=True))
    made: dict[tuple[type[Model], object], Model] = {}  # (model, pk) -> instance: one object per row of each table
    out: list[ReadPosition] = []
    for row in rows:
        objs: list[Model] = []
        for model, names, start, stop, converters, pk in layout:
            # a row per position: the group, its subscriptions and streams repeat from row to row,
            # and each is made (its values converted: JSON, times) once, from its first row
            key = (model, row[start + pk])  # a primary key is an integer: no converter
            obj = made.get(key)
            if obj is None:
                values = list(row[start:stop])
                for i, conv, col in converters:
                    values[i] = conv(values[i], col, connection)
                obj = made[key] = model.from_db(connection.alias, names, values)
            objs.append(obj)
        position, sub, stream, stream_scope, group, group_scope = cast(_Row, tuple(objs))
        stream.scope = stream_scope
        group.scope = group_scope
        sub.stream = stream
        sub.reader_group = group
        position.subscription = sub
        out.append(position)
    return out


# No entries: its ticket says whether a group's generation may have moved since it was taken (a
# seek, new settings, a stream removed, a group deleted: each says so, `group_changed`). A read
# that waited reads its group again only then (`reading._as_it_is_now`).
GROUP_CHANGES = Memo("groups", None)


def group_changed() -> None:
    """Inside the transaction that moves a group's generation or deletes it: reads waiting in any
    process take the group as it is now when next woken. Call it before announcing anything to
    the group's waiting reads: its message goes first once the transaction commits."""
    GROUP_CHANGES.forget()


# What every read and ack looks up first (the group and its slots), remembered by the web process
# (`group_and_slots`). An entry is trusted while nothing it was made from can have changed: no
# group changed (`GROUP_CHANGES`: a seek, new settings, streams added or removed, a deletion), no
# stream or scope was saved or deleted (`PUBLISHED_STREAMS`: a scale, new settings), no group or
# subscription was saved or deleted through the ORM (this memo's own), and for at most
# `CBR_GROUP_CACHE_S` seconds (changes made around the ORM). Its positions' floors and `handed`
# are as this process last wrote or read them: a floor another process moved since is older
# here, which every read already meets (a read that waits holds its group for its whole wait:
# floors only move up, in the database by `GREATEST`; a state Redis starts reads them afresh).
GROUPS_READ = Memo("group-reads", "CBR_GROUP_CACHE_S")


def _changes_tickets() -> tuple[Ticket | None, Ticket | None]:
    return GROUP_CHANGES.ticket(), PUBLISHED_STREAMS.ticket()


def group_and_slots(scope: str, name: str) -> tuple[ReaderGroup, list[Slot]] | None:
    """The group `scope/name` and its `slots`, found together in one query when it has positions
    (every read and ack asks for both), or as this process last found them while that still holds
    (`GROUPS_READ`); None when no such group exists. The objects are shared by the process's
    threads (the list is the caller's own)."""
    remembered, ticket = GROUPS_READ.get((scope, name))
    tickets = _changes_tickets()  # before the lookup: a change made during it is seen next time
    if remembered is not None and remembered[0] == tickets:
        group, group_slots = remembered[1]
        return group, list(group_slots)
    found = _group_and_slots(scope, name)
    if found is not None and None not in tickets:
        GROUPS_READ.keep((scope, name), ticket, (tickets, found))
        return found[0], list(found[1])
    return found


def _group_and_slots(scope: str, name: str) -> tuple[ReaderGroup, list[Slot]] | None:
    positions = _load_positions(scope, name)
    group: ReaderGroup | None
    if positions:
        group = positions[0].subscription.reader_group
    else:  # a group without positions yet (or none): the plain way
        group = ReaderGroup.objects.select_related("scope").filter(scope__name=scope, name=name).first()
        if group is None:
            return None
    return group, _slots_of(group, positions)


def _slots_of(group: ReaderGroup, positions: list[ReadPosition]) -> list[Slot]:
    by_sub: dict[int, dict[str, ReadPosition]] = defaultdict(dict)
    subs: dict[int, Subscription] = {}
    for p in positions:
        by_sub[p.subscription_id][p.segment_id] = p
        subs[p.subscription_id] = p.subscription
    # Subscriptions are made with their positions (and migration 0004 gave older ones theirs):
    # only a group with none, or a stream with fewer rows than segments, needs a second look.
    if not subs or any(not by_sub[sid].keys() >= set(sub.stream.layout.held_ids) for sid, sub in subs.items()):
        for sub in Subscription.objects.filter(reader_group=group).select_related("stream__scope"):
            missing = [s for s in sub.stream.layout.held_ids if s not in by_sub[sub.pk]]
            if missing:
                by_sub[sub.pk].update(make_positions(sub, missing))
            subs[sub.pk] = sub
    redis = get_redis()
    out = []
    for sub in sorted(subs.values(), key=lambda s: (s.stream.scope.name, s.stream.name)):
        layout = sub.stream.layout
        ends = stream_log(sub.stream).sealed_ends() if len(layout.held_ids) > len(layout.active_ids) else {}
        for seg in layout.held_ids:  # (a retired segment has nothing to hand out)
            if seg in ends and by_sub[sub.pk][seg].floor >= ends[seg]:
                continue  # a sealed segment the group has processed whole: nothing more to do there
            # keyed by the subscription: a stream dropped and added again starts afresh
            tracker = SegmentTracker(redis, sub.state_key, seg, delayed_state_key(sub.stream.storage_key))
            out.append(Slot(sub, sub.stream, seg, by_sub[sub.pk][seg], tracker))
    return out


def make_positions(sub: Subscription, segments: list[str]) -> dict[str, ReadPosition]:
    """Positions start where the group's cut starts (its start position, or where a MANUAL
    subscriber says it is): the head for a segment the cut does not name."""
    ends = stream_log(sub.stream).ends()
    cut = sub.acknowledgement_cut or {}
    rows = [ReadPosition(subscription=sub, segment_id=s, floor=max(cut.get(s, 0), ends[s][0].offset)) for s in segments]
    ReadPosition.objects.bulk_create(rows, ignore_conflicts=True)
    return {p.segment_id: p for p in ReadPosition.objects.filter(subscription=sub, segment_id__in=segments)}


def persist_floors(moves: list[tuple[Slot, int, int]], handed: dict[int, tuple[Slot, int]] | None = None) -> None:
    """Persist (slot, floor, missed) moves, and how far reads handed out (`handed`: by position,
    (slot, the state's `next` after the read)), in one statement. Floors and `handed` only move
    forward: each row takes the greater of its value and the new one."""
    merged: dict[int, list] = {}  # position -> [slot, floor, missed, handed]
    for slot, floor, missed in moves:  # one slot may move more than once in a request
        row = merged.setdefault(slot.position.id, [slot, floor, 0, 0])
        row[1], row[2] = max(row[1], floor), row[2] + missed
    for position, (slot, upto) in (handed or {}).items():
        row = merged.setdefault(position, [slot, 0, 0, 0])
        row[3] = max(row[3], upto)
    rows = [
        (slot, floor, missed, upto)
        for slot, floor, missed, upto in merged.values()
        if floor > slot.position.floor or missed or upto > slot.position.handed
    ]
    if not rows:
        return
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    if connection.vendor == "postgresql":
        _update_positions_postgresql([(slot.position.id, f, m, h) for slot, f, m, h in rows], now)
    else:
        _update_positions([(slot.position.id, f, m, h) for slot, f, m, h in rows], now)
    for slot, floor, m, h in rows:
        slot.position.floor = max(slot.position.floor, floor)
        slot.position.missed += m
        slot.position.handed = max(slot.position.handed, h)


def _update_positions_postgresql(rows: list[tuple[int, int, int, int]], now: object) -> None:
    """Each (position, floor, missed, handed) row: the floor and `handed` raised to the row's,
    `missed` added to. One statement whatever the number of rows, its arguments arrays (the
    same SQL each time: prepared once per connection, however many groups a pass reads). The
    rows are locked in id order first: two requests of one group (a read and an ack, or two
    consumers' acks) updating the same rows, each in the order its scan met them, deadlocked (one
    answered 503). One row is updated by a plain statement: the arrays and the locking step
    doubled its time (1.0 against 0.45 ms on PostgreSQL 15, docs/decisions.md)."""
    q = connection.ops.quote_name
    table, pk = q(ReadPosition._meta.db_table), q("id")
    floor, missed, handed = q("floor"), q("missed"), q("handed")
    if len(rows) == 1:  # one row (a group of one segment): nothing to order, half the time
        (row_id, row_floor, row_missed, row_handed) = rows[0]
        one = (
            f"UPDATE {table} SET {floor} = GREATEST({floor}, %s), {missed} = {missed} + %s, "
            f"{handed} = GREATEST({handed}, %s), {q('updated_at')} = %s WHERE {pk} = %s"
        )
        run_prepared(one, [row_floor, row_missed, row_handed, now, row_id])
        return
    sql = (
        f"UPDATE {table} SET {floor} = GREATEST({table}.{floor}, v.floor), "
        f"{missed} = {table}.{missed} + v.missed, {handed} = GREATEST({table}.{handed}, v.handed), "
        f"{q('updated_at')} = %s "
        "FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[]) AS v(id, floor, missed, handed) "
        f"WHERE {table}.{pk} = v.id AND {table}.{pk} IN "
        f"(SELECT {pk} FROM {table} WHERE {pk} = ANY(%s::bigint[]) ORDER BY {pk} FOR UPDATE)"
    )
    ids, floors, misses, handeds = (_int_array(column) for column in zip(*rows, strict=True))
    run_prepared(sql, [now, ids, floors, misses, handeds, ids])


def _int_array(values: tuple[int, ...]) -> str:
    """Integers as PostgreSQL's text form of an array (`{1,2,3}`), cast by the statement: psycopg's
    own dumping of a Python list looks at each element in Python (24 µs a read of a 1 000-read
    pass, for the floors' five arrays)."""
    return "{" + ",".join(map(str, values)) + "}"


def _update_positions(rows: list[tuple[int, int, int, int]], now: object) -> None:
    """As `_update_positions_postgresql`, for SQLite (which serialises writers): one statement
    of `CASE`s, written directly (`.update(floor=Greatest(F("floor"), Case(When(pk=…))), …)`
    cost more to build than to run)."""
    q = connection.ops.quote_name
    pk, floor_col, missed_col, handed_col = q("id"), q("floor"), q("missed"), q("handed")
    when_floor = " ".join(f"WHEN {pk} = %s AND {floor_col} < %s THEN %s" for _ in rows)
    when_missed = " ".join(f"WHEN {pk} = %s THEN %s" for _ in rows)
    when_handed = " ".join(f"WHEN {pk} = %s AND {handed_col} < %s THEN %s" for _ in rows)
    table = q(ReadPosition._meta.db_table)
    sql = (
        f"UPDATE {table} SET {floor_col} = CASE {when_floor} ELSE {floor_col} END, "
        f"{missed_col} = {missed_col} + CASE {when_missed} ELSE 0 END, "
        f"{handed_col} = CASE {when_handed} ELSE {handed_col} END, {q('updated_at')} = %s "
        f"WHERE {pk} IN ({', '.join(['%s'] * len(rows))})"
    )
    params: list = [v for p, f, _, _ in rows for v in (p, f, f)]
    params += [v for p, _, m, _ in rows for v in (p, m)]
    params += [v for p, _, _, h in rows for v in (p, h, h)]
    params += [now, *(p for p, _, _, _ in rows)]
    run_prepared(sql, params)


def fresh_positions(found: list[Slot]) -> None:
    """The slots' floors and `handed` raised to the database's, in one query (a slot may be one
    this process remembered, `GROUPS_READ`, whose floor another process has moved since)."""
    by_id = {slot.position.id: slot for slot in found}
    for pk, floor, handed in ReadPosition.objects.filter(pk__in=by_id).values_list("pk", "floor", "handed"):
        position = by_id[pk].position
        position.floor, position.handed = max(position.floor, floor), max(position.handed, handed)


def persist_delivery_counts(counts: list[tuple[int, int, int]]) -> None:
    """Persist the delivery counts of redeliveries, each (position, offset, count), in one
    statement (a row per offset keeps its highest count), and drop the rows of those positions
    that their floors passed. A position gone meanwhile (a seek or a change of streams started
    the group afresh while the read was in flight) takes nothing: its counts went with it."""
    best: dict[tuple[int, int], int] = {}
    for position, offset, count in counts:
        best[position, offset] = max(best.get((position, offset), 0), count)
    q = connection.ops.quote_name
    table, positions_table = q(DeliveryCount._meta.db_table), q(ReadPosition._meta.db_table)
    pos, off, cnt = q("position_id"), q("offset"), q("count")
    values = ", ".join(["(%s, %s, %s)"] * len(best))
    with connection.cursor() as cursor:
        insert = (
            f"WITH counted (p, o, c) AS (VALUES {values}) "
            f"INSERT INTO {table} ({pos}, {off}, {cnt}) SELECT p, o, c FROM counted "
            f"WHERE EXISTS (SELECT 1 FROM {positions_table} WHERE {positions_table}.{q('id')} = counted.p) "
            f"ON CONFLICT ({pos}, {off}) DO UPDATE SET {cnt} = "
            f"CASE WHEN excluded.{cnt} > {table}.{cnt} THEN excluded.{cnt} ELSE {table}.{cnt} END"
        )
        params = [v for (p, o), c in best.items() for v in (p, o, c)]
        try:
            with transaction.atomic():  # (a savepoint: the statement may fail alone)
                cursor.execute(insert, params)
        except IntegrityError:
            # a position deleted while the statement ran (its EXISTS saw it, its foreign key
            # did not): once more, the statement sees it gone and leaves its counts out
            cursor.execute(insert, params)
        ids = sorted({p for p, _ in best})
        cursor.execute(
            f"DELETE FROM {table} WHERE {pos} IN ({', '.join(['%s'] * len(ids))}) AND {off} < "
            f"(SELECT {q('floor')} FROM {positions_table} WHERE {positions_table}.{q('id')} = {table}.{pos})",
            ids,
        )


def known_counts(fresh: list[Slot]) -> dict[int, KnownCounts]:
    """What the database knows now of the deliveries on these segments (by position), for the
    Redis state a read starts there; each slot's position is brought up to date with it (its
    floor may have moved since the request began)."""
    by_pk = {slot.position.id: slot for slot in fresh}
    for pk, floor, handed in ReadPosition.objects.filter(pk__in=by_pk).values_list("pk", "floor", "handed"):
        position = by_pk[pk].position
        position.floor, position.handed = max(position.floor, floor), max(position.handed, handed)
    counts: dict[int, dict[int, int]] = {pk: {} for pk in by_pk}
    rows = DeliveryCount.objects.filter(position_id__in=by_pk).values_list("position_id", "offset", "count")
    for pk, offset, count in rows:
        if offset >= by_pk[pk].position.floor:
            counts[pk][offset] = count
    return {pk: KnownCounts(slot.position.handed, counts[pk]) for pk, slot in by_pk.items()}


def seen_key(group_key: str) -> str:
    return f"cbr:rg:{{{group_key}}}:seen"


def mark_seen(group: ReaderGroup, now: float, pipe=None) -> None:
    """A consumer of the group read or acknowledged: the group is alive (its checkpoints count as
    acknowledgements for `subscriber_timeout_s`; a group nobody consumes goes stale). With `pipe`,
    queued on that pipeline."""
    (pipe if pipe is not None else get_redis()).set(seen_key(group.state_key), now, ex=SEEN_TTL_S)


def read_noted(group: ReaderGroup, consumer: str, now: float) -> tuple[list[str], list]:
    """What `mark_seen` and `note_consumer(..., "r", ...)` write for a read, as the keys and
    arguments of a script that writes them itself (`SegmentTracker.look`): the last-seen key and
    the consumers hash; the time, the consumer's field, the last-seen key's TTL."""
    return [seen_key(group.state_key), consumers_key(group.state_key)], [now, f"r:{consumer or 'default'}", SEEN_TTL_S]


def consumers_key(group_key: str) -> str:
    return f"cbr:rg:{{{group_key}}}:consumers"


CONSUMER_SHOWN_S = 86400  # consumers heard from within a day are shown; older ones are dropped then
RATE_WINDOW_S = 60  # a consumer's read and ack rates: over the last minute
RATE_KEEP_S = 3 * RATE_WINDOW_S  # a window's counts are kept while the next one still needs them


def rates_key(group_key: str, window: int) -> str:
    """A hash of the events handed to ("r:<consumer>") and acknowledged by ("a:<consumer>") the
    group's consumers in one window (`now // RATE_WINDOW_S`)."""
    return f"cbr:rg:{{{group_key}}}:rates:{window}"


def note_consumer(group: ReaderGroup, consumer: str, what: str, now: float, pipe) -> None:
    """A consumer (by the name it gives, `default` without one) read (`what` "r") or acknowledged
    ("a") now: one HSET on the request's pipeline, no round trip of its own."""
    pipe.hset(consumers_key(group.state_key), f"{what}:{consumer or 'default'}", now)


def count_consumer(group: ReaderGroup, consumer: str, what: str, n: int, now: float) -> None:
    """`n` events handed to a consumer (`what` "r") or acknowledged by it ("a"): its total (the
    consumers hash's "nr:"/"na:" fields) and its window's count (`rates_key`), counted in this
    process and added into Redis within a second (`streams.wait_stats`): no round trip."""
    if n <= 0:
        return
    name = consumer or "default"
    wait_stats.counts.add_to(consumers_key(group.state_key), f"n{what}:{name}", n)
    window = rates_key(group.state_key, int(now // RATE_WINDOW_S))
    wait_stats.counts.add_to(window, f"{what}:{name}", n, RATE_KEEP_S)


def note_waiting(group: ReaderGroup, consumer: str, timeout_s: float) -> None:
    """A consumer's read waits from now for at most `timeout_s` (until its next look): the
    console shows it waiting until the read looks again (its next `r`) or that time passes."""
    note_waiting_all([(group, consumer, timeout_s)])


def note_waiting_all(waits: list[tuple[ReaderGroup, str, float]]) -> None:
    """`note_waiting` of many reads (group, consumer, timeout): set in this process and written
    into Redis within a second with the consumers' counts (`streams.wait_stats`), no round trip.
    Shown for the console alone, which compares its times with the consumer's last read: the
    order in which the two reach Redis does not matter."""
    if not waits:
        return
    now = clock()
    for group, consumer, timeout_s in waits:
        wait_stats.counts.set_in(
            consumers_key(group.state_key), f"w:{consumer or 'default'}", f"{now} {now + timeout_s}"
        )


def last_seen(group: ReaderGroup) -> datetime | None:
    value = get_redis().get(seen_key(group.state_key))
    return datetime.fromtimestamp(float(value), tz=UTC) if value is not None else None


def forget_trackers(subscriptions: list[tuple[str, list[str]]], group_key: str | None = None) -> None:
    """Drop the Redis state of these subscriptions, each as (state key, segment ids): their group
    or stream was deleted, or the group stopped reading the stream. With `group_key`, the group's
    own state too."""
    keys = [seen_key(group_key), consumers_key(group_key)] if group_key else []
    for sub_key, segments in subscriptions:
        for seg in segments:
            keys += SegmentTracker.keys_of(sub_key, seg)
    redis = get_redis()
    for i in range(0, len(keys), 1000):
        redis.delete(*keys[i : i + 1000])


def tracker_names(subscriptions) -> list[tuple[str, list[str]]]:
    """What `forget_trackers` takes, for these subscriptions (their streams loaded)."""
    return [(sub.state_key, sub.stream.segment_ids) for sub in subscriptions]


_Known = TypeVar("_Known", bound=Record | Frame)


def records_at(seg, offsets: list[int], known: dict[int, _Known]) -> dict[int, _Known | Record]:
    """The records at these offsets: those already read (as they were read), the rest read in
    contiguous runs."""
    out: dict[int, _Known | Record] = {o: known[o] for o in offsets if o in known}
    missing = sorted(o for o in offsets if o not in known)
    i = 0
    while i < len(missing):
        j = i
        while j + 1 < len(missing) and missing[j + 1] == missing[j] + 1:
            j += 1
        start = missing[i]
        while start <= missing[j]:  # a read stops at its byte cap: go on until the run is whole
            got = seg.read(start, missing[j] - start + 1)
            if not got:
                break  # truncated away (or gone): the caller decides
            for rec in got:
                if missing[i] <= rec.offset <= missing[j]:
                    out[rec.offset] = rec
            start = got[-1].offset + 1
        i = j + 1
    return out


def forget_groups(**_signal_arguments: Any) -> None:
    """What reads and acks remember of groups changed (a signal receiver as it is)."""
    GROUPS_READ.forget()


for _model in (ReaderGroup, Subscription):
    post_save.connect(forget_groups, sender=_model, dispatch_uid=f"cbr-groups-read-{_model.__name__}-saved")
    post_delete.connect(forget_groups, sender=_model, dispatch_uid=f"cbr-groups-read-{_model.__name__}-deleted")

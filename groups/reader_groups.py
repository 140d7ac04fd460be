"""Reader groups and their subscriptions: the only place that changes them (check_*, do_*).

A reader group whose retention type is not NONE is a subscriber of each of its streams: its
acknowledgement cut holds data back. The cut starts at the group's start position (head or tail)
the moment it subscribes, so it protects data from its first moment (docs/design/retention.md: beyond
Pravega, which leaves it empty until the first publish).
"""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import F
from django.dispatch import receiver
from django.utils import timezone

from domain.acks import check_backoff
from domain.errors import FieldError
from domain.names import split_stream_name
from domain.rate_limits import check_dispatch_rate
from domain.start_positions import Position, behind, check_stream_cuts, parse_position, parse_seek
from groups.acknowledgement import (
    check_generation,
    check_stream_cut,
    check_truncation_cut,
    check_truncation_cuts,
    publish_cut,
    publish_cuts,
    set_acknowledgement_cut,
)
from groups.consuming import current_floors, forget_trackers, group_changed, tracker_names
from groups.models import ReaderGroup, ReadPosition, Subscription
from streams.db import delete_pairs
from streams.logs import stream_log
from streams.models import Scope, Stream, new_storage_key
from streams.signals import holds_released, segments_retired, stream_deleted, stream_scaled
from streams.waking import group_channel, publish_notice


def check_streams(names: object, field: str = "streams") -> list[Stream]:
    if not isinstance(names, list) or not names:
        raise FieldError(field, "must be a non-empty list of 'scope/name'")
    streams = []
    for i, full in enumerate(names):
        scope, name = split_stream_name(full, f"{field}[{i}]")
        stream = Stream.objects.filter(scope__name=scope, name=name).select_related("scope").first()
        if stream is None:
            raise FieldError(f"{field}[{i}]", f"no stream {full}", "stream_not_found")
        if stream in streams:
            raise FieldError(f"{field}[{i}]", f"{full} is named twice")
        streams.append(stream)
    return streams


def position_cut(stream: Stream, position: Position, field: str) -> dict[str, int] | None:
    """Where `position` lies on `stream`, checked: the head, the tail, the first event published
    at or after a time, or a given cut (covering every segment, within [head, tail]: what no
    longer exists cannot be read, and what does not exist yet cannot be skipped to). None: the
    position names cuts of other streams only."""
    log = stream_log(stream)
    if position.kind == "head":
        return log.head_cut()
    if position.kind == "tail":
        return log.tail_cut()
    if position.kind == "time":
        assert position.time is not None
        return log.cut_at_time(int(position.time.timestamp() * 1000))
    if stream.full_name not in position.cuts:
        return None
    return check_stream_cut(stream, position.cuts[stream.full_name], f"{field}.{stream.full_name}")


def _check_cut_streams(position: Position, streams: list[Stream], field: str) -> None:
    """A position's cuts name only the group's streams."""
    names = {s.full_name for s in streams}
    for name in position.cuts:
        if name not in names:
            raise FieldError(f"{field}.{name}", f"the group does not read {name}", "subscriber_not_found")


def check_start_and_end(
    start: object, end: object, streams: list[Stream], now: datetime
) -> tuple[Position, dict[str, dict[str, int]]]:
    """A new group's `start` and `end_stream_cuts`: the start parsed and its cuts checked against
    the streams; each end cut covering its stream's segments within [head, tail] and not behind
    where the group starts there (a bounded group would end before it began)."""
    position = parse_position(start, "start", now)
    _check_cut_streams(position, streams, "start.stream_cuts")
    starts = {s.full_name: position_cut(s, position, "start.stream_cuts") for s in streams}
    if end is None or end == {}:
        return position, {}
    ends = Position("stream_cuts", cuts=check_stream_cuts(end, "end_stream_cuts"))
    _check_cut_streams(ends, streams, "end_stream_cuts")
    checked = {}
    for stream in streams:
        cut = position_cut(stream, ends, "end_stream_cuts")
        if cut is None:
            continue
        begin = starts[stream.full_name] or stream_log(stream).head_cut()
        seg = behind(cut, begin)
        if seg is not None:
            raise FieldError(
                f"end_stream_cuts.{stream.full_name}.{seg}",
                f"offset {cut[seg]} is behind the group's start there ({begin[seg]})",
            )
        checked[stream.full_name] = cut
    return position, checked


def _start_of(group: ReaderGroup) -> Position:
    if group.start == "time":
        return Position("time", time=datetime.fromisoformat(str(group.start_at).replace("Z", "+00:00")))
    if group.start == "stream_cuts":
        return Position("stream_cuts", cuts=group.start_at or {})
    return Position(group.start)


def _sizes_at(stream: Stream, cut: dict[str, int]) -> dict[str, int]:
    log = stream_log(stream)
    return {s: log.segment(s).size_till(o) for s, o in cut.items()}


def _floors(group: ReaderGroup, stream: Stream, position: Position, cut: dict[str, int]) -> dict[str, int]:
    """The read positions at `cut`; a group reading a compacted view from the head starts at the
    view's beginning: below its horizon it reads the view (offsets compacted away count as
    processed), then the live log."""
    from_view = group.read_compacted and stream.is_compacted and position.kind == "head"
    return {s: 0 if from_view else o for s, o in cut.items()}


def _subscribe(group: ReaderGroup, stream: Stream, now) -> Subscription:
    """The group's registration on a stream, with its positions, both at its start position (a
    stream its start cuts do not name: the head), and its end cut for a bounded group."""
    start = _start_of(group)
    cut = position_cut(stream, start, "start.stream_cuts") or stream_log(stream).head_cut()
    sub = Subscription.objects.create(
        reader_group=group,
        stream=stream,
        acknowledgement_cut=cut,
        acknowledgement_sizes=_sizes_at(stream, cut),
        acknowledged_at=now,
        end_cut=(group.end_stream_cuts or {}).get(stream.full_name),
    )
    ReadPosition.objects.bulk_create(
        ReadPosition(subscription=sub, segment_id=s, floor=o) for s, o in _floors(group, stream, start, cut).items()
    )
    return sub


def check_group_config(config: dict, group: ReaderGroup | None = None) -> dict:
    """Rules across a group's settings: the backoff (`domain.acks.check_backoff`) against the
    group's max_deliveries, as sent or as it stands. Returns the settings to store."""
    config = dict(config)
    if "dispatch_rate" in config:
        config["dispatch_rate"] = check_dispatch_rate(config["dispatch_rate"])  # null: no limit
    max_deliveries = config.get("max_deliveries", group.max_deliveries if group is not None else 5)
    if "backoff_s" in config:
        config["backoff_s"] = list(check_backoff(config["backoff_s"], max_deliveries))
    elif group is not None and len(group.backoff_s) > max_deliveries:
        raise FieldError(
            "max_deliveries",
            f"is below the number of waits in the group's backoff_s ({len(group.backoff_s)}): shorten backoff_s too",
        )
    return config


def do_create_reader_group(
    *, scope: str, name: str, streams: list[Stream], start: object = "head", end_stream_cuts: object = None, **config
) -> ReaderGroup:
    config = check_group_config(config)
    now = timezone.now()
    position, ends = check_start_and_end(start, end_stream_cuts, streams, now)
    as_json = position.as_json()
    config["start"] = position.kind
    config["start_at"] = None if isinstance(as_json, str) else next(iter(as_json.values()))
    config["end_stream_cuts"] = ends
    try:
        with transaction.atomic():
            scope_row, _ = Scope.objects.get_or_create(name=scope)
            group = ReaderGroup.objects.create(scope=scope_row, name=name, **config)
            for stream in streams:
                _subscribe(group, stream, now)
    except IntegrityError:
        raise FieldError("name", f"reader group {scope}/{name} exists", "duplicate") from None
    return group


FORMER_KEPT = 16  # the incarnations before a subscription's last seeks that it remembers


def do_seek(group: ReaderGroup, body: object) -> ReaderGroup:
    """Move the group (Pravega's resetReaderGroup, Pulsar's seek, JetStream's deliver policies)
    to `position` (head or tail), `time` or `stream_cuts` (streams left out stay where they are).
    Every target is checked before anything moves; then, in one transaction, the generation
    moves on by one, each moved stream's read positions start afresh at the target (its Redis
    state gets a new name: live leases are dropped, deliveries handed out before are refused),
    and a subscriber's acknowledgement cut moves there too, backwards as well as forwards. A
    seek backwards makes the subscriber hold data again from the target, which lies at or after
    the head: it can only hold what still exists."""
    now = timezone.now()
    position, generation = parse_seek(body, now)
    check_generation(group, generation)
    subs = list(
        Subscription.objects.filter(reader_group=group).select_related("stream__scope", "stream__retention_policy")
    )
    _check_cut_streams(position, [s.stream for s in subs], "stream_cuts")
    targets = [(sub, cut) for sub in subs if (cut := position_cut(sub.stream, position, "stream_cuts")) is not None]
    old_state = tracker_names([sub for sub, _ in targets])
    with transaction.atomic():
        locked = ReaderGroup.objects.select_for_update().get(pk=group.pk)
        if generation is not None:
            check_generation(locked, generation)  # an update that came first makes it stale
        ReaderGroup.objects.filter(pk=group.pk).update(generation=F("generation") + 1, updated_at=now)
        group_changed()
        moved = []
        for sub, cut in targets:
            sub.former_incarnations = [*sub.former_incarnations, sub.incarnation][-FORMER_KEPT:]
            sub.state_key = new_storage_key()
            fields = ["state_key", "former_incarnations"]
            if group.is_subscriber:
                if cut != (sub.acknowledgement_cut or {}):
                    moved.append(sub.stream)
                fields += set_acknowledgement_cut(sub, cut, now)
            sub.save(update_fields=fields)
            ReadPosition.objects.filter(subscription=sub).delete()  # a read in flight persists nothing here
            ReadPosition.objects.bulk_create(
                ReadPosition(subscription=sub, segment_id=s, floor=o)
                for s, o in _floors(group, sub.stream, position, cut).items()
            )
        if moved:
            holds_released.send(sender=ReaderGroup, streams=moved)
        transaction.on_commit(lambda: forget_trackers(old_state))
        transaction.on_commit(lambda: publish_notice([group_channel(group.state_key)]))  # waiting reads look again
    group.refresh_from_db()
    return group


def do_delete_reader_group(group: ReaderGroup) -> None:
    """Deleting a subscriber removes its hold at once; the next cycle reclaims what it held (at
    once for a stream that refuses publishing at its max)."""
    subs = list(Subscription.objects.filter(reader_group=group).select_related("stream__retention_policy"))
    names, group_key = tracker_names(subs), group.state_key
    with transaction.atomic():
        group.delete()
        group_changed()
        holds_released.send(sender=ReaderGroup, streams=[sub.stream for sub in subs])
        transaction.on_commit(lambda: forget_trackers(names, group_key))
        # its waiting reads are answered at once (404), not when their wait ends
        transaction.on_commit(lambda: publish_notice([group_channel(group_key)]))


REMOVED_KEPT = 20  # the deleted streams a group remembers


def note_stream_deleted(stream: Stream, now) -> list[tuple[str, list[str]]]:
    """Inside the transaction that deletes `stream`: every group that read it records it in
    `removed_streams` with the floors it had reached, and its `generation` moves on (a consumer
    holding the old configuration learns that it changed). Returns the deleted subscriptions'
    Redis state, for `forget_trackers` once the deletion commits. Nothing is silent: the group's
    detail and its console page show what was removed, when, and where the group was."""
    subs = list(Subscription.objects.filter(stream=stream).select_related("stream"))
    floors: dict[int, dict[str, int]] = {}
    for p in ReadPosition.objects.filter(subscription__in=subs):
        floors.setdefault(p.subscription_id, {})[p.segment_id] = p.floor
    groups = {g.pk: g for g in ReaderGroup.objects.select_for_update().filter(pk__in={s.reader_group_id for s in subs})}
    for sub in subs:
        group = groups[sub.reader_group_id]
        entry = {
            "stream": stream.full_name,
            "removed_at": now.isoformat(timespec="seconds"),
            "reason": "the stream was deleted",
            "floors": floors.get(sub.pk, {}),
        }
        group.removed_streams = [*group.removed_streams, entry][-REMOVED_KEPT:]
        ReaderGroup.objects.filter(pk=group.pk).update(
            removed_streams=group.removed_streams, generation=F("generation") + 1, updated_at=now
        )
    if groups:
        group_changed()
    return tracker_names(subs)


@receiver(stream_deleted)
def forget_deleted_stream(sender, stream: Stream, at: datetime, **kwargs) -> None:
    """A stream is being deleted (`streams.deletion.do_delete_stream`, inside its transaction):
    its groups record the removal (`note_stream_deleted`) and, once the deletion commits, their
    trackers on it go (`forget_trackers`)."""
    trackers = note_stream_deleted(stream, at)
    transaction.on_commit(lambda: forget_trackers(trackers))


@receiver(stream_scaled)
def take_new_segments(sender, stream: Stream, **kwargs) -> None:
    """A stream scaled (`streams.scaling.do_scale`, inside its transaction): reads waiting on it
    take their groups again when woken, with positions on its new segments (`floors.make_positions`
    makes them on the first read)."""
    group_changed()


@receiver(segments_retired)
def forget_retired_segments(sender, retired: dict[int, list[str]], **kwargs) -> None:
    """Sealed segments retention passed whole (`streams.scaling.retire_passed_many`, inside its
    transaction), by stream id: every group's positions on them go now, their trackers once it
    commits, and reads take their groups anew. A few statements for any number of streams."""
    subs = list(Subscription.objects.filter(stream_id__in=list(retired)).values_list("pk", "stream_id", "state_key"))
    delete_pairs(ReadPosition, "subscription", "segment_id", [(pk, seg) for pk, sid, _ in subs for seg in retired[sid]])
    trackers = [(key, list(retired[stream_id])) for _, stream_id, key in subs]
    if trackers:
        transaction.on_commit(lambda: forget_trackers(trackers))
    group_changed()


def do_update_reader_group(
    group: ReaderGroup, changes: dict, *, generation: object = None, streams: list[Stream] | None = None
) -> ReaderGroup:
    """Change a group's settings; `generation` moves on by one. Transitions as in Pravega:
    becoming NONE unsubscribes it from every stream (its cuts stop holding data); becoming a
    subscriber subscribes it at its floors (what it has processed); a stream dropped from the list
    is unsubscribed and its positions forgotten; a stream added starts at the group's start."""
    check_generation(group, generation)
    changes = check_group_config(changes, group)
    was_subscriber = group.is_subscriber
    with transaction.atomic():
        bumped = ReaderGroup.objects.filter(pk=group.pk, generation=group.generation).update(
            generation=F("generation") + 1, updated_at=timezone.now(), **changes
        )
        if not bumped:  # another update won the race
            group.refresh_from_db(fields=["generation"])
            check_generation(group, generation if generation is not None else -1)
        group_changed()
        group.refresh_from_db()
        affected: list[Stream] = []
        removed: list[Subscription] = []
        if streams is not None:
            current = {
                sub.stream_id: sub
                for sub in Subscription.objects.filter(reader_group=group).select_related("stream__retention_policy")
            }
            wanted = {s.pk: s for s in streams}
            for sid, sub in current.items():
                if sid not in wanted:
                    affected.append(sub.stream)
                    removed.append(sub)
                    sub.delete()
            now = timezone.now()
            for sid, stream in wanted.items():
                if sid not in current:
                    _subscribe(group, stream, now)
        subs = list(
            Subscription.objects.filter(reader_group=group).select_related("stream__scope", "stream__retention_policy")
        )
        if was_subscriber and not group.is_subscriber:
            affected += [sub.stream for sub in subs]
        elif group.is_subscriber and not was_subscriber:
            floors = current_floors(group)
            now = timezone.now()
            for sub in subs:
                cut = floors.get(sub.stream.full_name)
                if cut is not None:
                    sub.save(update_fields=set_acknowledgement_cut(sub, cut, now))
        if affected:
            holds_released.send(sender=ReaderGroup, streams=affected)
        if removed:
            names = tracker_names(removed)
            transaction.on_commit(lambda: forget_trackers(names))
        # a setting may make events available (a higher max_ack_pending, max_deliveries): waiting reads look again
        transaction.on_commit(lambda: publish_notice([group_channel(group.state_key)]))
    return group


def do_update_truncation_cut(group: ReaderGroup, body: object) -> Subscription:
    return publish_cut(*check_truncation_cut(group, body))


def do_update_truncation_cuts(group: ReaderGroup, body: dict) -> list[Subscription]:
    """Several streams' cuts at once (`stream_cuts`): all applied, or none."""
    return publish_cuts(check_truncation_cuts(group, body))

"""Reader groups and their subscriptions: the only place that changes them (check_*, do_*).

A reader group whose retention type is not NONE is a subscriber of each of its streams: its
acknowledgement cut holds data back. The cut starts at the group's start position (head or tail)
the moment it subscribes, so it protects data from its first moment (DESIGN.md §6: beyond
Pravega, which leaves it empty until the first publish).
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from domain.acks import check_backoff
from domain.errors import FieldError
from domain.names import split_stream_name
from streams.acknowledgement import (
    check_generation,
    check_truncation_cut,
    check_truncation_cuts,
    publish_cut,
    publish_cuts,
    set_acknowledgement_cut,
)
from streams.consuming import current_floors, forget_trackers, tracker_names
from streams.logs import stream_log
from streams.models import ReaderGroup, ReadPosition, Scope, Stream, Subscription
from streams.signals import holds_released


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


def _start_cut(stream: Stream, start: str) -> tuple[dict[str, int], dict[str, int]]:
    """The cut at the head or the tail, with each segment's cumulative size there."""
    ends = stream_log(stream).ends()
    if start == "head":
        at = {s: (head.offset, head.cum_size) for s, (head, _) in ends.items()}
    else:
        at = {s: (tail.next_offset, tail.cum_size) for s, (_, tail) in ends.items()}
    return {s: o for s, (o, _) in at.items()}, {s: size for s, (_, size) in at.items()}


def _subscribe(group: ReaderGroup, stream: Stream, now) -> Subscription:
    """The group's registration on a stream, with its positions, both at its start position."""
    cut, sizes = _start_cut(stream, group.start)
    sub = Subscription.objects.create(
        reader_group=group,
        stream=stream,
        acknowledgement_cut=cut,
        acknowledgement_sizes=sizes,
        acknowledged_at=now,
    )
    # a group reading a compacted view from the head starts at the view's beginning: below its
    # horizon it reads the view (offsets compacted away count as processed), then the live log
    from_view = group.read_compacted and stream.is_compacted and group.start == "head"
    ReadPosition.objects.bulk_create(
        ReadPosition(subscription=sub, segment_id=s, floor=0 if from_view else o) for s, o in cut.items()
    )
    return sub


def check_group_config(config: dict, group: ReaderGroup | None = None) -> dict:
    """Rules across a group's settings: the backoff (`domain.acks.check_backoff`) against the
    group's max_deliveries, as sent or as it stands. Returns the settings to store."""
    config = dict(config)
    max_deliveries = config.get("max_deliveries", group.max_deliveries if group is not None else 5)
    if "backoff_s" in config:
        config["backoff_s"] = list(check_backoff(config["backoff_s"], max_deliveries))
    elif group is not None and len(group.backoff_s) > max_deliveries:
        raise FieldError(
            "max_deliveries",
            f"is below the number of waits in the group's backoff_s ({len(group.backoff_s)}): shorten backoff_s too",
        )
    return config


def do_create_reader_group(*, scope: str, name: str, streams: list[Stream], **config) -> ReaderGroup:
    config = check_group_config(config)
    now = timezone.now()
    try:
        with transaction.atomic():
            scope_row, _ = Scope.objects.get_or_create(name=scope)
            group = ReaderGroup.objects.create(scope=scope_row, name=name, **config)
            for stream in streams:
                _subscribe(group, stream, now)
    except IntegrityError:
        raise FieldError("name", f"reader group {scope}/{name} exists", "duplicate") from None
    return group


def do_delete_reader_group(group: ReaderGroup) -> None:
    """Deleting a subscriber removes its hold at once; the next cycle reclaims what it held (at
    once for a stream that refuses publishing at its max)."""
    subs = list(Subscription.objects.filter(reader_group=group).select_related("stream__retention_policy"))
    names, group_key = tracker_names(subs), group.state_key
    with transaction.atomic():
        group.delete()
        holds_released.send(sender=ReaderGroup, streams=[sub.stream for sub in subs])
        transaction.on_commit(lambda: forget_trackers(names, group_key))


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
    return tracker_names(subs)


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
    return group


def do_update_truncation_cut(group: ReaderGroup, body: object) -> Subscription:
    return publish_cut(*check_truncation_cut(group, body))


def do_update_truncation_cuts(group: ReaderGroup, body: dict) -> list[Subscription]:
    """Several streams' cuts at once (`stream_cuts`): all applied, or none."""
    return publish_cuts(check_truncation_cuts(group, body))

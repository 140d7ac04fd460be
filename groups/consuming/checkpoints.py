"""Checkpoints: a group's floors across its streams; AUTOMATIC groups publish them as their
acknowledgement cuts, MANUAL ones release at a persisted one."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction
from django.utils import timezone

from domain.cuts import checkpoint_expired
from domain.errors import FieldError
from groups.acknowledgement import check_truncation_cut, publish_cut, set_acknowledgement_cut
from groups.consuming.floors import Slot, last_seen, persist_floors, slots
from groups.models import Checkpoint, ReaderGroup, RetentionType, Subscription
from store.redis_connection import get_redis
from streams.logs import stream_log
from streams.models import Stream
from streams.signals import holds_released

AUTO_PREFIX = "auto-"
CHECKPOINT_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")  # and not AUTO_PREFIX first
AUTO_CHECKPOINTS_KEPT = 3
DEFAULT_CHECKPOINT_INTERVAL_S = 30  # Pravega's automatic checkpoint interval


def checkpoint_interval_s(group: ReaderGroup) -> int | None:
    """How often an AUTOMATIC group checkpoints (and so releases) by itself."""
    if group.retention_type != RetentionType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT:
        return None
    return group.checkpoint_interval_s or DEFAULT_CHECKPOINT_INTERVAL_S


def current_floors(group: ReaderGroup, group_slots: list[Slot] | None = None) -> dict[str, dict[str, int]]:
    """The group's floor on every segment of its streams, raised to each segment's head (what
    lies before the head is gone): `{"scope/name": {"0": 12, …}}`. The live floor in Redis is
    persisted on the way (a process that died after an ack may have left the row behind)."""
    group_slots = slots(group) if group_slots is None else group_slots
    pipe = get_redis().pipeline(transaction=False)
    for slot in group_slots:
        pipe.hget(slot.tracker.keys[0], "floor")
    live = pipe.execute()
    heads: dict[int, dict[str, int]] = {}
    cuts: dict[str, dict[str, int]] = {}
    persist_floors([(slot, int(floor), 0) for slot, floor in zip(group_slots, live, strict=True) if floor is not None])
    for slot in group_slots:
        if slot.stream.pk not in heads:
            heads[slot.stream.pk] = stream_log(slot.stream).head_cut()
        head = heads[slot.stream.pk][slot.segment]
        cuts.setdefault(slot.stream.full_name, {})[slot.segment] = max(slot.position.floor, head)
    return cuts


def check_checkpoint_name(name: object) -> str:
    if not isinstance(name, str) or not CHECKPOINT_NAME_PATTERN.fullmatch(name):
        raise FieldError("name", "must be 1-128 letters, digits, '_', '.', ':' or '-'")
    if name.startswith(AUTO_PREFIX):
        raise FieldError("name", f"names starting with '{AUTO_PREFIX}' are the automatic checkpoints'")
    return name


def do_checkpoint(group: ReaderGroup, name: str, persist: bool = False) -> Checkpoint:
    """Record the group's floor across all its streams. An AUTOMATIC group publishes it as its
    acknowledgement cut: what was handed out but not processed is never released."""
    cuts = current_floors(group)
    now = timezone.now()
    try:
        with transaction.atomic():
            cp = Checkpoint.objects.create(reader_group=group, name=name, cuts=cuts, persist=persist)
            ReaderGroup.objects.filter(pk=group.pk).update(last_checkpoint_at=now)
            group.last_checkpoint_at = now
            if group.retention_type == RetentionType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT:
                _publish(group, cuts)
    except IntegrityError:
        raise FieldError("name", f"{group} already has a checkpoint {name}", "duplicate") from None
    drop_expired_persisted(group)
    return cp


def maybe_checkpoint(group: ReaderGroup) -> Checkpoint | None:
    """The periodic checkpoint of an AUTOMATIC group, when one is due (called by beat and after
    acks): named `auto-<time>`; only the last few automatic ones are kept."""
    interval = checkpoint_interval_s(group)
    if interval is None:
        return None
    now = timezone.now()
    if group.last_checkpoint_at and (now - group.last_checkpoint_at).total_seconds() < interval:
        return None
    # the group may be as this process remembers it (`floors.GROUPS_READ`), and another process
    # may have checkpointed since: asked afresh only now that one seems due
    group.last_checkpoint_at = (
        ReaderGroup.objects.filter(pk=group.pk).values_list("last_checkpoint_at", flat=True).first()
    )
    if group.last_checkpoint_at and (now - group.last_checkpoint_at).total_seconds() < interval:
        return None
    name = f"{AUTO_PREFIX}{now:%Y%m%dT%H%M%S.%f}"
    try:
        cp = do_checkpoint(group, name)
    except FieldError:
        return None  # another process checkpointed in the same microsecond
    old = (
        Checkpoint.objects.filter(reader_group=group, name__startswith=AUTO_PREFIX, persist=False)
        .order_by("-created_at", "-pk")
        .values_list("pk", flat=True)[AUTO_CHECKPOINTS_KEPT:]
    )
    Checkpoint.objects.filter(pk__in=list(old)).delete()
    return cp


def do_release_checkpoint(group: ReaderGroup, name: str) -> list[Subscription]:
    """A MANUAL subscriber releases at a persisted checkpoint: its cuts become the group's
    acknowledgement cuts, validated as any published cut is (within [head, tail], not behind
    the previous cut)."""
    cp = get_checkpoint(group, name)
    if group.retention_type != RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT:
        raise FieldError(
            "retention_type",
            f"is {group.retention_type}: only MANUAL_RELEASE_AT_USER_STREAMCUT groups release at a checkpoint",
            "not_manual",
        )
    if not cp.persist:
        raise FieldError(
            "checkpoint", f"{name} is not persisted: only persisted checkpoints are released", "not_persisted"
        )
    checked = [
        check_truncation_cut(group, {"stream": s, "stream_cut": _raised_to_head(s, cut)}) for s, cut in cp.cuts.items()
    ]
    with transaction.atomic():
        published = [publish_cut(*c) for c in checked]
    drop_expired_persisted(group)
    return published


def _raised_to_head(stream_name: str, cut: dict[str, int]) -> dict[str, int]:
    """A checkpoint's cut of a stream with every offset behind the segment's head raised to it:
    what lies before the head is gone, so "processed up to here" there means "up to the head"
    (a checkpoint a truncation overtook on some segment can still be released). A stream that
    no longer exists is left to the cut's own checks."""
    scope, _, name = stream_name.partition("/")
    stream = Stream.objects.filter(scope__name=scope, name=name).select_related("scope").first()
    if stream is None:
        return cut
    head = stream_log(stream).head_cut()
    return {s: max(int(o), head[s]) if s in head and isinstance(o, int) else o for s, o in cut.items()}


def get_checkpoint(group: ReaderGroup, name: str) -> Checkpoint:
    cp = Checkpoint.objects.filter(reader_group=group, name=name).first()
    if cp is None:
        raise FieldError("checkpoint", f"{group} has no checkpoint {name}", "checkpoint_not_found")
    return cp


def do_delete_checkpoint(group: ReaderGroup, name: str) -> None:
    """Delete one of the group's checkpoints (persisted or not). An acknowledgement cut released
    at it stays: the cut is the group's, the checkpoint only recorded where it was."""
    get_checkpoint(group, name).delete()


def drop_expired_persisted(group: ReaderGroup, heads: dict[str, dict[str, int]] | None = None) -> int:
    """PDP-47: at every checkpoint update, the persisted checkpoints that have expired, those that
    lie wholly before the streams' heads (`domain.cuts.checkpoint_expired`), are deleted, so the
    list does not grow for ever. `heads`: the heads by stream name where the caller knows them.
    How many were deleted."""
    persisted = list(Checkpoint.objects.filter(reader_group=group, persist=True).only("pk", "cuts"))
    if not persisted:
        return 0
    heads = dict(heads or {})
    for name in {n for cp in persisted for n in (cp.cuts or {})} - set(heads):
        scope, _, stream_name = name.partition("/")
        stream = Stream.objects.filter(scope__name=scope, name=stream_name).select_related("scope").first()
        if stream is not None:
            heads[name] = stream_log(stream).head_cut()
    expired = [cp.pk for cp in persisted if checkpoint_expired(cp.cuts or {}, heads)]
    if expired:
        Checkpoint.objects.filter(pk__in=expired).delete()
    return len(expired)


def _publish(group: ReaderGroup, cuts: dict[str, dict[str, int]]) -> None:
    """Move the group's acknowledgement cuts forward to `cuts` (never back)."""
    moved = []
    seen = last_seen(group)
    subs = Subscription.objects.filter(reader_group=group).select_related("stream__scope", "stream__retention_policy")
    for sub in subs.select_for_update(of=("self",)):  # concurrent checkpoints: the greater cut wins
        cut = cuts.get(sub.stream.full_name)
        if cut is None:
            continue
        previous = sub.acknowledgement_cut or {}
        new = {s: max(o, previous.get(s, 0)) for s, o in cut.items()}
        fields = []
        if seen is not None and (sub.acknowledged_at is None or seen > sub.acknowledged_at):
            sub.acknowledged_at = seen  # a checkpoint vouches for the group as far as it was seen
            fields.append("acknowledged_at")
        if new != previous:
            fields += set_acknowledgement_cut(sub, new)
            moved.append(sub.stream)
        if fields:
            sub.save(update_fields=fields)
    if moved:
        holds_released.send(sender=Checkpoint, streams=moved)


def periodic_checkpoints() -> int:
    """Beat: checkpoint every AUTOMATIC group whose interval has passed."""
    made = 0
    for group in ReaderGroup.objects.filter(
        retention_type=RetentionType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT
    ).select_related("scope"):
        made += maybe_checkpoint(group) is not None
    return made

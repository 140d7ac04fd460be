"""Acknowledgement cuts: a subscription's checked, durable "processed up to here". The one writer
(`set_acknowledgement_cut`) serves every path that moves one: a published cut, a released
checkpoint, an AUTOMATIC checkpoint, a group becoming a subscriber at its floors."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from domain import epoch_cuts
from domain.errors import FieldError
from domain.names import split_stream_name
from groups.models import ReaderGroup, RetentionType, Subscription
from streams.logs import stream_log
from streams.models import Stream
from streams.signals import holds_released


def check_truncation_cut(group: ReaderGroup, body: object) -> tuple[Subscription, dict[str, int]]:
    """updateTruncationStreamCut, validated in Pravega's order: the stream exists; the group is a
    subscriber of it; the generation matches; the cut covers exactly the stream's segments with
    offsets within [head, tail]; it is not behind the group's previous cut."""
    if not isinstance(body, dict):
        raise FieldError("stream", "the body must be an object {stream, stream_cut, generation?}")
    unknown = sorted(set(body) - {"stream", "stream_cut", "generation"})
    if unknown:  # a typo like `generaton` must not publish the cut unchecked
        raise FieldError(unknown[0], "is not a field of a truncation cut")
    scope, name = split_stream_name(body.get("stream"), "stream")
    stream = Stream.objects.filter(scope__name=scope, name=name).select_related("scope", "retention_policy").first()
    if stream is None:
        raise FieldError("stream", f"no stream {scope}/{name}", "stream_not_found")
    sub = Subscription.objects.filter(reader_group=group, stream=stream).select_related("stream").first()
    if sub is None or group.retention_type == RetentionType.NONE:
        raise FieldError("stream", f"{group} is not a subscriber of {stream.full_name}", "subscriber_not_found")
    sub.stream = stream
    check_generation(group, body.get("generation"))
    cut = check_stream_cut(stream, body.get("stream_cut"), "stream_cut")
    previous = sub.acknowledgement_cut or {}
    for seg, offset in cut.items():
        if offset < previous.get(seg, 0):
            raise FieldError(
                f"stream_cut.{seg}",
                f"offset {offset} is behind the group's previous cut ({previous[seg]})",
                "stream_cut_behind_previous",
            )
    return sub, cut


def check_stream_cut(stream: Stream, value: object, field: str) -> dict[str, int]:
    """A cut of `stream` a group may stand at: covering every segment (on a scaled stream: every
    key, in Pravega's form, `domain.epoch_cuts`), within [head, tail] (what no longer exists
    cannot be read, what does not exist yet cannot be acknowledged or skipped to); refused as
    `stream_cut_not_valid`, naming the field. Answered in its full form (every segment held)."""
    log = stream_log(stream)
    try:
        return epoch_cuts.check_stream_cut(
            value, field, stream.layout, log.sealed_ends(), complete=True, tail=log.tail_cut(), head=log.head_cut()
        )
    except FieldError as exc:
        raise FieldError(exc.field, exc.message, "stream_cut_not_valid") from None


def check_truncation_cuts(group: ReaderGroup, body: dict) -> list[tuple[Subscription, dict[str, int]]]:
    """Pravega's updateTruncationStreamCut with a map of streams: `{stream_cuts: {"scope/name":
    cut, …}, generation?}`. Every cut is checked as a single one is (`check_truncation_cut`)
    before any is applied; a refusal names the first failing stream (`stream_cuts.<scope/name>`)
    with that stream's code, and its details list every stream's failure by name."""
    unknown = sorted(set(body) - {"stream_cuts", "generation"})
    if unknown:
        raise FieldError(unknown[0], "is not a field of a truncation cut of several streams")
    cuts = body.get("stream_cuts")
    if not isinstance(cuts, dict) or not cuts:
        raise FieldError("stream_cuts", 'must be an object {"scope/name": stream cut, …} naming at least one stream')
    check_generation(group, body.get("generation"))
    checked, failures = [], {}
    for name, cut in cuts.items():
        try:
            checked.append(check_truncation_cut(group, {"stream": name, "stream_cut": cut}))
        except FieldError as exc:
            failures[str(name)] = {"code": exc.code, "field": exc.field, "message": exc.message}
    if failures:
        name, first = next(iter(failures.items()))
        where = "" if first["field"] == "stream" else f" ({first['field']})"
        raise FieldError(
            f"stream_cuts.{name}",
            f"{first['message']}{where}; nothing was applied",
            first["code"],
            {"errors": failures},
        )
    return checked


def publish_cuts(checked: list[tuple[Subscription, dict[str, int]]]) -> list[Subscription]:
    """Write several checked cuts at once: all of them, or (a cut found behind under its lock)
    none."""
    with transaction.atomic():
        return [publish_cut(sub, cut) for sub, cut in checked]


def publish_cut(sub: Subscription, cut: dict[str, int]) -> Subscription:
    """Write a checked cut (`check_truncation_cut`), the row locked and checked again."""
    with transaction.atomic():
        # the row locked, the "not behind" check again: a concurrent publish may have moved it
        locked = Subscription.objects.select_for_update().get(pk=sub.pk)
        previous = locked.acknowledgement_cut or {}
        for seg, offset in cut.items():
            if offset < previous.get(seg, 0):
                raise FieldError(
                    f"stream_cut.{seg}",
                    f"offset {offset} is behind the group's previous cut ({previous[seg]})",
                    "stream_cut_behind_previous",
                )
        sub.save(update_fields=set_acknowledgement_cut(sub, cut, timezone.now()))
        if cut != previous:
            holds_released.send(sender=Subscription, streams=[sub.stream])
    return sub


def set_acknowledgement_cut(sub: Subscription, cut: dict[str, int], at=None) -> list[str]:
    """The one writer of a subscription's acknowledgement cut, whatever decided it (a published
    cut, a checkpoint, a group becoming a subscriber at its floors): the cut, each segment's
    cumulative size at it (what the retention cycle reads instead of the store) and, with `at`,
    when. Sets them on `sub`; returns the fields for the caller to save."""
    log = stream_log(sub.stream)
    sub.acknowledgement_cut = cut
    sub.acknowledgement_sizes = {s: log.segment(s).size_till(o) for s, o in cut.items()}
    fields = ["acknowledgement_cut", "acknowledgement_sizes"]
    if at is not None:
        sub.acknowledged_at = at
        fields.append("acknowledged_at")
    return fields


def check_generation(group: ReaderGroup, generation: object) -> None:
    if generation is not None and (isinstance(generation, bool) or not isinstance(generation, int)):
        # "0", 0.0 and true are no generation: a 409 would send the client to re-read a group it
        # already has right, and 0.0 or true would have passed as 0 or 1
        raise FieldError("generation", "must be an integer")
    if generation is not None and generation != group.generation:
        raise FieldError("generation", f"is {generation}; the group is at {group.generation}", "generation_mismatch")

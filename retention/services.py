"""Changes to retention state: policies, truncation and its history, the retention set. Check,
then do."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from domain.cuts import is_at_or_after
from domain.cycle_clock import clock_problem
from domain.errors import FieldError
from domain.policy_spec import PolicySpec
from domain.retention_set import after_truncation
from retention.locks import stream_lock
from retention.models import RetentionPolicy, TruncationRecord
from retention.set_store import as_records, read_sets, write_sets
from streams import services as stream_services
from streams.logs import refresh_segments, stream_log
from streams.models import Checkpoint, Stream


def do_truncate(
    stream: Stream,
    cut: dict[str, int],
    *,
    rule: str,
    trigger: str,
    user=None,
    subscribers: list | None = None,
    at=None,
) -> TruncationRecord | None:
    """Move the stream's head to `cut` and delete the chunks wholly before it.

    A cut at or behind the head on every segment is a silent no-op (returns None); on a segment
    where the cut is behind the head, that segment's head stays where it is. The history record
    is written first and completed after the store changed (see `complete_truncation`).

    It holds the stream's retention lock (`cycle.stream_lock`): a cycle working on the stream is
    waited for up to `CBR_TRUNCATE_LOCK_WAIT_S`, then it is a 409.
    """
    with stream_lock(stream, settings.CBR_TRUNCATE_LOCK_WAIT_S):
        return _truncate(stream, cut, rule, trigger, user, subscribers, at)


def _truncate(stream, cut, rule, trigger, user, subscribers, at) -> TruncationRecord | None:
    log = stream_log(stream)
    head = log.head_cut()
    tail = log.tail_cut()
    for seg, offset in cut.items():
        if offset > tail[seg]:
            raise FieldError(f"stream_cut.{seg}", f"offset {offset} is past the tail {tail[seg]}")
    target = {s: max(head[s], cut.get(s, head[s])) for s in stream.segment_ids}
    if target == head:
        return None
    record = TruncationRecord.objects.create(
        stream=stream,
        created_at=at or timezone.now(),
        before_cut=head,
        after_cut=target,
        before_size=log.size_till(head),
        after_size=log.size_till(target),
        tail_size=log.size_till(tail),
        rule=rule,
        subscribers=subscribers or [],
        trigger=trigger,
        triggered_by=user if user is not None and user.is_authenticated else None,
        completed=False,
    )
    return complete_truncation(record)


def complete_truncation(record: TruncationRecord) -> TruncationRecord:
    """Apply a recorded truncation to the store (idempotent: the head never moves back, and
    chunks before it are deleted whether or not an earlier attempt got that far), then drop the
    retention-set records at or before its cut and the checkpoints it expired."""
    stream = record.stream
    results = stream_log(stream).truncate(record.after_cut)
    with transaction.atomic():
        record.after_size = sum(r.head_after.cum_size for r in results.values())
        record.chunks_deleted += sum(r.chunks_deleted for r in results.values())
        record.bytes_deleted += sum(r.bytes_deleted for r in results.values())
        record.completed = True
        record.save(update_fields=["after_size", "chunks_deleted", "bytes_deleted", "completed"])
        rows = read_sets([stream.pk]).get(stream.pk, [])
        kept = after_truncation(as_records(rows), record.after_cut)
        if len(kept) < len(rows):
            write_sets({stream.pk: rows[len(rows) - len(kept) :]})
        drop_expired_checkpoints({stream.pk: (stream.full_name, record.after_cut)})
        refresh_segments(stream)
    return record


def drop_expired_checkpoints(heads: dict[int, tuple[str, dict[str, int]]]) -> None:
    """After truncations (stream id → (its name, its new head)): a checkpoint that is not
    persisted expires once its cut of a stream lies behind that stream's head on some segment,
    since a reader group could no longer restart from it. Persisted checkpoints are the user's to
    release or delete. Every truncation, a cycle's or a manual one, ends here."""
    candidates = Checkpoint.objects.filter(
        persist=False, reader_group__subscription__stream_id__in=list(heads)
    ).distinct()
    names = {name: head for name, head in heads.values()}
    expired = []
    for cp in candidates.only("pk", "cuts"):
        for name, cut in (cp.cuts or {}).items():
            head = names.get(name)
            if head and not is_at_or_after({s: int(cut.get(s, 0)) for s in head}, head):
                expired.append(cp.pk)
                break
    if expired:
        Checkpoint.objects.filter(pk__in=expired).delete()


def check_cycle_clock(now, stream: Stream | None = None) -> None:
    """A cycle's `now` (`domain.cycle_clock`): 400 naming `now` when it is in the future or
    before the latest truncation of the stream (of any stream, for a whole cycle)."""
    history = TruncationRecord.objects.filter(stream=stream) if stream is not None else TruncationRecord.objects
    latest = history.aggregate(latest=Max("created_at"))["latest"]
    problem = clock_problem(now, timezone.now(), latest)
    if problem is not None:
        raise FieldError("now", problem)


def do_set_policy(stream: Stream, policy: PolicySpec, user=None) -> RetentionPolicy:
    with transaction.atomic():
        return _save_policy(stream, policy, user)


def _save_policy(stream: Stream, policy: PolicySpec, user) -> RetentionPolicy:
    row, _ = RetentionPolicy.objects.update_or_create(
        stream=stream,
        defaults=dict(
            limit_type=policy.limit_type,
            min_value=policy.min,
            max_value=policy.max,
            consumption_based=policy.consumption_based,
            subscriber_timeout_s=policy.subscriber_timeout_s,
            fallback_after_s=policy.fallback_after_s,
            updated_by=user if user is not None and user.is_authenticated else None,
        ),
    )
    return row


def do_create_stream(*, policy: PolicySpec | None = None, user=None, **fields) -> Stream:
    """A stream (`streams.services.do_create_stream` takes `fields`) with its retention policy:
    both or neither."""
    with transaction.atomic():
        stream = stream_services.do_create_stream(**fields)
        if policy is not None:
            try:
                _save_policy(stream, policy, user)
            except BaseException:
                stream_log(stream).delete()  # its segments were made before the rows commit
                raise
    return stream

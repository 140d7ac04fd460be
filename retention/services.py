"""Changes to retention state: policies, truncation and its history, the retention set. Check,
then do."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from domain.cycle_clock import clock_problem
from domain.errors import FieldError
from domain.policy_spec import PolicySpec
from domain.scope_defaults import COMPACTION_DEFAULTS, RETENTION_POLICY, SETTINGS
from domain.times import parse_time
from retention import truncation
from retention.locks import stream_lock
from retention.models import RetentionPolicy, TruncationRecord
from retention.scope_defaults import apply_inherited_policy, defaults_of
from streams import services as stream_services
from streams.logs import stream_log
from streams.models import Stream


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
    goes the one way every truncation goes (`retention.truncation`): recorded first, completed
    after the store changed, the expired checkpoints dropped.

    It holds the stream's retention lock (`retention.locks.stream_lock`): a cycle working on the stream is
    waited for up to `CBR_TRUNCATE_LOCK_WAIT_S`, then it is a 409.
    """
    with stream_lock(stream, settings.CBR_TRUNCATE_LOCK_WAIT_S):
        return _truncate(stream, cut, rule, trigger, user, subscribers, at)


def purge_cut(stream: Stream, to: object) -> dict[str, int]:
    """Where a purge truncates (`POST …/purge/`, the console's Purge): `"tail"` (everything held),
    or `{"time": ISO 8601}` (everything published before that time). A refusal names `to`."""
    log = stream_log(stream)
    if to == "tail":
        return log.tail_cut()
    if isinstance(to, dict) and set(to) == {"time"}:
        at = parse_time(to["time"], "to.time")
        return log.cut_at_time(int(at.timestamp() * 1000))
    raise FieldError("to", 'must be "tail" or {"time": an ISO 8601 time}')


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
    record = TruncationRecord(
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
    truncation.truncate([(stream, log, record, None)], own=True)  # a batch of one
    return record


def check_cycle_clock(now, stream: Stream | None = None) -> None:
    """A cycle's `now` (`domain.cycle_clock`): 400 naming `now` when it is in the future or
    before the latest truncation of the stream (of any stream, for a whole cycle)."""
    history = TruncationRecord.objects.filter(stream=stream) if stream is not None else TruncationRecord.objects
    latest = history.aggregate(latest=Max("created_at"))["latest"]
    problem = clock_problem(now, timezone.now(), latest)
    if problem is not None:
        raise FieldError("now", problem)


def do_set_policy(stream: Stream, policy: PolicySpec, user=None) -> RetentionPolicy:
    """The stream's own policy: from now on it no longer follows its scope's default."""
    with transaction.atomic():
        if RETENTION_POLICY in stream.inherited:
            stream.inherited = [n for n in stream.inherited if n != RETENTION_POLICY]
            stream.save(update_fields=["inherited", "updated_at"])
        return _save_policy(stream, policy, user)


def _save_policy(stream: Stream, policy: PolicySpec, user) -> RetentionPolicy:
    return RetentionPolicy.save_for(stream, policy, user)


def do_create_stream(*, policy: PolicySpec | None = None, user=None, **fields) -> Stream:
    """A stream (`streams.services.do_create_stream` takes `fields`) with its retention policy:
    both or neither. What it does not set itself (no `policy`, `cleanup_policy` None, a
    compaction setting left out) it inherits from its scope's defaults (`domain.scope_defaults`),
    now and as they change; without a default, the built-in one."""
    defaults = defaults_of(fields["scope"])
    compaction = dict(fields.pop("compaction", None) or {})
    own = set(compaction) | {n for n in ("cleanup_policy",) if fields.get(n) is not None}
    if policy is not None:
        own.add(RETENTION_POLICY)
    inherited = [n for n in SETTINGS if n not in own]
    for name in COMPACTION_DEFAULTS:
        if name in inherited and name in defaults:
            if name == "cleanup_policy":
                fields[name] = defaults[name]
            else:
                compaction[name] = defaults[name]
    if fields.get("cleanup_policy") is None:
        fields["cleanup_policy"] = COMPACTION_DEFAULTS["cleanup_policy"]
    with transaction.atomic():
        stream = stream_services.do_create_stream(compaction=compaction, inherited=inherited, **fields)
        try:
            if policy is not None:
                _save_policy(stream, policy, user)
            elif defaults.get(RETENTION_POLICY) is not None:
                apply_inherited_policy(stream, defaults[RETENTION_POLICY], user)
        except BaseException:
            stream_log(stream).delete()  # its segments were made before the rows commit
            raise
    return stream

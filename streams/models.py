"""Tables of streams: scopes, streams, segments (metadata only: the events live in the segment
store), reader groups with their subscriptions and checkpoints."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import models
from django.db.models import Sum

from domain.retention import Subscriber, is_active


class Scope(models.Model):
    name = models.CharField(max_length=128, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ScopeDefaults(models.Model):
    """A scope's defaults for its streams (Pulsar's namespace policies, Pravega's scope-wide
    settings): a stream that sets none of its own takes them, and follows them as they change
    (`domain.scope_defaults`). A setting left null is not defaulted."""

    scope = models.OneToOneField(Scope, on_delete=models.CASCADE, related_name="defaults")
    retention_policy = models.JSONField(null=True, blank=True)  # as the API takes one
    cleanup_policy = models.CharField(max_length=16, null=True, blank=True)
    min_compaction_lag_s = models.PositiveIntegerField(null=True, blank=True)
    delete_retention_s = models.PositiveIntegerField(null=True, blank=True)
    compacted_retention_s = models.PositiveIntegerField(null=True, blank=True)
    compacted_retention_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)


class CleanupPolicy(models.TextChoices):
    DELETE = "delete"
    COMPACT = "compact"
    COMPACT_DELETE = "compact,delete"

    @classmethod
    def compacted(cls) -> tuple[str, ...]:
        """The policies whose streams are compacted (docs/design/compaction.md): for queries."""
        return (cls.COMPACT, cls.COMPACT_DELETE)


class OnMaxLimit(models.TextChoices):
    TRUNCATE = "truncate", "truncate (the max limit wins)"
    REJECT_PUBLISH = "reject_publish", "refuse publishing (507)"


class StreamQuerySet(models.QuerySet):
    def with_sizes(self):
        """Each stream with its held bytes and events, from the refreshed segment rows."""
        return self.annotate(
            held_bytes=Sum(models.F("segments__tail_size") - models.F("segments__head_size")),
            held_events=Sum(models.F("segments__tail_offset") - models.F("segments__head_offset")),
        )

    def search(self, text: str):
        """Streams whose scope or name contains `text` (case-insensitive)."""
        if not text:
            return self
        return self.filter(models.Q(name__icontains=text) | models.Q(scope__name__icontains=text))


def new_storage_key() -> str:
    return uuid.uuid4().hex


class Stream(models.Model):
    scope = models.ForeignKey(Scope, on_delete=models.PROTECT, related_name="streams")
    # The stream's directory in the segment store and the name of its state in Redis (delayed
    # index, retention and compaction locks): random, never reused, so a deleted stream's files
    # (or a process's open descriptors of them) or Redis keys can never meet a new stream's, even
    # where the database reuses ids (SQLite does; a database recreated or restored from a backup
    # beside a kept Redis does too).
    storage_key = models.CharField(max_length=32, unique=True, default=new_storage_key, editable=False)
    name = models.CharField(max_length=128)
    segment_count = models.PositiveIntegerField(default=1)
    cleanup_policy = models.CharField(max_length=16, choices=CleanupPolicy.choices, default=CleanupPolicy.DELETE)
    on_max_limit = models.CharField(max_length=16, choices=OnMaxLimit.choices, default=OnMaxLimit.TRUNCATE)
    max_delay_s = models.PositiveIntegerField(null=True, blank=True)
    # Compaction (docs/design/compaction.md): chunks younger than the lag are not compacted; a tombstone stays
    # in the view this long after the run that first kept it; with `compact,delete` the view has
    # a retention window of its own (time and/or payload bytes, newest first).
    min_compaction_lag_s = models.PositiveIntegerField(default=0)
    delete_retention_s = models.PositiveIntegerField(default=86_400)
    compacted_retention_s = models.PositiveIntegerField(null=True, blank=True)
    compacted_retention_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    # The delayed index's settings (docs/delayed.md "Settings"); absent keys take the
    # defaults: min_index_count_per_bucket, max_time_step_per_segment_s, max_indexes_per_segment,
    # max_num_buckets.
    delayed_index = models.JSONField(default=dict, blank=True)
    # Set by a retention cycle while the stream is at its max under `reject_publish` and a
    # subscriber still needs the data: publishing is refused (507) until a cycle clears it.
    full_since = models.DateTimeField(null=True, blank=True)
    description = models.CharField(max_length=500, blank=True, default="")
    # the settings this stream takes from its scope's defaults (`ScopeDefaults`) rather than
    # setting them itself: "retention_policy", "cleanup_policy", the compaction settings
    inherited = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = StreamQuerySet.as_manager()

    class Meta:
        ordering = ["scope__name", "name"]
        constraints = [models.UniqueConstraint(fields=["scope", "name"], name="stream_unique_in_scope")]

    def __str__(self) -> str:
        return self.full_name

    @property
    def settings_from_scope(self) -> list[str]:
        """The settings this stream takes from its scope's defaults now: those it inherits that
        the scope sets (`domain.scope_defaults`)."""
        defaults = getattr(self.scope, "defaults", None)  # the reverse one-to-one: None without a row
        if defaults is None:
            return []
        return [n for n in self.inherited if getattr(defaults, n, None) is not None]

    @property
    def full_name(self) -> str:
        return f"{self.scope.name}/{self.name}"

    @property
    def store_key(self) -> str:
        return self.storage_key

    @property
    def segment_ids(self) -> list[str]:
        return [str(i) for i in range(self.segment_count)]

    @property
    def is_compacted(self) -> bool:
        """Whether the stream keeps a compacted view (`compact` or `compact,delete`)."""
        return self.cleanup_policy != CleanupPolicy.DELETE

    @property
    def compacted_view_ages(self) -> bool:
        """Whether the compacted view has a retention window of its own (`compact,delete`)."""
        return self.cleanup_policy == CleanupPolicy.COMPACT_DELETE


class Segment(models.Model):
    """A segment's head and tail as last refreshed from the store (the store is the truth)."""

    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="segments")
    segment_id = models.CharField(max_length=64)
    head_offset = models.BigIntegerField(default=0)
    tail_offset = models.BigIntegerField(default=0)
    head_size = models.BigIntegerField(default=0)
    tail_size = models.BigIntegerField(default=0)
    chunk_count = models.PositiveIntegerField(default=0)
    physical_bytes = models.BigIntegerField(default=0)
    refreshed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["stream_id", "segment_id"]
        constraints = [models.UniqueConstraint(fields=["stream", "segment_id"], name="segment_unique")]

    def __str__(self) -> str:
        return f"{self.stream_id}:{self.segment_id}"

    @property
    def held_bytes(self) -> int:
        return self.tail_size - self.head_size

    @property
    def held_events(self) -> int:
        return self.tail_offset - self.head_offset


class RetentionType(models.TextChoices):
    NONE = "NONE"
    MANUAL_RELEASE_AT_USER_STREAMCUT = "MANUAL_RELEASE_AT_USER_STREAMCUT"
    AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT = "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT"


class StartPosition(models.TextChoices):
    HEAD = "head"
    TAIL = "tail"
    TIME = "time"  # the first event published at or after `ReaderGroup.start_at` (ISO 8601)
    STREAM_CUTS = "stream_cuts"  # `ReaderGroup.start_at`: {"scope/name": cut}


class OnPoison(models.TextChoices):
    DEAD_LETTER = "dead_letter"
    SKIP = "skip"
    HALT = "halt"


class AckPolicyChoice(models.TextChoices):
    EXPLICIT = "explicit"  # at-least-once: processed once acknowledged
    NONE = "none"  # at-most-once: processed when handed out


class ReaderGroup(models.Model):
    scope = models.ForeignKey(Scope, on_delete=models.PROTECT, related_name="reader_groups")
    name = models.CharField(max_length=128)
    # Names the group's state in Redis (its last-seen time): random, never reused, so that a
    # database recreated or restored beside a kept Redis (ids reused) never meets another
    # group's state.
    state_key = models.CharField(max_length=32, unique=True, default=new_storage_key, editable=False)
    retention_type = models.CharField(max_length=40, choices=RetentionType.choices, default=RetentionType.NONE)
    start = models.CharField(max_length=16, choices=StartPosition.choices, default="head")
    start_at = models.JSONField(null=True, blank=True)  # the time or the cuts of `start` (domain.start_positions)
    # a bounded group: {"scope/name": cut}; reads stop there (docs/api.md)
    end_stream_cuts = models.JSONField(default=dict, blank=True)
    sinks = models.JSONField(default=list, blank=True)
    ack_timeout_s = models.PositiveIntegerField(default=30)
    max_deliveries = models.PositiveIntegerField(default=5)
    on_poison = models.CharField(max_length=16, choices=OnPoison.choices, default="dead_letter")
    max_ack_pending = models.PositiveIntegerField(default=1000)
    checkpoint_interval_s = models.PositiveIntegerField(null=True, blank=True)
    # on compacted streams, read the compacted view first, then the live log after its horizon
    read_compacted = models.BooleanField(default=False)
    # seconds before the n-th redelivery (JetStream's BackOff; domain.acks.redelivery_delay)
    backoff_s = models.JSONField(default=list, blank=True)
    ack_policy = models.CharField(max_length=16, choices=AckPolicyChoice.choices, default="explicit")
    last_checkpoint_at = models.DateTimeField(null=True, blank=True)
    generation = models.PositiveBigIntegerField(default=0)
    # Streams this group read that were deleted under it, newest last (at most REMOVED_KEPT):
    # [{"stream": "scope/name", "removed_at": ISO 8601, "reason": …, "floors": {segment: offset}}]
    removed_streams = models.JSONField(default=list, blank=True)
    streams = models.ManyToManyField(Stream, through="Subscription", related_name="reader_groups")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["scope__name", "name"]
        constraints = [models.UniqueConstraint(fields=["scope", "name"], name="reader_group_unique_in_scope")]

    def __str__(self) -> str:
        return f"{self.scope.name}/{self.name}"

    @property
    def is_subscriber(self) -> bool:
        return self.retention_type != RetentionType.NONE

    @property
    def sink_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.sinks or ()))

    @property
    def start_position(self) -> str | dict:
        """`start` as a request gives it and an answer shows it (domain.start_positions)."""
        if self.start == StartPosition.TIME:
            return {"time": self.start_at}
        if self.start == StartPosition.STREAM_CUTS:
            return {"stream_cuts": self.start_at}
        return self.start


class Subscription(models.Model):
    """A reader group's registration on one stream; with a retention type other than NONE it is a
    subscriber whose acknowledgement cut holds data back."""

    reader_group = models.ForeignKey(ReaderGroup, on_delete=models.CASCADE)
    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="subscriptions")
    # Names the subscription's acknowledgement state in Redis (groups.ack_tracker), for the
    # reason `ReaderGroup.state_key` gives: a new subscription can only start from its own floor.
    state_key = models.CharField(max_length=32, unique=True, default=new_storage_key, editable=False)
    # the incarnations of its state keys before its last seeks (the latest few): an ack a read
    # carries across a seek names one, and is set apart as stale rather than refused
    former_incarnations = models.JSONField(default=list, blank=True)
    acknowledgement_cut = models.JSONField(null=True, blank=True)
    # size_till of each segment's offset in the cut, recorded with it (the cycle needs no store
    # read for it); absent for cuts written before this field existed
    acknowledgement_sizes = models.JSONField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    # a bounded group's end on this stream ({segment: offset}): nothing at or past it is handed out
    end_cut = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["reader_group", "stream"], name="subscription_unique")]

    def __str__(self) -> str:
        return f"{self.reader_group} on {self.stream}"

    @property
    def incarnation(self) -> int:
        """The first number of this subscription's delivery ids (`incarnation-stream-segment-
        offset-epoch`), from its random `state_key`: an id another subscription handed out, here
        or in a deployment whose database gave out the same ids, names no delivery of this one."""
        return int(self.state_key[:8], 16)

    def as_subscriber(self) -> Subscriber:
        """This subscription as retention's rules see it (`domain.retention.Subscriber`). A cycle
        builds the same from raw rows (`retention.cycle.gathering`), for speed."""
        return Subscriber(
            str(self.reader_group),
            self.acknowledgement_cut,
            acknowledged_at=self.acknowledged_at.timestamp() if self.acknowledged_at else None,
            subscribed_at=self.created_at.timestamp(),
        )

    def is_active(self, now: datetime) -> bool:
        """Whether retention counts this subscriber as active at `now` (`domain.retention.is_active`,
        with the stream's `subscriber_timeout_s`)."""
        policy = getattr(self.stream, "retention_policy", None)
        return is_active(self.as_subscriber(), now.timestamp(), policy.subscriber_timeout_s if policy else None)


class ReadPosition(models.Model):
    """A reader group's persisted floor on one segment: every offset below it was processed
    (acknowledged, skipped or dead-lettered). It only moves forward; the pending and acknowledged
    state above it lives in Redis (groups.ack_tracker), which starts again from here if lost."""

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="positions")
    segment_id = models.CharField(max_length=64)
    floor = models.BigIntegerField(default=0)
    missed = models.BigIntegerField(default=0)  # events truncated away before they were processed
    # every offset from the floor up to here was handed out at least once: persisted before a
    # read answers, so that deliveries handed out again after Redis lost its state count on
    # from what they had (`groups.ack_tracker`), never from 1
    handed = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["subscription_id", "segment_id"]
        constraints = [models.UniqueConstraint(fields=["subscription", "segment_id"], name="read_position_unique")]

    def __str__(self) -> str:
        return f"{self.subscription}:{self.segment_id}@{self.floor}"


class DeliveryCount(models.Model):
    """The highest delivery count an offset at or above its position's floor was handed out with,
    for offsets handed out more than once (those handed out once are below `ReadPosition.handed`).
    Persisted before a read answers; a Redis that lost its state starts from these, so a
    redelivery's `delivery_count` and `max_deliveries` go on from where they were. Rows below
    the floor are dropped as it passes them."""

    position = models.ForeignKey(ReadPosition, on_delete=models.CASCADE, related_name="delivery_counts")
    offset = models.BigIntegerField()
    count = models.IntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["position", "offset"], name="delivery_count_unique")]

    def __str__(self) -> str:
        return f"{self.position}:{self.offset}×{self.count}"


class Checkpoint(models.Model):
    reader_group = models.ForeignKey(ReaderGroup, on_delete=models.CASCADE, related_name="checkpoints")
    name = models.CharField(max_length=128)
    cuts = models.JSONField(default=dict)  # {"scope/stream": {"0": 12, …}, …}
    persist = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["reader_group", "name"], name="checkpoint_unique")]

    def __str__(self) -> str:
        return f"{self.reader_group}:{self.name}"


class DelayedIndex(models.Model):
    """A stream's delayed index, as far as it must survive Redis: per segment, the highest offset
    a registered bucket covers (recovery re-reads the stream only above it)."""

    stream = models.OneToOneField(Stream, on_delete=models.CASCADE, related_name="delayed")
    sealed_through = models.JSONField(default=dict)  # {"0": offset, …}
    recovered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)


class DelayedBucket(models.Model):
    """A sealed bucket of the delayed index: registered only once its snapshot is durable."""

    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="delayed_buckets")
    first_chunk = models.BigIntegerField()  # chunks of the index: see streams.delaying
    last_chunk = models.BigIntegerField()
    name = models.CharField(max_length=64)  # the snapshot's files: <name>.parquet, <name>.json
    ranges = models.JSONField(default=dict)  # {"0": [lowest, highest offset], …}
    segments = models.JSONField(default=list)  # [{"min": ms, "max": ms, "count": n}, …]
    index_count = models.BigIntegerField(default=0)
    snapshot_bytes = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["stream_id", "first_chunk"]
        constraints = [models.UniqueConstraint(fields=["stream", "first_chunk"], name="delayed_bucket_unique")]

    def __str__(self) -> str:
        return f"{self.stream_id}:[{self.first_chunk},{self.last_chunk}]"


class DelayedOp(models.Model):
    """One operation on a stream's delayed buckets, for the console's log (the last few hundred
    per stream are kept)."""

    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="delayed_ops")
    type = models.CharField(max_length=16)  # create, load, merge, delete, recover, rebuild
    state = models.CharField(max_length=8)  # succeed, failed
    latency_ms = models.FloatField(default=0)
    detail = models.CharField(max_length=500, blank=True, default="")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["stream", "-at"], name="delayed_op_recent")]


class Sample(models.Model):
    """A stream's counters (reader_group null) or one subscription's (a group on the stream), as
    the sampler read them at `at` (`groups.sampling`): the console draws rates and backlog over
    time from them. Kept for CBR_SAMPLE_WINDOW_S, then deleted."""

    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="samples")
    reader_group = models.ForeignKey(ReaderGroup, null=True, blank=True, on_delete=models.CASCADE)
    at = models.DateTimeField(db_index=True)
    published_events = models.BigIntegerField(default=0)  # ever published: the tail cut's sum
    published_bytes = models.BigIntegerField(default=0)
    held_bytes = models.BigIntegerField(default=0)
    processed = models.BigIntegerField(null=True, blank=True)  # a group's floors summed
    lag_events = models.BigIntegerField(null=True, blank=True)  # from the floors to the tail

    class Meta:
        indexes = [models.Index(fields=["stream", "at"])]

"""Tables of reader groups: groups, their subscriptions to streams, their read positions (a
floor per segment, with handed and delivery counts), checkpoints, and the console's samples over
time. They moved here from the streams app (issue 39) and keep their tables
(`Meta.db_table`: `streams_*`), so an installation upgrades without touching a row."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models

from domain.retention import Subscriber, is_active
from streams.models import Scope, Stream, new_storage_key


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


class DeliveryMode(models.TextChoices):
    SHARED = "shared"  # competing consumers over every segment
    ORDERED = "ordered"  # each segment read by one consumer at a time (domain.assignments)


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
    delivery = models.CharField(max_length=8, choices=DeliveryMode.choices, default=DeliveryMode.SHARED)
    # an ordered group's consumers heard from within this long share its segments
    consumer_timeout_s = models.PositiveIntegerField(default=30)
    # a subscriber group's own subscriber timeout: wins over its streams' policies (None: theirs)
    subscriber_timeout_s = models.PositiveIntegerField(null=True, blank=True)
    # free-form labels lists filter by (`domain.tags`); never metric labels
    tags = models.JSONField(default=dict, blank=True)
    # {"events_per_s": n}: its reads hand out no more than that ({}: no limit; groups.dispatching)
    dispatch_rate = models.JSONField(default=dict, blank=True)
    last_checkpoint_at = models.DateTimeField(null=True, blank=True)
    generation = models.PositiveBigIntegerField(default=0)
    # Streams this group read that were deleted under it, newest last (at most REMOVED_KEPT):
    # [{"stream": "scope/name", "removed_at": ISO 8601, "reason": …, "floors": {segment: offset}}]
    removed_streams = models.JSONField(default=list, blank=True)
    streams = models.ManyToManyField(Stream, through="Subscription", related_name="reader_groups")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "streams_readergroup"  # the table it had in the streams app
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
        db_table = "streams_subscription"  # the table it had in the streams app
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
            timeout_s=self.reader_group.subscriber_timeout_s,
        )

    def is_active(self, now: datetime) -> bool:
        """Whether retention counts this subscriber as active at `now` (`domain.retention.is_active`:
        its group's `subscriber_timeout_s`, else the stream's)."""
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
        db_table = "streams_readposition"  # the table it had in the streams app
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
        db_table = "streams_deliverycount"  # the table it had in the streams app
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
        db_table = "streams_checkpoint"  # the table it had in the streams app
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["reader_group", "name"], name="checkpoint_unique")]

    def __str__(self) -> str:
        return f"{self.reader_group}:{self.name}"


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
        db_table = "streams_sample"  # the table it had in the streams app
        indexes = [models.Index(fields=["stream", "at"])]


class Republished(models.Model):
    """A dead letter appended again to the stream it came from (`POST …/republish/`, the console's
    Republish, `cbr streams republish`): once per dead letter, with who did it, when, and where
    it went. A second republish of it skips it."""

    dead_letters = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="republished")
    segment = models.CharField(max_length=64)
    offset = models.BigIntegerField()
    source = models.ForeignKey(Stream, null=True, on_delete=models.SET_NULL, related_name="+")
    source_segment = models.CharField(max_length=64)
    source_offset = models.BigIntegerField()
    republished_at = models.DateTimeField(auto_now_add=True)
    republished_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["dead_letters", "segment", "offset"], name="republished_once"),
        ]

"""Tables of streams: scopes, streams, segments (metadata only: the events live in the segment
store), a stream's delayed index and its buckets. Reader groups' tables are the groups app's
(groups.models)."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Sum
from django.utils import timezone

from domain.segment_layout import Layout


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
    segment_count = models.PositiveIntegerField(default=1)  # its active segments
    # Scaling (docs/design/stream-scaling.md): the epoch a scale last made, and, once a stream has
    # scaled, every segment still active or holding data as [id, lo, hi, epoch, [predecessors]]
    # (empty while it has never scaled: `segment_count` segments "0"…, equal ranges, epoch 0).
    epoch = models.PositiveIntegerField(default=0)
    scaled_segments = models.JSONField(default=list, blank=True)
    # {type, target_rate?, scale_factor, min_segments} (`domain.autoscale.check_scaling_policy`);
    # empty: fixed
    scaling_policy = models.JSONField(default=dict, blank=True)
    cleanup_policy = models.CharField(max_length=16, choices=CleanupPolicy.choices, default=CleanupPolicy.DELETE)
    on_max_limit = models.CharField(max_length=16, choices=OnMaxLimit.choices, default=OnMaxLimit.TRUNCATE)
    max_delay_s = models.PositiveIntegerField(null=True, blank=True)
    # the time to live of the events that carry none of their own (`domain.ttl`); null: none
    message_ttl_s = models.PositiveIntegerField(null=True, blank=True)
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
    # free-form labels lists filter by (`domain.tags`); never metric labels
    tags = models.JSONField(default=dict, blank=True)
    # {events_per_s?, bytes_per_s?} (`domain.rate_limits`); empty: no limit
    publish_rate = models.JSONField(default=dict, blank=True)
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
        """Every segment active or still holding data, oldest epoch first."""
        return self.layout.ids

    @property
    def layout(self) -> Layout:
        """Its segments with their key ranges, epochs and predecessors (`domain.segment_layout`)."""
        if not self.scaled_segments:
            return Layout.fixed(self.segment_count)
        found = self.__dict__.get("_layout")
        if found is None or found[0] is not self.scaled_segments:
            found = self.__dict__["_layout"] = (self.scaled_segments, Layout.from_rows(self.scaled_segments))
        return found[1]

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
    # an auto-scaled stream's active segment: [time, events ever appended, bytes ever appended]
    # once a minute, the last 21 (`streams.autoscaling`): its rates survive a restart
    rate_samples = models.JSONField(default=list, blank=True)

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


class TierObject(models.Model):
    """A sealed file of a stream's segment copied to long-term storage (`streams.tiering`): the
    chunk holding offsets [base, end), or its columnar copy, with the size and CRC-32C written.
    The object's key follows from these (`store.offload.tier_key`)."""

    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="tier_objects")
    segment_id = models.CharField(max_length=64)
    base = models.BigIntegerField()
    end = models.BigIntegerField()
    kind = models.CharField(max_length=8)  # "chunk" | "parquet"
    size = models.BigIntegerField()
    crc32c = models.CharField(max_length=8)
    offloaded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["stream_id", "segment_id", "base", "kind"]
        constraints = [
            models.UniqueConstraint(fields=["stream", "segment_id", "base", "kind"], name="tier_object_unique")
        ]

    def __str__(self) -> str:
        return f"{self.stream_id}:{self.segment_id}:{self.base}.{self.kind}"


class TierFile(models.Model):
    """A stream's file beside its log copied to long-term storage (`streams.tiering`): a delayed-
    index snapshot or a file of a compacted view's generation, by its path under CBR_DATA_DIR
    (`delayed/<storage key>/…`, `compacted/<storage key>/…`), which is also its key in the tier
    after the stream's storage key. Such files are written once under their name."""

    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="tier_files")
    path = models.CharField(max_length=255)
    size = models.BigIntegerField()
    crc32c = models.CharField(max_length=8)
    offloaded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["stream_id", "path"]
        constraints = [models.UniqueConstraint(fields=["stream", "path"], name="tier_file_unique")]

    def __str__(self) -> str:
        return f"{self.stream_id}:{self.path}"


class Scaling(models.Model):
    """One scale of a stream (`streams.scaling`): the epoch it made, the segments it sealed and
    those it made, and why (an operator's request, or the auto-scaling rule with the rates)."""

    class Trigger(models.TextChoices):
        MANUAL = "manual"
        AUTO = "auto"

    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="scalings")
    epoch = models.PositiveIntegerField()
    at = models.DateTimeField(default=timezone.now)
    sealed = models.JSONField(default=list)  # [segment id, …]
    created = models.JSONField(default=list)  # [{"id", "key_range": [lo, hi]}, …]
    trigger = models.CharField(max_length=8, choices=Trigger.choices, default=Trigger.MANUAL)
    rule = models.TextField(blank=True, default="")  # a split into many parts has as many reasons
    rates = models.JSONField(default=dict, blank=True)  # segment id → {"2m", "5m", "10m", "20m"}
    by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ["stream_id", "-epoch"]
        constraints = [models.UniqueConstraint(fields=["stream", "epoch"], name="scaling_unique_epoch")]


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

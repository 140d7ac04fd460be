"""Tables of retention: a stream's policy, its retention set, and the history of truncations."""

from __future__ import annotations

from dataclasses import fields

from django.conf import settings
from django.db import models
from django.utils import timezone

from domain.policy_spec import POLICY_FIELDS, PolicySpec
from domain.retention import Policy
from streams.models import Stream


class LimitType(models.TextChoices):
    TIME = "time"
    SIZE = "size"
    NONE = "none"


# the policy's fields the retention rule reads (`domain.retention.Policy`'s)
_RULE_READS = frozenset(f.name for f in fields(Policy))


class RetentionPolicy(models.Model):
    """A stream's policy: a column for each field of `POLICY_FIELDS` (`COLUMNS`: the column of
    each, by the field's name), and who changed it last."""

    stream = models.OneToOneField(Stream, on_delete=models.CASCADE, related_name="retention_policy")
    limit_type = models.CharField(max_length=8, choices=LimitType.choices, default=LimitType.NONE)
    # seconds for a time policy, payload bytes for a size policy
    min_value = models.BigIntegerField(default=0)
    max_value = models.BigIntegerField(null=True, blank=True)
    consumption_based = models.BooleanField(default=False)
    subscriber_timeout_s = models.PositiveIntegerField(null=True, blank=True)
    fallback_after_s = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    # the column of each field of `POLICY_FIELDS`: its own name, but min and max (older names)
    COLUMNS = {name: {"min": "min_value", "max": "max_value"}.get(name, name) for name in POLICY_FIELDS}

    class Meta:
        verbose_name_plural = "retention policies"

    def __str__(self) -> str:
        return f"{self.stream}: {self.limit_type} min={self.min_value} max={self.max_value}"

    @classmethod
    def save_for(cls, stream: Stream, spec: PolicySpec, user=None) -> RetentionPolicy:
        """The stream's policy row, made or changed to `spec` (its own, or its scope's default)."""
        row, _ = cls.objects.update_or_create(
            stream=stream,
            defaults={
                **{column: getattr(spec, name) for name, column in cls.COLUMNS.items()},
                "updated_by": user if user is not None and user.is_authenticated else None,
            },
        )
        return row

    def spec(self) -> PolicySpec:
        """The policy as a user writes it."""
        return PolicySpec(**{name: getattr(self, column) for name, column in self.COLUMNS.items()})

    def as_policy(self, on_max_limit: str) -> Policy:
        """The plain value `domain.retention.decide` takes: the fields of the policy it reads (a
        field the rule does not read, such as a description, is not its business)."""
        read = {name: getattr(self, column) for name, column in self.COLUMNS.items() if name in _RULE_READS}
        return Policy(**read, on_max_limit=on_max_limit)


class StoredRetentionSet(models.Model):
    """A stream's retention set, whole, in one row: a cycle reads it and writes it back at once.
    (One row per record meant aggregating ~48 rows a stream and deleting ~40 every cycle, most of
    a cycle's database time: docs/retention.md, "How a cycle scales".) `records` is a list, in set
    order, of `[recorded_at in microseconds since the epoch, size_bytes, cut, sizes]`, `sizes`
    being size_till of each segment's offset in `cut` (null: not known); `retention.set_store`
    reads and writes it."""

    stream = models.OneToOneField(
        Stream, primary_key=True, on_delete=models.CASCADE, related_name="stored_retention_set"
    )
    records = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"{self.stream}: {len(self.records)} records"


class Trigger(models.TextChoices):
    BEAT = "beat"
    CONSOLE = "console"
    API = "api"
    COMMAND = "command"


class TruncationQuerySet(models.QuerySet):
    def reclaimed_bytes(self) -> int:
        total = self.aggregate(n=models.Sum(models.F("after_size") - models.F("before_size")))["n"]
        return total or 0


class TruncationRecord(models.Model):
    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="truncations")
    # the cycle's clock (a replay with --now records its own time), else when it was asked for
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    before_cut = models.JSONField()
    after_cut = models.JSONField()
    before_size = models.BigIntegerField()  # size_till(head) before, cumulative
    after_size = models.BigIntegerField()
    tail_size = models.BigIntegerField(null=True, blank=True)  # size_till(tail) at the time
    rule = models.CharField(max_length=64)
    subscribers = models.JSONField(default=list, blank=True)
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    triggered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    chunks_deleted = models.PositiveIntegerField(default=0)
    bytes_deleted = models.BigIntegerField(default=0)
    # copies in long-term storage deleted with it (streams.tiering.delete_passed)
    tier_objects_deleted = models.PositiveIntegerField(default=0)
    tier_bytes_deleted = models.BigIntegerField(default=0)
    # Written before the store is touched, set once the head moved and the chunks are gone: a
    # record left incomplete by a crash is finished by the next cycle.
    completed = models.BooleanField(default=True)

    objects = TruncationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # every cycle looks for unfinished truncations of each batch of streams: a handful
            # of rows, found through this small index whatever the history's size
            models.Index(fields=["stream"], condition=models.Q(completed=False), name="truncation_pending"),
        ]

    def __str__(self) -> str:
        return f"{self.stream} {self.rule} {self.created_at:%Y-%m-%d %H:%M:%S}"

    @property
    def reclaimed_bytes(self) -> int:
        return self.after_size - self.before_size

    @property
    def held_before(self) -> int | None:
        return None if self.tail_size is None else self.tail_size - self.before_size

    @property
    def held_after(self) -> int | None:
        return None if self.tail_size is None else self.tail_size - self.after_size


class CycleState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class RetentionCycle(models.Model):
    """One run of the retention cycle, with its progress (streams done / total)."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=8, choices=CycleState.choices, default=CycleState.QUEUED)
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    engine = models.CharField(max_length=8, default="auto")  # local | spark | auto
    clock = models.DateTimeField(null=True, blank=True, help_text="the cycle's 'now', if replayed")
    stream = models.ForeignKey(Stream, null=True, blank=True, on_delete=models.SET_NULL)
    streams_total = models.PositiveIntegerField(default=0)
    streams_done = models.PositiveIntegerField(default=0)
    truncations = models.PositiveIntegerField(default=0)
    bytes_reclaimed = models.BigIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    # The process running it (store.locks.holder_token) and when it last said it was alive: a
    # cycle whose process died is marked failed by the next one (retention.cycle.lifecycle.sweep_dead_cycles).
    runner = models.CharField(max_length=300, blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"cycle {self.pk} ({self.state})"

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

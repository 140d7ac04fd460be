"""Compacted views of keyed streams (docs/design/compaction.md): the current generation of
each compacted stream, and the history of compaction runs."""

from __future__ import annotations

from django.db import models

from streams.models import Stream


class CompactedView(models.Model):
    """The generation readers are served: switched in one transaction once its files are whole."""

    stream = models.OneToOneField(Stream, on_delete=models.CASCADE, related_name="compacted_view")
    generation = models.PositiveIntegerField()
    directory = models.CharField(max_length=64)  # under CBR_DATA_DIR/compacted/<stream>/
    horizon = models.JSONField(default=dict)  # per segment, the next offset after what it covers
    keys = models.BigIntegerField(default=0)
    tombstones = models.BigIntegerField(default=0)
    bytes = models.BigIntegerField(default=0)  # payload bytes of the view
    switched_at = models.DateTimeField()


class CompactionRun(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        SKIPPED = "skipped"  # nothing new to compact, and nothing in the view due to go
        FAILED = "failed"

    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="compaction_runs")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    trigger = models.CharField(max_length=16, default="beat")  # beat, console, api, command
    phase = models.CharField(max_length=64, blank=True, default="")  # what it is doing now
    engine = models.CharField(max_length=32, blank=True, default="")  # the Spark master
    generation = models.PositiveIntegerField(null=True, blank=True)
    horizon = models.JSONField(default=dict)
    chunks = models.PositiveIntegerField(default=0)  # sealed chunks read
    events_in = models.BigIntegerField(default=0)  # previous view + new events
    events_out = models.BigIntegerField(default=0)
    keys = models.BigIntegerField(default=0)
    keyless_dropped = models.BigIntegerField(default=0)
    tombstones_dropped = models.BigIntegerField(default=0)
    marked_by_retention = models.BigIntegerField(default=0)
    # per segment, [from, to): offsets after the previous horizon that retention's max limit
    # deleted before any run folded them in (the view never saw them)
    missed = models.JSONField(default=dict, blank=True)
    missed_events = models.BigIntegerField(default=0)
    bytes_before = models.BigIntegerField(default=0)  # payload bytes in: previous view + new events
    bytes_after = models.BigIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

"""Streams over REST: a stream created, changed and answered, with its compaction settings (made
from `domain.compaction.COMPACTION_FIELDS`) and its delayed index's settings. Thin: a stream's
policy is the retention serializers', the services do the work."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.fields import (
    NameField,
    RefusesUnknownFields,
    StrictCharField,
    StrictIntegerField,
    TagsField,
    declared_field,
    declared_serializer,
    valid_name,
)
from api.retention_serializers import PolicyField, RetentionPolicySerializer
from domain.autoscale import KINDS as SCALING_KINDS
from domain.autoscale import MAX_SCALE_FACTOR
from domain.compaction import COMPACTION_FIELDS, COMPACTION_NUMBERS
from domain.fields import MAX_INT_COLUMN
from domain.rate_limits import MAX_BYTES_PER_S, MAX_EVENTS_PER_S, check_publish_rate
from domain.ttl import MAX_TTL_S
from streams import tiering
from streams.models import (
    OnMaxLimit,
    Stream,
)
from streams.services import check_scaling_policy

# a stream's compaction settings: its cleanup policy has words of its own on each request


_CompactionSettings: Any = declared_serializer(
    "CompactionSettings", COMPACTION_FIELDS, COMPACTION_NUMBERS, required=False
)


class DelayedIndexSerializer(serializers.Serializer):
    """A stream's delayed-index settings (docs/delayed.md "Settings"); an absent key
    takes its default (50000, 300, 5000, never merge)."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({unknown[0]: ["is not a setting of the delayed index"]})
        return super().to_internal_value(data)

    min_index_count_per_bucket = StrictIntegerField(min_value=1, max_value=10_000_000, required=False)
    max_time_step_per_segment_s = StrictIntegerField(min_value=1, max_value=30 * 86400, required=False)
    max_indexes_per_segment = StrictIntegerField(min_value=-1, max_value=1_000_000, required=False)
    max_num_buckets = StrictIntegerField(min_value=2, max_value=100_000, required=False, allow_null=True)

    def validate_max_indexes_per_segment(self, value):
        if value == 0:
            raise serializers.ValidationError("must be positive, or -1 for no count limit")
        return value


SCALING_POLICY_SCHEMA = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": list(SCALING_KINDS)},
        "target_rate": {
            "type": "number",
            "minimum": 0,
            "exclusiveMinimum": True,  # (OpenAPI 3.0: a flag on `minimum`)
            "maximum": 1e9,
            "description": "per segment: events/s (by_event_rate) or KiB/s (by_byte_rate)",
        },
        "scale_factor": {"type": "integer", "minimum": 2, "maximum": MAX_SCALE_FACTOR, "default": 2},
        "min_segments": {"type": "integer", "minimum": 1, "maximum": settings.CBR_MAX_SEGMENTS, "default": 1},
    },
    "required": ["type"],
    "additionalProperties": False,
}


class ScalingPolicySerializer(RefusesUnknownFields, serializers.Serializer):
    """For the schema: a scaling policy's body (`PUT …/scaling-policy/`); the view hands it as sent
    to `streams.services.do_set_scaling_policy`, which checks it."""

    what = "a scaling policy"

    type = serializers.ChoiceField(choices=list(SCALING_KINDS))
    target_rate = serializers.FloatField(
        required=False, min_value=0, max_value=1e9, help_text="per segment: events/s or KiB/s, above 0"
    )
    scale_factor = StrictIntegerField(required=False, min_value=2, max_value=MAX_SCALE_FACTOR, default=2)
    min_segments = StrictIntegerField(required=False, min_value=1, max_value=settings.CBR_MAX_SEGMENTS, default=1)


@extend_schema_field(SCALING_POLICY_SCHEMA)
class ScalingPolicyField(serializers.JSONField):
    """`{type: "fixed"|"by_event_rate"|"by_byte_rate", target_rate?, scale_factor?=2,
    min_segments?=1}`, checked by `streams.services.check_scaling_policy` (refusals name the field
    inside it, e.g. `scaling_policy.target_rate`)."""

    def __init__(self, **kwargs):
        kwargs.setdefault(
            "help_text",
            'how the stream scales by itself: {"type": "fixed"|"by_event_rate"|"by_byte_rate", "target_rate": '
            'events/s or KiB/s per segment, "scale_factor": 2, "min_segments": 1}',
        )
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        return check_scaling_policy(data)


@extend_schema_field(
    {
        "type": "object",
        "properties": {
            # (OpenAPI 3.0: `exclusiveMinimum` is a flag on `minimum`)
            "events_per_s": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": MAX_EVENTS_PER_S},
            "bytes_per_s": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": MAX_BYTES_PER_S},
        },
        "additionalProperties": False,
        "description": "publishes over it are refused whole with 429 rate_limited and Retry-After ({}: no limit)",
        "example": {"events_per_s": 1000, "bytes_per_s": 1048576},
    }
)
class PublishRateField(serializers.JSONField):
    """`{events_per_s?, bytes_per_s?}` (`domain.rate_limits.check_publish_rate`: a refusal names
    `publish_rate.<rate>`)."""

    def to_internal_value(self, data):
        return check_publish_rate(data)


def message_ttl_field() -> StrictIntegerField:
    """A stream's `message_ttl_s` (`domain.ttl`), as its create and its update take it."""
    return StrictIntegerField(
        min_value=1,
        max_value=MAX_TTL_S,
        required=False,
        allow_null=True,
        help_text="seconds an event without its own ttl_s lives; null: no limit",
    )


class StreamCreateSerializer(RefusesUnknownFields, _CompactionSettings):
    """A new stream: its compaction settings (`COMPACTION_FIELDS`) and these."""

    what = "a stream"

    scope = NameField()
    name = NameField()
    segment_count = StrictIntegerField(min_value=1, default=1)
    cleanup_policy = declared_field(
        COMPACTION_FIELDS["cleanup_policy"], required=False, help_text="absent: the scope's default, else delete"
    )
    on_max_limit = serializers.ChoiceField(choices=OnMaxLimit.choices, default="truncate")
    max_delay_s = StrictIntegerField(min_value=0, max_value=MAX_INT_COLUMN, required=False, allow_null=True)
    message_ttl_s = message_ttl_field()
    delayed_index = DelayedIndexSerializer(required=False)
    description = StrictCharField(required=False, allow_blank=True, max_length=500)
    tags = TagsField(required=False)
    publish_rate = PublishRateField(required=False, allow_null=True)
    retention_policy = PolicyField(required=False, allow_null=True)
    scaling_policy = ScalingPolicyField(required=False)

    def validate_scope(self, value):
        return valid_name(value, "scope")

    def validate_name(self, value):
        return valid_name(value, "name")

    def validate_segment_count(self, value):
        if value > settings.CBR_MAX_SEGMENTS:
            raise serializers.ValidationError(f"at most {settings.CBR_MAX_SEGMENTS} segments")
        return value


class StreamUpdateSerializer(_CompactionSettings):
    """A stream's settings changed: its compaction settings (`COMPACTION_FIELDS`) and these."""

    cleanup_policy = declared_field(COMPACTION_FIELDS["cleanup_policy"], required=False)
    on_max_limit = serializers.ChoiceField(choices=OnMaxLimit.choices, required=False)
    max_delay_s = StrictIntegerField(min_value=0, max_value=MAX_INT_COLUMN, required=False, allow_null=True)
    message_ttl_s = message_ttl_field()
    delayed_index = DelayedIndexSerializer(required=False)
    description = StrictCharField(required=False, allow_blank=True, max_length=500)
    tags = TagsField(required=False, help_text="replaces the stream's tags ({} removes them all)")
    publish_rate = PublishRateField(required=False, allow_null=True)

    FIXED = {
        "scope": "a stream cannot move to another scope",
        "name": "a stream cannot be renamed",
        "segment_count": "segment_count changes by scaling: POST …/scale/",
        "retention_policy": "use PUT …/retention-policy/",
        "scaling_policy": "use PUT …/scaling-policy/",
    }

    def validate(self, attrs):
        for field in self.initial_data:
            if field in self.FIXED:
                raise serializers.ValidationError({field: [self.FIXED[field]]})
            if field not in self.fields:
                raise serializers.ValidationError({field: ["is not a field of a stream"]})
        return attrs


class SegmentSerializer(serializers.Serializer):
    """For the schema: one segment of a stream (`StreamSerializer.get_segments`)."""

    id = serializers.CharField()
    key_range = serializers.ListField(
        child=serializers.FloatField(), min_length=2, max_length=2, help_text="[lo, hi): its part of the key space"
    )
    epoch = serializers.IntegerField(help_text="the epoch that made it")
    sealed = serializers.BooleanField(help_text="replaced by later segments: no event is appended to it any more")
    predecessors = serializers.ListField(child=serializers.CharField(), help_text="the sealed segments it replaced")


def segment_answer(layout, segment) -> dict:
    return {
        "id": segment.id,
        "key_range": [segment.lo, segment.hi],
        "epoch": segment.epoch,
        "sealed": layout.is_sealed(segment.id),
        "predecessors": list(segment.predecessors),
    }


class ScaleSerializer(RefusesUnknownFields, serializers.Serializer):
    """A scale: checked by `domain.segment_layout.Layout.scale` (the refusals name the field)."""

    what = "a scale"

    seal = serializers.JSONField(help_text="the active segments to seal, by id")
    new_ranges = serializers.JSONField(
        help_text="the successors' key ranges, [[lo, hi], …]: together exactly the sealed segments' keys"
    )
    epoch = StrictIntegerField(
        min_value=0,
        max_value=MAX_INT_COLUMN,
        required=False,
        help_text="the stream's epoch as last seen: 409 epoch_mismatch if it has moved on since",
    )


class ScaledSerializer(serializers.Serializer):
    epoch = serializers.IntegerField(help_text="the epoch this scale made")
    segments = SegmentSerializer(many=True, help_text="its new segments")


class ScalingSerializer(serializers.Serializer):
    """One scale of a stream (`streams.models.Scaling`)."""

    epoch = serializers.IntegerField(help_text="the epoch it made")
    at = serializers.DateTimeField()
    sealed = serializers.ListField(child=serializers.CharField(), help_text="the segments it sealed")
    created = serializers.ListField(
        child=serializers.DictField(), help_text='the segments it made: [{"id", "key_range": [lo, hi]}]'
    )
    trigger = serializers.CharField(help_text='"manual" (an operator) or "auto" (the scaling policy)')
    rule = serializers.CharField(help_text="the auto-scaling rule that decided it (empty when manual)")
    rates = serializers.DictField(help_text="per sealed segment, its rates when decided (auto)")
    by = serializers.CharField(help_text="who asked for it (manual)")


class StorageSerializer(serializers.Serializer):
    local_bytes = serializers.IntegerField()
    tier_bytes = serializers.IntegerField()
    chunks_local = serializers.IntegerField()
    chunks_tier = serializers.IntegerField()


class StreamSerializer(serializers.ModelSerializer):
    """A stream with its live state; the view passes `state` (from the store) in the context."""

    scope = serializers.CharField(source="scope.name")
    full_name = serializers.CharField()
    head_cut = serializers.SerializerMethodField()
    tail_cut = serializers.SerializerMethodField()
    size_bytes = serializers.SerializerMethodField()
    event_count = serializers.SerializerMethodField()
    physical_bytes = serializers.SerializerMethodField()
    retention_policy = serializers.SerializerMethodField()
    inherited_from_scope = serializers.SerializerMethodField(
        help_text="the settings this stream takes from its scope's defaults (GET /scopes/{scope}/defaults/)"
    )
    epoch = serializers.SerializerMethodField(help_text="the generation of its active segments (0 until it scales)")
    scaling_policy = serializers.SerializerMethodField(help_text="how it scales by itself (fixed: by hand only)")
    segments = serializers.SerializerMethodField(
        help_text="its segments: each one's id, the part of the key space [0, 1) its routing keys hash to, the "
        "epoch that made it, whether it is sealed, and the segments it replaced"
    )
    storage = serializers.SerializerMethodField(
        help_text="where its data lives: on this host's disk (chunk files, columnar copies and indexes included) "
        "and in long-term storage (CBR_TIER_URL; a chunk is in both until its local copy goes)"
    )

    class Meta:
        model = Stream
        fields = [
            "scope",
            "name",
            "full_name",
            "segment_count",
            "epoch",
            "segments",
            "scaling_policy",
            *COMPACTION_FIELDS,
            "on_max_limit",
            "max_delay_s",
            "message_ttl_s",
            "delayed_index",
            "description",
            "tags",
            "publish_rate",
            "head_cut",
            "tail_cut",
            "size_bytes",
            "event_count",
            "physical_bytes",
            "storage",
            "retention_policy",
            "inherited_from_scope",
            "created_at",
            "updated_at",
        ]

    def _state(self, stream):
        return self.context["states"][stream.pk]

    def get_epoch(self, stream) -> int:
        return stream.epoch

    def get_scaling_policy(self, stream) -> dict:
        return stream.scaling_policy or {"type": "fixed", "scale_factor": 2, "min_segments": 1}

    @extend_schema_field(StorageSerializer)
    def get_storage(self, stream) -> dict:
        usage = self.context.get("tier_usage")
        tier_bytes, tier_chunks = (usage if usage is not None else tiering.tier_usage([stream.pk])).get(
            stream.pk, (0, 0)
        )
        segments = self._state(stream).segments.values()
        return {
            "local_bytes": sum(i.physical_bytes for i in segments),
            "tier_bytes": tier_bytes,
            "chunks_local": sum(i.local_chunks for i in segments),
            "chunks_tier": tier_chunks,
        }

    @extend_schema_field(SegmentSerializer(many=True))
    def get_segments(self, stream) -> list[dict]:
        layout = stream.layout
        return [segment_answer(layout, layout[sid]) for sid in layout.held_ids]

    def get_head_cut(self, stream) -> dict[str, int]:
        state = self._state(stream)
        return state.shown(stream.layout, state.head_cut)

    def get_tail_cut(self, stream) -> dict[str, int]:
        state = self._state(stream)
        return state.shown(stream.layout, state.tail_cut)

    def get_size_bytes(self, stream) -> int:
        return self._state(stream).size_bytes

    def get_event_count(self, stream) -> int:
        return self._state(stream).event_count

    def get_physical_bytes(self, stream) -> int:
        return self._state(stream).physical_bytes

    def get_retention_policy(self, stream) -> dict | None:
        policy = getattr(stream, "retention_policy", None)
        if not policy:
            return None
        data = dict(RetentionPolicySerializer(policy).data)
        if "retention_policy" in self.get_inherited_from_scope(stream):
            data["inherited_from"] = "scope"
        return data

    def get_inherited_from_scope(self, stream) -> list[str]:
        return stream.settings_from_scope

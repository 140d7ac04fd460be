"""Retention over REST: a stream's policy (its fields made from `domain.policy_spec.POLICY_FIELDS`,
checked by `parse_policy`), its retention set and truncation history, manual truncations, and
retention cycles asked for and watched."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.fields import (
    RefusesUnknownFields,
    StreamCutField,
    StreamNameField,
    TimeField,
    declared_field,
    declared_serializer,
)
from domain.errors import FieldError
from domain.policy_spec import POLICY_FIELDS, parse_policy
from retention.models import RetentionCycle, RetentionPolicy, TruncationRecord


class CycleRequestSerializer(RefusesUnknownFields, serializers.Serializer):
    what = "a cycle request"

    stream = StreamNameField(required=False, help_text="only this stream, 'scope/name'")
    now = TimeField(required=False, help_text="the cycle's clock (ISO 8601)")


class RetentionCycleSerializer(serializers.ModelSerializer):
    stream = serializers.CharField(source="stream.full_name", allow_null=True, default=None)
    requested_by = serializers.CharField(source="requested_by.username", allow_null=True, default=None)
    progress = serializers.SerializerMethodField()
    duration_s = serializers.FloatField(allow_null=True)

    class Meta:
        model = RetentionCycle
        fields = [
            "id",
            "state",
            "trigger",
            "requested_by",
            "engine",
            "stream",
            "clock",
            "created_at",
            "started_at",
            "finished_at",
            "duration_s",
            "streams_done",
            "streams_total",
            "progress",
            "truncations",
            "bytes_reclaimed",
            "error",
        ]

    def get_progress(self, cycle) -> float:
        if cycle.state == "done":
            return 1.0
        return cycle.streams_done / cycle.streams_total if cycle.streams_total else 0.0


# bases made from the tables (`Any`: a type checker cannot follow a class made at run time)
_PolicyFields: Any = declared_serializer("PolicyFields", POLICY_FIELDS, required=False, schema_defaults=True)


class RetentionPolicyInSerializer(_PolicyFields):
    """For the schema: the body of PUT …/retention-policy/ (parsed by parse_policy)."""

    limit_type = declared_field(POLICY_FIELDS["limit_type"])  # required: no default


@extend_schema_field(RetentionPolicyInSerializer)
class PolicyField(serializers.JSONField):
    """A retention policy, parsed by domain.policy_spec."""

    def to_internal_value(self, data):
        try:
            return parse_policy(data)
        except FieldError as exc:
            raise serializers.ValidationError({exc.field: [exc.message]}) from None


class RetentionPolicySerializer(serializers.ModelSerializer):
    """A stream's policy as the API answers it: the fields of `POLICY_FIELDS`, from the row's
    columns (`RetentionPolicy.COLUMNS`), and when it was last changed."""

    min = serializers.IntegerField(source=RetentionPolicy.COLUMNS["min"])
    max = serializers.IntegerField(source=RetentionPolicy.COLUMNS["max"], allow_null=True)

    class Meta:
        model = RetentionPolicy
        fields = [*POLICY_FIELDS, "updated_at"]


class TruncateSerializer(serializers.Serializer):
    """For the schema: the view checks the cut against the stream."""

    stream_cut = StreamCutField()


class TruncationRecordSerializer(serializers.ModelSerializer):
    stream = serializers.CharField(source="stream.full_name")
    triggered_by = serializers.CharField(source="triggered_by.username", allow_null=True)
    reclaimed_bytes = serializers.IntegerField()

    class Meta:
        model = TruncationRecord
        fields = [
            "id",
            "stream",
            "created_at",
            "before_cut",
            "after_cut",
            "before_size",
            "after_size",
            "reclaimed_bytes",
            "rule",
            "subscribers",
            "trigger",
            "triggered_by",
            "chunks_deleted",
            "bytes_deleted",
            "tier_objects_deleted",
            "tier_bytes_deleted",
        ]


class RetentionSetRecordSerializer(serializers.Serializer):
    """A record of the retention set (`retention.set_store.RetentionSetEntry`); the fields and
    types the API always had, when each record was a row."""

    recorded_at = serializers.DateTimeField()
    size_bytes = serializers.IntegerField()
    cut = serializers.JSONField()

from rest_framework import serializers

from api.serializers import RefusesUnknownFields, StreamNameField, TimeField
from retention.models import RetentionCycle


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

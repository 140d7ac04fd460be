"""The shapes of events over REST: a publish and its answer, an event as a read hands it out
(`EventOutSerializer`, which a reader group's delivery extends), and a stream's event listing.
Thin: a batch is checked by `domain.events.parse_batch`."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from domain.events import LAST_DELIVER_AT_MS
from domain.ttl import MAX_TTL_S, MIN_TTL_S


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "description": "ISO 8601"},
            {"type": "integer", "minimum": 0, "maximum": LAST_DELIVER_AT_MS, "description": "epoch milliseconds"},
        ],
        "description": "when to deliver it: ISO 8601, or epoch milliseconds",
    }
)
class DeliverAtField(serializers.JSONField):
    """For the schema: a delivery time, parsed by domain.events."""


class EventInSerializer(serializers.Serializer):
    """For the schema only: publishing is parsed by domain.events for speed."""

    # empty text is an event like any other (an empty payload, key or header value); null is a
    # field left out, as an event read back shows them (api/strict_bodies.py: which go together)
    payload = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    payload_b64 = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    routing_key = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    key = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    headers = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False, allow_null=True)
    deliver_at = DeliverAtField(required=False, allow_null=True)
    delay_ms = serializers.IntegerField(required=False, min_value=0, allow_null=True)
    ttl_s = serializers.FloatField(
        required=False,
        min_value=MIN_TTL_S,
        max_value=MAX_TTL_S,
        allow_null=True,
        help_text="seconds the event lives (from its delivery time when delayed): past it no group receives it",
    )


class PublishSerializer(serializers.Serializer):
    """For the schema only: parsed by domain.events."""

    events = serializers.ListField(child=EventInSerializer(), min_length=1, max_length=settings.CBR_MAX_BATCH_EVENTS)


class PositionSerializer(serializers.Serializer):
    segment = serializers.CharField()
    offset = serializers.IntegerField()


class PublishedSerializer(serializers.Serializer):
    positions = PositionSerializer(many=True)


class EventOutSerializer(serializers.Serializer):
    segment = serializers.CharField()
    offset = serializers.IntegerField()
    routing_key = serializers.CharField(allow_null=True)
    key = serializers.CharField(allow_null=True)
    headers = serializers.DictField(allow_null=True)
    published_at = serializers.DateTimeField()
    deliver_at = serializers.DateTimeField(allow_null=True)
    payload_b64 = serializers.CharField(required=False, help_text="the payload's bytes; absent for a large event")
    payload = serializers.CharField(required=False, help_text="the payload as text, when it is UTF-8")
    payload_url = serializers.CharField(
        required=False, help_text="a large event's: where its payload is served (GET, with Range), instead of it"
    )
    payload_size = serializers.IntegerField(required=False, help_text="a large event's payload size in bytes")


class EventsReadSerializer(serializers.Serializer):
    events = EventOutSerializer(many=True)
    next_cut = serializers.DictField(child=serializers.IntegerField())
    examined = serializers.IntegerField(
        required=False, help_text="a search's: events it looked at for this page (at most CBR_SEARCH_SCAN_EVENTS)"
    )

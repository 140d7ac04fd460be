"""Reader groups over REST: a group created, changed, sought and answered; a read, its ack and
its answer; acks, nacks, checkpoints and acknowledgement (truncation) cuts. Thin: the rules are
the domain's (`domain.group_settings`, `domain.acks`, `domain.start_positions`) and the services'."""

from __future__ import annotations

from typing import cast

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.event_serializers import EventOutSerializer
from api.fields import (
    SINK_SCHEMA,
    CheckpointNameField,
    NameField,
    RefusesUnknownFields,
    SinkNameField,
    SinksField,
    StreamCutField,
    StreamCutsField,
    StreamNameField,
    StreamNamesField,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    TagsField,
    TargetCutsField,
    cuts_schema,
    valid_name,
    valid_sinks,
)
from domain.group_settings import BOUNDS, DEFAULTS
from domain.rate_limits import MAX_EVENTS_PER_S, check_dispatch_rate
from domain.start_positions import finished
from groups.models import AckPolicyChoice, DeliveryMode, OnPoison, ReaderGroup, RetentionType
from streams.logs import stream_log


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "string"},
        "minItems": 1,
        "maxItems": settings.CBR_MAX_READ_EVENTS,
        "description": "delivery ids as reads hand them out, or id ranges from a read's delivery_ranges "
        f"(`<…>-<first>..<last>-<delivery count>`); at most {settings.CBR_MAX_READ_EVENTS} deliveries in all",
    }
)
class DeliveryIdsField(serializers.JSONField):
    """Delivery ids as a read handed them out, or id ranges: parsed by groups.consuming.acking,
    which names `delivery_ids[i]` in its errors."""


@extend_schema_field(
    {
        "type": "object",
        "properties": {
            # (OpenAPI 3.0: `exclusiveMinimum` is a flag on `minimum`)
            "events_per_s": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": MAX_EVENTS_PER_S},
        },
        "additionalProperties": False,
        "description": "its reads hand out no more than this: fewer deliveries or none, never an error ({}: no limit)",
        "example": {"events_per_s": 100},
    }
)
class DispatchRateField(serializers.JSONField):
    """`{events_per_s}` (`domain.rate_limits.check_dispatch_rate`: a refusal names
    `dispatch_rate.<rate>`)."""

    def to_internal_value(self, data):
        return check_dispatch_rate(data)


@extend_schema_field(
    {
        "type": "object",
        "properties": {
            "delivery_ids": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "maxItems": settings.CBR_MAX_READ_EVENTS,
            },
            "sink": {**SINK_SCHEMA, "description": "for groups with sinks: which sink acknowledges"},
        },
        "required": ["delivery_ids"],
        "additionalProperties": False,
    }
)
class ReadAckField(serializers.JSONField):
    """For the schema: a read's `ack` (parsed by groups.consuming.acking.ack_part, which names
    `ack.delivery_ids[i]` in its errors)."""


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "number", "minimum": 0, "maximum": 7 * 86400},
        "minItems": 1,
        "nullable": True,
        "description": "seconds before the n-th redelivery (the last repeats); at most max_deliveries values",
        "example": [1, 5, 30],
    }
)
class BackoffField(serializers.JSONField):
    """For the schema: a list of seconds, checked by domain.acks.check_backoff."""


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "enum": ["head", "tail"]},
            {
                "type": "object",
                "properties": {"time": {"type": "string", "format": "date-time"}},
                "required": ["time"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"stream_cuts": cuts_schema(min_streams=1)},
                "required": ["stream_cuts"],
                "additionalProperties": False,
            },
        ],
        "description": 'where the group starts: "head", "tail", {"time": ISO 8601} or {"stream_cuts": {"scope/name": cut}}',
        "example": {"time": "2026-11-26T09:00:00Z"},
    }
)
class StartField(serializers.JSONField):
    """For the schema: a start position, checked by domain.start_positions.parse_position."""


class ReaderGroupCreateSerializer(RefusesUnknownFields, serializers.Serializer):
    what = "a reader group"

    scope = NameField()
    name = NameField()
    streams = StreamNamesField()
    retention_type = serializers.ChoiceField(choices=RetentionType.choices, default="NONE")
    start = StartField(required=False)
    end_stream_cuts = StreamCutsField(required=False, default=None, allow_null=True)
    sinks = SinksField(default=list)
    ack_timeout_s = StrictIntegerField(
        min_value=BOUNDS["ack_timeout_s"][0], max_value=BOUNDS["ack_timeout_s"][1], default=DEFAULTS["ack_timeout_s"]
    )
    max_deliveries = StrictIntegerField(
        min_value=BOUNDS["max_deliveries"][0], max_value=BOUNDS["max_deliveries"][1], default=DEFAULTS["max_deliveries"]
    )
    on_poison = serializers.ChoiceField(choices=OnPoison.choices, default="dead_letter")
    max_ack_pending = StrictIntegerField(
        min_value=BOUNDS["max_ack_pending"][0],
        max_value=BOUNDS["max_ack_pending"][1],
        default=DEFAULTS["max_ack_pending"],
    )
    checkpoint_interval_s = StrictIntegerField(
        min_value=BOUNDS["checkpoint_interval_s"][0],
        max_value=BOUNDS["checkpoint_interval_s"][1],
        required=False,
        allow_null=True,
    )
    read_compacted = StrictBooleanField(default=False)
    backoff_s = BackoffField(required=False, allow_null=True)
    ack_policy = serializers.ChoiceField(choices=AckPolicyChoice.choices, default="explicit")
    delivery = serializers.ChoiceField(
        choices=DeliveryMode.choices,
        default="shared",
        help_text="shared: competing consumers over every segment; ordered: each segment read by one consumer at a time",
    )
    consumer_timeout_s = StrictIntegerField(
        min_value=BOUNDS["consumer_timeout_s"][0],
        max_value=BOUNDS["consumer_timeout_s"][1],
        default=DEFAULTS["consumer_timeout_s"],
        help_text="ordered: a consumer silent this long gives up its segments (once its leases expire)",
    )
    subscriber_timeout_s = StrictIntegerField(
        min_value=BOUNDS["subscriber_timeout_s"][0],
        max_value=BOUNDS["subscriber_timeout_s"][1],
        required=False,
        allow_null=True,
        help_text="a subscriber's own subscriber timeout: its acknowledgement cut older than this holds "
        "nothing back; wins over its streams' policies (null: theirs)",
    )
    tags = TagsField(required=False)
    dispatch_rate = DispatchRateField(required=False, allow_null=True)

    def validate_scope(self, value):
        return valid_name(value, "scope")

    def validate_name(self, value):
        return valid_name(value, "name")

    def validate_sinks(self, value):
        return valid_sinks(value)


class SubscriptionSerializer(serializers.Serializer):
    stream = serializers.CharField(source="stream.full_name")
    acknowledgement_cut = serializers.DictField(child=serializers.IntegerField(), allow_null=True)
    acknowledged_at = serializers.DateTimeField(allow_null=True)
    age_s = serializers.SerializerMethodField()
    active = serializers.SerializerMethodField()

    def get_age_s(self, sub) -> float | None:
        if sub.acknowledged_at is None:
            return None
        return round((timezone.now() - sub.acknowledged_at).total_seconds(), 3)

    def get_active(self, sub) -> bool:
        return sub.reader_group.is_subscriber and sub.is_active(timezone.now())

    def to_representation(self, sub):
        answer = super().to_representation(sub)
        if sub.acknowledgement_cut is not None:  # in Pravega's form on a scaled stream
            answer["acknowledgement_cut"] = stream_log(sub.stream).shown(sub.acknowledgement_cut)
        return answer


class RemovedStreamSerializer(serializers.Serializer):
    stream = serializers.CharField(help_text="scope/name")
    removed_at = serializers.DateTimeField()
    reason = serializers.CharField()
    floors = serializers.DictField(child=serializers.IntegerField(), help_text="the group's floor on each segment then")


class ReaderGroupSerializer(serializers.ModelSerializer):
    scope = serializers.CharField(source="scope.name")
    start = StartField(source="start_position", read_only=True)
    end_stream_cuts = StreamCutsField(read_only=True)
    streams = SubscriptionSerializer(source="subscription_set", many=True)
    removed_streams = RemovedStreamSerializer(
        many=True, read_only=True, help_text="streams deleted under the group, newest last"
    )

    class Meta:
        model = ReaderGroup
        fields = [
            "scope",
            "name",
            "retention_type",
            "start",
            "end_stream_cuts",
            "sinks",
            "ack_timeout_s",
            "max_deliveries",
            "on_poison",
            "max_ack_pending",
            "checkpoint_interval_s",
            "read_compacted",
            "backoff_s",
            "ack_policy",
            "delivery",
            "consumer_timeout_s",
            "subscriber_timeout_s",
            "tags",
            "dispatch_rate",
            "last_checkpoint_at",
            "generation",
            "streams",
            "removed_streams",
            "created_at",
            "updated_at",
        ]


class ReaderGroupListItemSerializer(ReaderGroupSerializer):
    """A group in the list (its schema: the view writes `ReaderGroupSerializer`'s fields and, when
    asked with `?lag=true`, these two)."""

    lag_events = serializers.IntegerField(
        required=False, help_text="with ?lag=true: events from its floors to the tails"
    )
    pending = serializers.IntegerField(
        required=False, help_text="with ?lag=true: deliveries handed out and not yet acknowledged"
    )

    class Meta(ReaderGroupSerializer.Meta):
        fields = [*ReaderGroupSerializer.Meta.fields, "lag_events", "pending"]


class PositionStateSerializer(serializers.Serializer):
    stream = serializers.CharField()
    segment = serializers.CharField()
    floor = serializers.IntegerField(help_text="lowest offset not yet processed (persisted; never moves back)")
    head = serializers.IntegerField()
    tail = serializers.IntegerField()
    lag_events = serializers.IntegerField()
    pending = serializers.IntegerField(help_text="deliveries handed out and not yet acknowledged")
    waiting = serializers.IntegerField(help_text="nacked with a delay, or delayed events not yet due")
    redelivered = serializers.IntegerField()
    dead_lettered = serializers.IntegerField()
    skipped = serializers.IntegerField()
    missed = serializers.IntegerField(help_text="events truncated away before the group processed them")
    halted_at = serializers.IntegerField(allow_null=True)


class ReaderGroupDetailSerializer(ReaderGroupSerializer):
    """The detail: the group, its positions on every segment (read by the view, given in the
    context as `positions`: a serializer does no I/O of its own), and its latest checkpoints."""

    positions = serializers.SerializerMethodField()
    assignments = serializers.SerializerMethodField(
        help_text='an ordered group: each consumer\'s segments, as "scope/name:segment" (empty for a shared group)'
    )
    checkpoints = serializers.SerializerMethodField()
    finished = serializers.SerializerMethodField(
        help_text="a bounded group (end_stream_cuts): true once everything up to its end cuts is processed"
    )

    class Meta(ReaderGroupSerializer.Meta):
        fields = [*ReaderGroupSerializer.Meta.fields, "finished", "positions", "assignments", "checkpoints"]

    def get_finished(self, group) -> bool:
        ends = group.end_stream_cuts or {}
        if not ends:
            return False
        floors: dict[str, dict[str, int]] = {}
        for p in self.context["positions"]:
            floors.setdefault(p.stream, {})[p.segment] = max(p.floor, p.head)
        return all(
            name in floors and finished(floors[name], {s: int(o) for s, o in cut.items()}) for name, cut in ends.items()
        )

    def get_assignments(self, group) -> dict[str, list[str]]:
        return self.context.get("assignments", {})

    def get_positions(self, group) -> list[dict]:
        # many=True makes a ListSerializer (its data a list); the stubs type it as the child serializer
        return PositionStateSerializer(self.context["positions"], many=True).data  # type: ignore[return-value]

    def get_checkpoints(self, group) -> list[dict]:
        return CheckpointSerializer(group.checkpoints.all()[:20], many=True).data  # type: ignore[return-value]


class SeekRequestSerializer(RefusesUnknownFields, serializers.Serializer):
    """For the schema: parsed by domain.start_positions.parse_seek (exactly one of the three targets)."""

    what = "a seek"

    position = serializers.ChoiceField(choices=["head", "tail"], required=False)
    time = serializers.DateTimeField(required=False, help_text="the first events published at or after it")
    stream_cuts = TargetCutsField(required=False, help_text="streams left out stay where they are")
    generation = serializers.IntegerField(required=False, allow_null=True, help_text="null: not checked")


class ReaderGroupUpdateSerializer(RefusesUnknownFields, serializers.Serializer):
    what = "a reader group update"

    generation = StrictIntegerField(min_value=0, required=False)
    streams = StreamNamesField(required=False)
    retention_type = serializers.ChoiceField(choices=RetentionType.choices, required=False)
    sinks = SinksField(required=False)
    ack_timeout_s = StrictIntegerField(
        min_value=BOUNDS["ack_timeout_s"][0], max_value=BOUNDS["ack_timeout_s"][1], required=False
    )
    max_deliveries = StrictIntegerField(
        min_value=BOUNDS["max_deliveries"][0], max_value=BOUNDS["max_deliveries"][1], required=False
    )
    on_poison = serializers.ChoiceField(choices=OnPoison.choices, required=False)
    max_ack_pending = StrictIntegerField(
        min_value=BOUNDS["max_ack_pending"][0], max_value=BOUNDS["max_ack_pending"][1], required=False
    )
    checkpoint_interval_s = StrictIntegerField(
        min_value=BOUNDS["checkpoint_interval_s"][0],
        max_value=BOUNDS["checkpoint_interval_s"][1],
        required=False,
        allow_null=True,
    )
    read_compacted = StrictBooleanField(required=False)
    backoff_s = BackoffField(required=False, allow_null=True)
    ack_policy = serializers.ChoiceField(choices=AckPolicyChoice.choices, required=False)
    delivery = serializers.ChoiceField(choices=DeliveryMode.choices, required=False)
    consumer_timeout_s = StrictIntegerField(
        min_value=BOUNDS["consumer_timeout_s"][0], max_value=BOUNDS["consumer_timeout_s"][1], required=False
    )
    subscriber_timeout_s = StrictIntegerField(
        min_value=BOUNDS["subscriber_timeout_s"][0],
        max_value=BOUNDS["subscriber_timeout_s"][1],
        required=False,
        allow_null=True,
    )
    tags = TagsField(required=False, help_text="replaces the group's tags ({} removes them all)")
    dispatch_rate = DispatchRateField(required=False, allow_null=True)

    def validate_sinks(self, value):
        return valid_sinks(value)


class ReadRequestSerializer(RefusesUnknownFields, serializers.Serializer):
    what = "a read"

    max_events = StrictIntegerField(min_value=1, max_value=settings.CBR_MAX_READ_EVENTS)
    wait_ms = StrictIntegerField(min_value=0, max_value=settings.CBR_MAX_WAIT_MS, default=0)
    consumer = StrictCharField(max_length=128, required=False, default="")
    ack = ReadAckField(
        required=False,
        default=None,
        help_text="the previous batch's acknowledgement, applied before this read (one request where "
        "a consumer would send two): as an ack's body, delivery_ids and, for a group with sinks, sink",
    )
    ranges = StrictBooleanField(
        required=False,
        default=False,
        help_text="also answer delivery_ranges: the deliveries as id ranges, which acks and nacks take "
        "in place of the ids",
    )


def read_request(data) -> dict:
    """A read's body as `ReadRequestSerializer` validates it. The body consumers send all day
    (known fields only, each of its JSON type and within its bounds) is taken as it is, without
    building the serializer (DRF deep-copies its fields for every instance: ~0.3 ms a read);
    anything else goes through the serializer, which refuses it naming the field. A property test
    holds the two to the same answer."""
    fields = ReadRequestSerializer._declared_fields
    if type(data) is dict and data.keys() <= fields.keys():
        max_events = data.get("max_events")
        wait_ms = data.get("wait_ms", 0)
        consumer = data.get("consumer", "")
        ranges = data.get("ranges", False)
        if (
            _within(fields["max_events"], max_events)
            and _within(fields["wait_ms"], wait_ms)
            and type(consumer) is str
            and ("consumer" not in data or (0 < len(consumer) <= 128 and _plain(consumer)))
            and type(ranges) is bool
            and data.get("ack", ...) is not None  # (an explicit null is refused)
        ):
            return {
                "max_events": max_events,
                "wait_ms": wait_ms,
                "consumer": consumer,
                "ack": data.get("ack"),
                "ranges": ranges,
            }
    body = ReadRequestSerializer(data=data)
    body.is_valid(raise_exception=True)
    return body.validated_data


def _within(field: serializers.Field, value: object) -> bool:
    """An integer (not a bool) within the bounds of this integer field."""
    bounded = cast(StrictIntegerField, field)
    return type(value) is int and cast(int, bounded.min_value) <= value <= cast(int, bounded.max_value)


def _plain(text: str) -> bool:
    """Text a CharField keeps as it is: printable (no NUL, no lone surrogate) and not padded."""
    return text.isprintable() and text == text.strip()


class RefusedDeliverySerializer(serializers.Serializer):
    field = serializers.CharField(help_text="ack.delivery_ids[i]: the id's place in the request")
    delivery_id = serializers.CharField()
    reason = serializers.CharField(help_text="stale: its lease expired and it was handed out again; unknown: not live")


class ReadAckAnswerSerializer(serializers.Serializer):
    acked = serializers.IntegerField()
    waiting_for_sinks = serializers.IntegerField()
    given_back = serializers.IntegerField(help_text="always 0 here (nacks are requests of their own)")
    refused = RefusedDeliverySerializer(
        many=True, help_text="deliveries not acknowledged (the others were, and the read went on)"
    )


class DeliverySerializer(EventOutSerializer):
    delivery_id = serializers.CharField()
    delivery_count = serializers.IntegerField()
    lease_expires_at = serializers.DateTimeField(
        allow_null=True, help_text="null for a group with ack_policy none: nothing is leased"
    )
    stream = serializers.CharField()
    sinks_pending = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="fan-out groups only: the sinks that have not acknowledged this event (a redelivery is for them)",
    )


class ReadAnswerSerializer(serializers.Serializer):
    deliveries = DeliverySerializer(many=True)
    missed = serializers.IntegerField(help_text="events truncated away before this group processed them")
    missed_by_stream = serializers.DictField(child=serializers.IntegerField())
    pending_limit_reached = serializers.BooleanField()
    ack = ReadAckAnswerSerializer(required=False, help_text="only when the read carried an `ack`: what it did")
    delivery_ranges = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="only when the read asked for ranges: its deliveries as id ranges "
        "`<…>-<first offset>..<last offset>-<delivery count>`, one per run of consecutive offsets",
    )


class AckRequestSerializer(serializers.Serializer):
    """For the schema: parsed by groups.consuming.ack (errors name `delivery_ids[i]`)."""

    delivery_ids = DeliveryIdsField()
    sink = SinkNameField(required=False, help_text="for groups with sinks: which sink acknowledges")
    consumer = serializers.CharField(
        required=False,
        max_length=128,
        help_text="who acknowledges, as it names itself on reads (the console lists consumers)",
    )


class NackRequestSerializer(RefusesUnknownFields, serializers.Serializer):
    what = "a nack"

    delivery_ids = DeliveryIdsField(help_text="the delivery ids to give back")
    delay_ms = StrictIntegerField(
        min_value=0,
        max_value=7 * 86400 * 1000,
        required=False,
        default=None,
        allow_null=True,
        help_text="wait this long before the redelivery; absent: the group's backoff_s (none: at once)",
    )
    reason = StrictCharField(max_length=500, required=False, default="", allow_blank=True)
    sink = SinkNameField(
        max_length=64, required=False, default=None, help_text="fan-out groups: the sink giving it back"
    )


class AckAnswerSerializer(serializers.Serializer):
    acked = serializers.IntegerField()
    waiting_for_sinks = serializers.IntegerField()
    given_back = serializers.IntegerField()


class CheckpointRequestSerializer(RefusesUnknownFields, serializers.Serializer):
    what = "a checkpoint"

    name = CheckpointNameField(max_length=128)
    persist = StrictBooleanField(default=False)


class ConsumerSerializer(serializers.Serializer):
    """One consumer of a group, by the name it reads under (`default` when it gives none)."""

    name = serializers.CharField()
    last_read = serializers.DateTimeField(allow_null=True)
    last_ack = serializers.DateTimeField(allow_null=True)
    waiting = serializers.BooleanField(help_text="a read of its waits now")
    read_rate = serializers.FloatField(help_text="events handed to it per second, over the last minute")
    ack_rate = serializers.FloatField(help_text="events it acknowledged per second, over the last minute")
    in_flight = serializers.IntegerField(
        help_text="deliveries in its hands: handed to it, neither acknowledged, given back nor expired"
    )
    delivered = serializers.IntegerField(help_text="events handed to it since it was first heard from")
    acked = serializers.IntegerField(help_text="events it acknowledged since it was first heard from")


class CheckpointSerializer(serializers.Serializer):
    name = serializers.CharField()
    cuts = serializers.DictField(child=serializers.DictField(child=serializers.IntegerField()))
    persist = serializers.BooleanField()
    created_at = serializers.DateTimeField()


class TruncationCutSerializer(serializers.Serializer):
    """For the schema: parsed by groups.reader_groups.do_update_truncation_cut(s). Either
    `stream` and `stream_cut`, or `stream_cuts` (several streams at once, all or none)."""

    stream = StreamNameField(required=False)
    stream_cut = StreamCutField(required=False)
    stream_cuts = TargetCutsField(
        required=False,
        help_text='several streams\' cuts at once: {"scope/name": {"0": 120, …}, …}; all applied or none',
    )
    generation = serializers.IntegerField(required=False, allow_null=True, help_text="null: not checked")

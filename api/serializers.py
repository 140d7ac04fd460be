"""Request validation and answer shapes of the stream API. Thin: rules live in streams.domain
and domain.policy_spec, which these call so that errors name the same fields everywhere."""

from __future__ import annotations

from datetime import UTC
from typing import Any, cast

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.fields import StrictBooleanField, StrictCharField, StrictIntegerField, declared_field, declared_serializer
from domain.compaction import COMPACTION_FIELDS
from domain.errors import FieldError
from domain.events import LAST_DELIVER_AT_MS
from domain.fields import MAX_INT_COLUMN
from domain.group_settings import BOUNDS, DEFAULTS, MAX_SINKS, SINK_PATTERN, check_sinks
from domain.names import NAME_PATTERN, check_name
from domain.policy_spec import POLICY_FIELDS, parse_policy
from domain.positions import finished
from domain.times import parse_time
from retention.models import RetentionPolicy, TruncationRecord
from streams.consuming.checkpoints import AUTO_PREFIX, CHECKPOINT_NAME_PATTERN
from streams.models import (
    AckPolicyChoice,
    OnMaxLimit,
    OnPoison,
    ReaderGroup,
    RetentionType,
    Stream,
)


class TimeField(serializers.DateTimeField):
    """An ISO 8601 time, parsed as every time from input is (`domain.times`): with its offset, or
    UTC without one (as DRF's own field read it); refused, not a 500, when UTC cannot hold it."""

    def to_internal_value(self, value):
        try:
            return parse_time(value, self.field_name or "time", naive=UTC)
        except FieldError as exc:
            raise serializers.ValidationError(exc.message, code="invalid") from None


# What streams.domain checks, told to the schema, so that generated clients refuse what the server
# refuses. Patterns are anchored: a JSON-schema `pattern` matches anywhere in the text. "." and
# "..", which the name pattern lets through and the server refuses, are said with `not` (a
# look-ahead would say it in the pattern, but not every client's regex engine has one).
NAME = NAME_PATTERN.pattern
NAME_SCHEMA = {"type": "string", "pattern": f"^{NAME}$", "not": {"enum": [".", ".."]}}
STREAM_NAME_SCHEMA = {
    "type": "string",
    "pattern": f"^{NAME}/{NAME}$",
    "not": {"pattern": r"^\.\.?/|/\.\.?$"},
    "description": "scope/name",
}
SINK_SCHEMA = {"type": "string", "pattern": f"^{SINK_PATTERN.pattern}$"}


@extend_schema_field(NAME_SCHEMA)
class NameField(StrictCharField):
    """A scope's, a stream's or a reader group's own name (checked by domain.names)."""


@extend_schema_field(STREAM_NAME_SCHEMA)
class StreamNameField(StrictCharField):
    """A stream or a reader group named 'scope/name' (checked by split_stream_name)."""


@extend_schema_field(
    {
        "type": "array",
        "items": STREAM_NAME_SCHEMA,
        "minItems": 1,
        "uniqueItems": True,
        "description": "scope/name, each once",
    }
)
class StreamNamesField(serializers.ListField):
    """Streams named 'scope/name', at least one, none twice (the services refuse a repeated one,
    naming `streams[i]`)."""

    def __init__(self, **kwargs):
        # min_length: the schema's minItems (allow_empty refuses first, with its own message)
        super().__init__(child=StreamNameField(), allow_empty=False, min_length=1, **kwargs)


@extend_schema_field(SINK_SCHEMA)
class SinkNameField(StrictCharField):
    """A fan-out group's sink, as a request names it: one of the group's sinks (checked by the
    service), so never a name `check_sinks` refuses."""


@extend_schema_field(
    {
        "type": "array",
        "items": SINK_SCHEMA,
        "maxItems": MAX_SINKS,
        "uniqueItems": True,
        "description": "sink names, each once",
    }
)
class SinksField(serializers.ListField):
    """A fan-out group's sinks (checked by `domain.group_settings.check_sinks`)."""

    def __init__(self, **kwargs):
        super().__init__(child=StrictCharField(max_length=64), max_length=MAX_SINKS, **kwargs)


@extend_schema_field(
    {"type": "string", "pattern": f"^{CHECKPOINT_NAME_PATTERN.pattern}$", "not": {"pattern": f"^{AUTO_PREFIX}"}}
)
class CheckpointNameField(StrictCharField):
    """A checkpoint's name (checked by `check_checkpoint_name`): the automatic ones' prefix is
    the server's."""


CUT_SCHEMA = {
    "type": "object",
    "description": 'segment id to offset, e.g. {"0": 120, "1": 97}',
    "propertyNames": {"pattern": "^(0|[1-9][0-9]*)$"},
    "additionalProperties": {"type": "integer", "minimum": 0},
}


def cuts_schema(*, min_streams: int = 0) -> dict:
    """Cuts of several streams: {"scope/name": cut, …}; `min_streams` 1 where the server wants
    one at least."""
    return {
        "type": "object",
        "propertyNames": STREAM_NAME_SCHEMA,
        "additionalProperties": CUT_SCHEMA,
        **({"minProperties": min_streams} if min_streams else {}),
        "description": '{"scope/name": {"<segment>": offset, …}, …}',
        "example": {"shop/orders": {"0": 120, "1": 97}},
    }


@extend_schema_field(CUT_SCHEMA)
class StreamCutField(serializers.DictField):
    """For the schema: a stream cut (checked by domain.cuts.check_cut)."""


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
    """Delivery ids as a read handed them out, or id ranges: parsed by streams.consuming.acking,
    which names `delivery_ids[i]` in its errors."""


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
    """For the schema: a read's `ack` (parsed by streams.consuming.acking.ack_part, which names
    `ack.delivery_ids[i]` in its errors)."""


class RefusesUnknownFields:
    """A request body with a field the serializer does not know is refused, naming the field (a
    typo must not be silently ignored)."""

    what = "this request"

    def validate(self, attrs):
        unknown = set(self.initial_data) - set(self.fields)
        if unknown:
            raise serializers.ValidationError({sorted(unknown)[0]: [f"is not a field of {self.what}"]})
        return attrs


def valid_sinks(value: list[str]) -> list[str]:
    try:
        return check_sinks(value)
    except FieldError as exc:
        raise serializers.ValidationError(exc.message) from None


def valid_name(value, field):
    try:
        return check_name(value, field)
    except FieldError as exc:
        raise serializers.ValidationError(exc.message) from None


# bases made from the tables (`Any`: a type checker cannot follow a class made at run time)
_PolicyFields: Any = declared_serializer("PolicyFields", POLICY_FIELDS, required=False)


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


# a stream's compaction settings: its cleanup policy has words of its own on each request
COMPACTION_NUMBERS = tuple(name for name in COMPACTION_FIELDS if name != "cleanup_policy")
_CompactionSettings: Any = declared_serializer(
    "CompactionSettings", COMPACTION_FIELDS, COMPACTION_NUMBERS, required=False
)


class DelayedIndexSerializer(serializers.Serializer):
    """A stream's delayed-index settings (DELAYED-DELIVERY.md "Configuration"); an absent key
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
    delayed_index = DelayedIndexSerializer(required=False)
    description = StrictCharField(required=False, allow_blank=True, max_length=500)
    retention_policy = PolicyField(required=False, allow_null=True)

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
    delayed_index = DelayedIndexSerializer(required=False)
    description = StrictCharField(required=False, allow_blank=True, max_length=500)

    FIXED = {
        "scope": "a stream cannot move to another scope",
        "name": "a stream cannot be renamed",
        "segment_count": "segment_count cannot change (scaling is not supported yet)",
        "retention_policy": "use PUT …/retention-policy/",
    }

    def validate(self, attrs):
        for field in self.initial_data:
            if field in self.FIXED:
                raise serializers.ValidationError({field: [self.FIXED[field]]})
            if field not in self.fields:
                raise serializers.ValidationError({field: ["is not a field of a stream"]})
        return attrs


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

    class Meta:
        model = Stream
        fields = [
            "scope",
            "name",
            "full_name",
            "segment_count",
            *COMPACTION_FIELDS,
            "on_max_limit",
            "max_delay_s",
            "delayed_index",
            "description",
            "head_cut",
            "tail_cut",
            "size_bytes",
            "event_count",
            "physical_bytes",
            "retention_policy",
            "inherited_from_scope",
            "created_at",
            "updated_at",
        ]

    def _state(self, stream):
        return self.context["states"][stream.pk]

    def get_head_cut(self, stream) -> dict[str, int]:
        return self._state(stream).head_cut

    def get_tail_cut(self, stream) -> dict[str, int]:
        return self._state(stream).tail_cut

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
    payload_b64 = serializers.CharField()
    payload = serializers.CharField(required=False)


class EventsReadSerializer(serializers.Serializer):
    events = EventOutSerializer(many=True)
    next_cut = serializers.DictField(child=serializers.IntegerField())


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
        ]


class RetentionSetRecordSerializer(serializers.Serializer):
    """A record of the retention set (`retention.set_store.RetentionSetEntry`); the fields and
    types the API always had, when each record was a row."""

    recorded_at = serializers.DateTimeField()
    size_bytes = serializers.IntegerField()
    cut = serializers.JSONField()


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
    """For the schema: a start position, checked by domain.positions.parse_position."""


@extend_schema_field(cuts_schema())
class StreamCutsField(serializers.JSONField):
    """For the schema: cuts of several streams, checked by the service that takes them."""


@extend_schema_field(cuts_schema(min_streams=1))
class TargetCutsField(serializers.JSONField):
    """For the schema: the cuts a seek or a truncation cut moves streams to, one stream at least
    (checked by the service that takes them)."""


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
            "last_checkpoint_at",
            "generation",
            "streams",
            "removed_streams",
            "created_at",
            "updated_at",
        ]


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
    checkpoints = serializers.SerializerMethodField()
    finished = serializers.SerializerMethodField(
        help_text="a bounded group (end_stream_cuts): true once everything up to its end cuts is processed"
    )

    class Meta(ReaderGroupSerializer.Meta):
        fields = [*ReaderGroupSerializer.Meta.fields, "finished", "positions", "checkpoints"]

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

    def get_positions(self, group) -> list[dict]:
        # many=True makes a ListSerializer (its data a list); the stubs type it as the child serializer
        return PositionStateSerializer(self.context["positions"], many=True).data  # type: ignore[return-value]

    def get_checkpoints(self, group) -> list[dict]:
        return CheckpointSerializer(group.checkpoints.all()[:20], many=True).data  # type: ignore[return-value]


class SeekRequestSerializer(RefusesUnknownFields, serializers.Serializer):
    """For the schema: parsed by domain.positions.parse_seek (exactly one of the three targets)."""

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
    """For the schema: parsed by streams.consuming.ack (errors name `delivery_ids[i]`)."""

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


class CheckpointSerializer(serializers.Serializer):
    name = serializers.CharField()
    cuts = serializers.DictField(child=serializers.DictField(child=serializers.IntegerField()))
    persist = serializers.BooleanField()
    created_at = serializers.DateTimeField()


class TruncationCutSerializer(serializers.Serializer):
    """For the schema: parsed by streams.reader_groups.do_update_truncation_cut(s). Either
    `stream` and `stream_cut`, or `stream_cuts` (several streams at once, all or none)."""

    stream = StreamNameField(required=False)
    stream_cut = StreamCutField(required=False)
    stream_cuts = TargetCutsField(
        required=False,
        help_text='several streams\' cuts at once: {"scope/name": {"0": 120, …}, …}; all applied or none',
    )
    generation = serializers.IntegerField(required=False, allow_null=True, help_text="null: not checked")

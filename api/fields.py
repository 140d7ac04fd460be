"""The API's field kinds, shared by the serializers of every resource: strict kinds (a number
must arrive as a JSON number, text as a string, a flag as true or false: nothing is coerced),
names and cuts with their schemas, the refusal of unknown fields, and serializer fields made from
a domain table (`domain.fields`: a setting's bounds, nullability and help are declared once, in
the domain, and the API's checks and its OpenAPI schema are made from that declaration)."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema_field
from rest_framework import serializers

from domain.errors import FieldError
from domain.fields import Choice, Field, Flag, Whole
from domain.group_settings import MAX_SINKS, SINK_PATTERN, check_sinks
from domain.names import NAME_PATTERN, check_name
from domain.tags import MAX_TAGS, check_tags
from domain.times import parse_time
from groups.consuming.checkpoints import AUTO_PREFIX, CHECKPOINT_NAME_PATTERN


class StrictIntegerField(serializers.IntegerField):
    """An integer that must arrive as a JSON number: "5" and 5.0 are refused, not coerced."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """Text that must arrive as a JSON string: 0 is refused, not turned into "0"."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """true or false as JSON: "yes", "1" and 1 are refused, not read as true."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


def declared_field(declared: Field, *, nullable: bool | None = None, **options: Any) -> serializers.Field:
    """The serializer field of one declared setting: its bounds, choices and help from the
    declaration; `nullable` (null allowed) when a request may say null though the setting itself
    may not be (a scope's default: null is "no default"); anything else as DRF takes it
    (`required`, `source`, `read_only`, …)."""
    options.setdefault("help_text", declared.help or None)
    options["allow_null"] = declared.nullable if nullable is None else nullable
    if isinstance(declared, Whole):
        return StrictIntegerField(min_value=declared.low, max_value=declared.high, **options)
    if isinstance(declared, Choice):
        return serializers.ChoiceField(choices=list(declared.choices), **options)
    if isinstance(declared, Flag):
        return StrictBooleanField(**options)
    raise TypeError(f"no serializer field for {declared!r}")


def declared_fields(
    table: dict[str, Field], names: tuple[str, ...] | None = None, *, schema_defaults: bool = False, **options: Any
) -> dict:
    """`declared_field` of each setting of `table` (or of `names` only), by name, in the table's
    order, each with `options`: what a serializer class takes as its fields. `schema_defaults`:
    each field says its default (a serializer for the schema only: one that validates must not
    fill in what a request left out, or a setting inherited from a scope would become its own)."""
    out = {}
    for name in names or tuple(table):
        default = table[name].default
        extra: dict[str, Any] = {"default": default} if schema_defaults and default is not None else {}
        out[name] = declared_field(table[name], **options, **extra)
    return out


def declared_serializer(
    name: str, table: dict[str, Field], names: tuple[str, ...] | None = None, **options: Any
) -> type[serializers.Serializer]:
    """A serializer class holding `declared_fields(table, names, **options)`: a base for
    serializers that take those settings among others (its fields come first)."""
    return type(name, (serializers.Serializer,), {"__module__": __name__, **declared_fields(table, names, **options)})


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


@extend_schema_field(cuts_schema())
class StreamCutsField(serializers.JSONField):
    """For the schema: cuts of several streams, checked by the service that takes them."""


@extend_schema_field(cuts_schema(min_streams=1))
class TargetCutsField(serializers.JSONField):
    """For the schema: the cuts a seek or a truncation cut moves streams to, one stream at least
    (checked by the service that takes them)."""


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {"type": "string", "maxLength": 256},
        "maxProperties": MAX_TAGS,
        "description": "free-form labels lists filter by (`?tag=key:value`): keys 1 to 63 of a-z, 0-9, '_', "
        f"'.' and '-', values text of at most 256 characters, at most {MAX_TAGS}",
        "example": {"team": "payments", "env": "prod"},
    }
)
class TagsField(serializers.JSONField):
    """`{"key": "value", …}` (`domain.tags.check_tags`: a refusal names `tags` or `tags.<key>`)."""

    def to_internal_value(self, data):
        return check_tags(data)


TAG_PARAMETER = OpenApiParameter(
    "tag",
    OpenApiTypes.STR,
    many=True,
    explode=True,
    description="key:value (that value) or key (any value); repeated, all must match",
)

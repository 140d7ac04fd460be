"""The API's strict field kinds (a number must arrive as a JSON number, text as a string, a flag
as true or false: nothing is coerced), and serializer fields made from a domain table
(`domain.fields`): a setting's bounds, nullability and help are declared once, in the domain, and
the API's checks and its OpenAPI schema are made from that declaration, never written again."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from domain.fields import Choice, Field, Flag, Whole


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


def declared_fields(table: dict[str, Field], names: tuple[str, ...] | None = None, **options: Any) -> dict:
    """`declared_field` of each setting of `table` (or of `names` only), by name, in the table's
    order, each with `options`: what a serializer class takes as its fields."""
    return {name: declared_field(table[name], **options) for name in names or tuple(table)}


def declared_serializer(name: str, table: dict[str, Field], names: tuple[str, ...] | None = None, **options: Any):
    """A serializer class holding `declared_fields(table, names, **options)`: a base for
    serializers that take those settings among others (its fields come first)."""
    return type(name, (serializers.Serializer,), {"__module__": __name__, **declared_fields(table, names, **options)})

"""Form fields made from a domain table (`domain.fields`): a setting's bounds, choices, label and
help are declared once, in the domain, and a console form takes them from there, never writing
them again. A number is checked by its declaration (`Whole.check`), so the console refuses what
the API refuses, in the same words, beside the field; the browser is told the bounds too."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from domain.errors import FieldError
from domain.fields import Choice, Field, Flag, Whole
from domain.quantities import parse_quantity


class DeclaredIntegerField(forms.IntegerField):
    """A whole number checked by its declaration. A number of seconds or bytes may be written
    with its unit (`7d`, `12h`, `50GB`, `2GiB`: `domain.quantities`), in a text box; a policy's
    limit (`unit="limit"`) either, and which it was is kept (`written_as`) for the form to check
    against the limit type (`limit_units_agree`)."""

    def __init__(self, declared: Whole, **options: Any):
        self.declared = declared
        self.written_as: str | None = None  # "size", "time", or None (a bare number)
        if declared.unit in QUANTITY_UNITS:
            options.setdefault("widget", forms.TextInput(attrs={"inputmode": "text", "size": 14}))
        super().__init__(**options)

    def widget_attrs(self, widget):
        if self.declared.unit in QUANTITY_UNITS:  # a text box: `7d` is not a number to a browser
            return {**super().widget_attrs(widget), "placeholder": QUANTITY_UNITS[self.declared.unit]}
        return {**super().widget_attrs(widget), "min": self.declared.low, "max": self.declared.high}

    def to_python(self, value):
        self.written_as = None
        if isinstance(value, str) and self.declared.unit in QUANTITY_UNITS and re.search(r"[a-zA-Z]", value):
            try:
                number, self.written_as = parse_quantity(value)
            except ValueError as exc:
                raise forms.ValidationError(str(exc)) from None
            if self.declared.unit != "limit" and self.written_as != _KIND[self.declared.unit]:
                raise forms.ValidationError(f"{value.strip()!r} is not {_WANTED[self.declared.unit]}")
            return number
        return super().to_python(value)

    def validate(self, value):
        super().validate(value)
        if value is not None:
            try:
                self.declared.check(value, "")
            except FieldError as exc:
                raise forms.ValidationError(exc.message) from None


QUANTITY_UNITS = {"seconds": "e.g. 7d, 12h, 90", "bytes": "e.g. 50GB, 2GiB", "limit": "e.g. 7d or 50GB"}
_KIND = {"seconds": "time", "bytes": "size"}
_WANTED = {"seconds": "a duration (s, m, h, d, w)", "bytes": "a size (B, KB, MB, GB or KiB, MiB, GiB)"}


def limit_units_agree(form: forms.Form, limit_type: str | None) -> None:
    """A policy's limits written with a unit must be of its limit type: `7d` with a size limit
    (or `50GB` with a time limit) is refused beside the field, not taken as a number of the other
    kind."""
    wanted = {"size": "size", "time": "time"}.get(limit_type or "")
    for name, field in form.fields.items():
        written = getattr(field, "written_as", None)
        if (
            isinstance(field, DeclaredIntegerField)
            and field.declared.unit == "limit"
            and written
            and wanted is not None
            and written != wanted
            and name not in form.errors
        ):
            kind = "a duration" if written == "time" else "a size"
            form.add_error(name, f"written as {kind}, but the limits are {limit_type}")


def declared_form_field(declared: Field, *, blank: str | None = None, **options: Any) -> forms.Field:
    """The form field of one declared setting: its label, help and bounds or choices from the
    declaration. A choice may be left unmade when `blank` says what that means ("the scope's
    default"); a number is required only when it has neither a default nor may be null
    (`required` overrides)."""
    options.setdefault("label", declared.label)
    options.setdefault("help_text", declared.help)
    if isinstance(declared, Whole):
        options.setdefault("required", not declared.nullable and declared.default is None)
        return DeclaredIntegerField(declared, **options)
    if isinstance(declared, Choice):
        choices = list(declared.choices) if blank is None else [("", blank), *declared.choices]
        options.setdefault("required", blank is None)
        return forms.ChoiceField(choices=choices, **options)
    if isinstance(declared, Flag):
        options.setdefault("required", False)  # unticked is false
        return forms.BooleanField(**options)
    raise TypeError(f"no form field for {declared!r}")


def declared_form(name: str, table: dict[str, Field], names: tuple[str, ...] | None = None, **options: Any):
    """A form class holding `declared_form_field` of each setting of `table` (or of `names`),
    each with `options`: a base for forms that take those settings among others."""
    fields = {field: declared_form_field(table[field], **options) for field in names or tuple(table)}
    return type(name, (forms.Form,), {"__module__": __name__, **fields})


def blank_is_default(table: dict[str, Field], data: dict, names: tuple[str, ...] | None = None) -> dict:
    """A form's cleaned settings as the API takes them: a setting left blank is its default."""
    out = {}
    for name in names or tuple(table):
        value = data.get(name)
        out[name] = table[name].default if value is None or value == "" else value
    return out

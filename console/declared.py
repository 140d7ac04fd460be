"""Form fields made from a domain table (`domain.fields`): a setting's bounds, choices, label and
help are declared once, in the domain, and a console form takes them from there, never writing
them again. A number is checked by its declaration (`Whole.check`), so the console refuses what
the API refuses, in the same words, beside the field; the browser is told the bounds too."""

from __future__ import annotations

from typing import Any

from django import forms

from domain.errors import FieldError
from domain.fields import Choice, Field, Flag, Whole


class DeclaredIntegerField(forms.IntegerField):
    """A whole number checked by its declaration."""

    def __init__(self, declared: Whole, **options: Any):
        self.declared = declared
        super().__init__(**options)

    def widget_attrs(self, widget):
        return {**super().widget_attrs(widget), "min": self.declared.low, "max": self.declared.high}

    def validate(self, value):
        super().validate(value)
        if value is not None:
            try:
                self.declared.check(value, "")
            except FieldError as exc:
                raise forms.ValidationError(exc.message) from None


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

"""Lists filtered by tags (`?tag=key:value`, repeatable: all must match; `?tag=key`: any value of
that key), for streams' and reader groups' querysets alike (`domain.tags` says what a filter
is). A key's value is read out of the JSON column, on PostgreSQL and SQLite alike."""

from __future__ import annotations

from django.db.models import QuerySet, TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from domain.errors import FieldError
from domain.tags import MAX_TAGS, parse_tag_filter


def tagged(qs: QuerySet, filters: list[str]) -> QuerySet:
    """The rows of `qs` whose `tags` match every filter."""
    if len(filters) > MAX_TAGS:
        raise FieldError("tag", f"at most {MAX_TAGS} tag filters")
    for i, raw in enumerate(filters):
        key, value = parse_tag_filter(raw)
        if value is None:
            qs = qs.filter(tags__has_key=key)
        else:
            # as text (a plain comparison, not the JSON field's own lookup, which would take the
            # value for JSON); the key as one name, even with "__" in it
            as_text = Cast(KeyTextTransform(key, "tags"), TextField())
            qs = qs.alias(**{f"_tag{i}": as_text}).filter(**{f"_tag{i}": value})
    return qs

"""A row looked up by what a person or a program named, or a 404 that names what was missing
("no stream shop/orders"), as the API's error, the console's page and the CLI's line say it.
Django's own `get_object_or_404` says only "No Stream matches the given query"."""

from __future__ import annotations

from typing import Any, TypeVar

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Model, QuerySet
from django.http import Http404

M = TypeVar("M", bound=Model)


def found_or_404(where: type[M] | QuerySet[M], what: str, **lookup: Any) -> M:
    """The one row of `where` (a model or a queryset) matching `lookup`; else Http404 whose
    message is `no <what>` (`what` names it as the caller was asked for it: "stream shop/orders")."""
    rows = where if isinstance(where, QuerySet) else where._default_manager.all()
    try:
        return rows.get(**lookup)
    except ObjectDoesNotExist:  # (every model's DoesNotExist is one)
        raise Http404(f"no {what}") from None

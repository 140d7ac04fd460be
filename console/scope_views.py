"""The console's scope page (htmx): a scope's defaults for its streams, shown to everyone and
set or cleared by operators, with the scope's streams and what each takes from it. Thin:
retention.scope_defaults reads, checks and writes; a view decides once, at its end, whether to
send the page or the defaults panel. It must never write a row itself."""

from __future__ import annotations

from django.shortcuts import redirect, render

from access.permissions import can, console_access
from access.rules import Action
from console.forms import ScopeDefaultsForm
from console.htmx import htmx_partial
from domain.errors import FieldError
from retention import scope_defaults
from streams.found import found_or_404
from streams.models import Scope, Stream


def _scope_context(request, scope: Scope, form: ScopeDefaultsForm | None = None, notice: str = "", warns=False) -> dict:
    defaults = scope_defaults.scope_defaults(scope)
    return {
        "scope": scope,
        "defaults": defaults,
        "has_defaults": any(v is not None for v in defaults.values()),
        "form": form or ScopeDefaultsForm(initial=ScopeDefaultsForm.initial_for(defaults)),
        "policy_fields": ("limit_type", *ScopeDefaultsForm.POLICY_FIELDS),
        "compaction_fields": ("cleanup_policy", *ScopeDefaultsForm.COMPACTION_FIELDS),
        "can_edit": can(request, Action.MANAGE_STREAMS),
        "streams": Stream.objects.filter(scope=scope).select_related("scope__defaults"),
        "notice": notice,
        "warns": warns,
    }


def _scope_answer(request, context: dict):
    if htmx_partial(request):
        return render(request, "console/scopes/defaults.html#defaults-panel", context)
    return render(request, "console/scopes/defaults.html", context)


@console_access({"GET": Action.VIEW, "POST": Action.MANAGE_STREAMS})
def scope_defaults_page(request, scope):
    """A scope's defaults for its streams: shown, and edited by operators (a blank field has no
    default); the streams of the scope with what each takes from it."""
    found = found_or_404(Scope, f"scope {scope}", name=scope)
    if request.method == "GET":
        return render(request, "console/scopes/defaults.html", _scope_context(request, found))
    form = ScopeDefaultsForm(request.POST)
    if not form.is_valid():
        return _scope_answer(request, _scope_context(request, found, form, "Not saved: see the fields.", True))
    try:
        scope_defaults.do_set_scope_defaults(found.name, form.body(), request.user)
    except FieldError as exc:
        form.show(exc)
        return _scope_answer(request, _scope_context(request, found, form, "Not saved: see the fields.", True))
    if not htmx_partial(request):
        return redirect("console:scope-defaults", scope=scope)
    return _scope_answer(
        request, _scope_context(request, found, notice="Defaults saved: the streams that take them follow now.")
    )


@console_access({"POST": Action.MANAGE_STREAMS})
def clear_scope_defaults(request, scope):
    found = found_or_404(Scope, f"scope {scope}", name=scope)
    scope_defaults.do_clear_scope_defaults(found, request.user)
    if not htmx_partial(request):
        return redirect("console:scope-defaults", scope=scope)
    return _scope_answer(request, _scope_context(request, found, notice="Defaults removed."))

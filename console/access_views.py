"""The console's API-keys page (htmx): list, make (the key is shown on this one answer), revoke.
Thin: access.services checks and writes."""

from __future__ import annotations

from django.shortcuts import redirect, render

from access import services
from access.models import ApiKey
from access.permissions import console_access
from access.rules import Action
from access.services import key_queryset
from console.access_forms import ApiKeyForm
from console.htmx import htmx_partial
from domain.errors import FieldError
from streams.found import found_or_404

PAGE = "console/access/keys.html"


def _render(request, form, created=None, notice=""):
    context = {"keys": key_queryset()[:200], "form": form, "created": created, "notice": notice}
    return render(request, f"{PAGE}#keys-panel" if htmx_partial(request) else PAGE, context)


@console_access({"GET": Action.MANAGE_KEYS, "POST": Action.MANAGE_KEYS})
def api_keys(request):
    if request.method == "GET":
        return _render(request, ApiKeyForm())
    form = ApiKeyForm(request.POST)
    if not form.is_valid():
        return _render(request, form)
    try:
        checked = services.check_key_request(**form.key_request())
    except FieldError as exc:
        field = exc.field.split("[")[0]
        form.add_error(field if field in form.fields else None, exc.message)
        return _render(request, form)
    api_key, key = services.do_create_key(checked, request.user)
    return _render(request, ApiKeyForm(), created={"key": key, "api_key": api_key})


@console_access({"POST": Action.MANAGE_KEYS})
def revoke_api_key(request, prefix):
    api_key = services.do_revoke_key(found_or_404(ApiKey, f"API key {prefix}", prefix=prefix))
    if not htmx_partial(request):
        return redirect("console:api-keys")
    return _render(
        request, ApiKeyForm(), notice=f"Key {api_key.name} ({api_key.prefix}) revoked: it stops working now."
    )

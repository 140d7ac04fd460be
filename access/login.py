"""Sign-in is rate-limited (the console's form and POST /api/v1/auth/token/): failed attempts
are counted per client address and per username in the cache (django-ratelimit); past
CBR_LOGIN_FAILURES, sign-in answers 429 with Retry-After until the window ends, whatever the
password: the sign-in page saying so for the console, the API's JSON error for the API. Only
failures count, so programs that sign in often are never slowed."""

from __future__ import annotations

import logging
from functools import wraps

import orjson
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import JsonResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django_ratelimit.core import get_usage

log = logging.getLogger(__name__)
GROUP = "cbr-login"


def _username(request) -> str:
    """The username a sign-in names, or "" when the body says none (or cannot be read: the view
    refuses that body itself, and the address is still counted)."""
    try:
        if request.content_type == "application/json":
            body = orjson.loads(request.body or b"{}")
            value = body.get("username") if isinstance(body, dict) else None
        else:
            value = request.POST.get("username")
    except Exception:  # noqa: BLE001 - malformed JSON or multipart: no username to count
        return ""
    return value.strip().lower()[:150] if isinstance(value, str) else ""


def _usages(request, increment: bool) -> list[dict]:
    rate = settings.CBR_LOGIN_FAILURES
    found = [get_usage(request, group=GROUP, key="ip", rate=rate, increment=increment)]
    username = _username(request)
    if username:
        found.append(get_usage(request, group=GROUP, key=lambda g, r: username, rate=rate, increment=increment))
    return [u for u in found if u is not None]


def page_refusal(request, message: str):
    """The console's answer to a blocked sign-in: the sign-in page again, saying why."""
    after = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(after, {request.get_host()}, require_https=request.is_secure()):
        after = ""  # as LoginView does: never a link elsewhere
    context = {"form": AuthenticationForm(request), "next": after, "too_many": message}
    return render(request, "login.html", context, status=429)


def json_refusal(request, message: str):
    """The API's answer to a blocked sign-in, in its error shape (api/errors.py)."""
    return JsonResponse({"code": "too_many_attempts", "message": message}, status=429)


def rate_limited_login(view, failed=lambda response: response.status_code != 302, refusal=page_refusal):
    """Wrap a sign-in view; `failed` tells a refused sign-in from an accepted one, and `refusal`
    answers one that is blocked (the console's page by default)."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.method != "POST":
            return view(request, *args, **kwargs)
        try:
            blocked = [u for u in _usages(request, increment=False) if u["count"] >= u["limit"]]
        except Exception:  # the cache (Redis) is down: sign-in goes on uncounted, and says so in the log
            log.warning("sign-in rate limit not applied: the cache did not answer", exc_info=True)
            return view(request, *args, **kwargs)
        if blocked:
            retry = max(u["time_left"] for u in blocked)
            response = refusal(request, f"too many failed sign-ins; try again in {retry} s")
            response["Retry-After"] = str(retry)
            return response
        response = view(request, *args, **kwargs)
        if failed(response):
            try:
                _usages(request, increment=True)
            except Exception:
                log.warning("a failed sign-in was not counted: the cache did not answer", exc_info=True)
        return response

    return wrapped

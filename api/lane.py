"""The lane: the API's hot requests (a publish, a reader group's read, an ack) answered in the web
front's thread by the views' own functions, without Django's request handling around them (the
middleware chain, DRF's dispatch, its request and response objects). That handling was half of a
one-event publish's time in the web process (bench/RESULTS.md, 2026-11-28).

The lane answers a request only when it is sure to answer it as Django would; anything else it
leaves to Django (`answer` returns None) before it has done anything:

- a POST with no query string, a JSON body (`Content-Type: application/json`) that parses, to a
  route the lane knows (`_ROUTES`, found by Django's own resolver);
- a host Django accepts (`ALLOWED_HOSTS`), no redirect due (to HTTPS, to `www.`), no refused
  user agent;
- an `Authorization` header one of the view's own authenticators accepts (a token, an API key;
  a browser's session goes to Django), and the view's own permission granting it;
- an `Accept` the view's own content negotiation picks a renderer for.

Then the view's function runs as the view runs it; what it raises is answered by the API's
exception handler (`api.errors.error_response`), as DRF would (and a refusal or failure logged as
Django logs one); and the answer gets the headers
DRF's view (`Allow`, `Vary`) and the middleware (`X-Frame-Options`, `X-Content-Type-Options`,
`Referrer-Policy`, `Cross-Origin-Opener-Policy`, HSTS on HTTPS) give it, by their own code.
tests/api/test_lane.py holds each route's answers, refusals and headers to Django's."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import orjson
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware
from django.urls import Resolver404, resolve
from django.utils.cache import patch_vary_headers
from django.utils.log import log_response
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import APIException
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.views import APIView

from api import reader_group_views, stream_views
from api.errors import error_response
from api.parking import PARK, Parked
from api.rendering import ReadBatchRenderer

log = logging.getLogger(__name__)

# What each route's request does: (the request, its body's JSON, a binary answer, the URL's arguments) → answer
Handler = Callable[[WSGIRequest, Any, bool, dict], HttpResponse]

_ROUTES: dict[type[APIView], Handler] = {
    stream_views.EventsView: lambda request, data, binary, kw: stream_views.publish(kw["scope"], kw["name"], data),
    reader_group_views.ReadView: lambda request, data, binary, kw: reader_group_views.read(
        kw["scope"], kw["name"], data, binary, park=PARK in request.META
    ),
    reader_group_views.AckView: lambda request, data, binary, kw: reader_group_views.ack(kw["scope"], kw["name"], data),
}


@dataclass(frozen=True, eq=False)  # one per view class (`_route`): hashed as itself
class _View:
    """What the lane needs of a route's DRF view, made once."""

    cls: type[APIView]
    handler: Handler
    authenticators: list
    permissions: list
    renderers: list
    headers: dict[str, str]  # DRF's default response headers of the view (`Allow`, `Vary`)

    @classmethod
    def of(cls, view_class: type[APIView]) -> _View:
        instance = view_class()
        if hasattr(instance, "get") and not hasattr(instance, "head"):
            setattr(instance, "head", instance.get)  # as Django's View.setup does: `Allow` names HEAD  # noqa: B010
        return cls(
            view_class,
            _ROUTES[view_class],
            instance.get_authenticators(),
            list(instance.get_permissions()),
            instance.get_renderers(),
            dict(instance.default_response_headers),
        )


@functools.lru_cache(maxsize=4096)
def _route(path: str) -> tuple[_View, dict] | None:
    """The lane's view of a path and the URL's arguments (Django's resolver, once per path), or
    None."""
    try:
        match = resolve(path)
    except Resolver404:
        return None
    view_class = getattr(match.func, "view_class", None)
    if view_class not in _ROUTES:
        return None
    return _View.of(view_class), match.kwargs


@functools.lru_cache(maxsize=256)
def _renderer(view: _View, accept: str) -> type | None:
    """The renderer DRF's content negotiation picks for `accept` (None: it refuses), once per
    header value."""
    request = _Negotiated(accept)
    try:
        renderer, _media_type = DefaultContentNegotiation().select_renderer(cast(Request, request), view.renderers)
    except APIException:
        return None
    return type(renderer)


class _Negotiated:
    """What DRF's content negotiation reads of a request with no query string."""

    query_params: dict = {}

    def __init__(self, accept: str):
        self.META = {"HTTP_ACCEPT": accept} if accept else {}


@functools.lru_cache(maxsize=64)
def _middleware_headers(view: _View, secure: bool, frames: str) -> tuple[tuple[str, str], ...]:
    """The headers DRF's view and the middleware give an answer of `view` (none set by the
    view's function), by their own code, once per kind of request (`frames`, the setting the
    middleware reads, is part of the key: a test that changes it gets its own)."""
    request = _Secure(secure)
    response = HttpResponse()
    del response["Content-Type"]
    headers = dict(view.headers)
    vary = headers.pop("Vary", None)
    for name, value in headers.items():
        response[name] = value
    if vary is not None:
        patch_vary_headers(response, [v.strip() for v in vary.split(",")])
    response = XFrameOptionsMiddleware(_nothing).process_response(request, response)
    response = SecurityMiddleware(_nothing).process_response(request, response)
    return tuple((name, value) for name, value in response.items() if name != "Content-Length")


class _Secure(HttpRequest):
    """What the middleware's answer parts read of a request: whether it came over HTTPS."""

    def __init__(self, secure: bool):
        super().__init__()
        self.secure = secure

    def _get_scheme(self) -> str:
        return "https" if self.secure else "http"


def answer(environ: dict, body: bytes) -> HttpResponse | None:
    """The request's answer (finished, headers and all; `Parked` for a read that waits), or None
    when Django is to answer it. `body` is the whole request body. Called by the front in one of
    its threads, which tidies the thread's database connections before and after, as Django's
    start and end of a request do."""
    if environ["REQUEST_METHOD"] != "POST" or environ.get("QUERY_STRING") or not body:
        return None
    if environ.get("CONTENT_TYPE", "").partition(";")[0].strip().lower() != "application/json":
        return None
    if settings.DEBUG or settings.USE_X_FORWARDED_HOST or settings.PREPEND_WWW or settings.DISALLOWED_USER_AGENTS:
        return None  # Django's host and agent rules apply then: its own checks decide
    route = _route(environ.get("PATH_INFO", ""))
    if route is None:
        return None
    view, kwargs = route
    request = WSGIRequest(environ)
    try:
        request.get_host()
    except DisallowedHost:
        return None
    secure = request.is_secure()
    if settings.SECURE_SSL_REDIRECT and not secure:
        return None
    renderer = _renderer(view, environ.get("HTTP_ACCEPT", ""))
    if renderer is None or not _authenticated(view, request) or not _permitted(view, request, kwargs):
        return None
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    try:
        response = view.handler(request, data, renderer is ReadBatchRenderer, kwargs)
    except Exception as exc:  # noqa: BLE001 - answered as DRF's handler answers it
        error = error_response(exc)
        if error is None:  # a bug: answered as Django's handler500 answers one under /api/
            log.error("the API failed on %s %s", environ["REQUEST_METHOD"], request.path, exc_info=exc)
            error = JsonResponse({"code": "server_error", "message": "the server failed on this request"}, status=500)
        response = error
    for name, value in _middleware_headers(view, secure, settings.X_FRAME_OPTIONS):
        if name not in response:
            response[name] = value
    if "Content-Length" not in response and not isinstance(response, Parked):  # as CommonMiddleware
        response["Content-Length"] = str(len(response.content))
    if response.status_code >= 400:  # logged as Django logs a refusal or a failure
        log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request)
    return response


def _authenticated(view: _View, request: WSGIRequest) -> bool:
    """As DRF's request authenticates: the first of the view's authenticators that answers;
    a refusal, or no credential but a browser's session, is left to Django."""
    for authenticator in view.authenticators:
        if isinstance(authenticator, SessionAuthentication):
            return False
        try:
            found = authenticator.authenticate(request)
        except APIException:
            return False
        if found is not None:
            request.user, request.auth = found  # type: ignore[attr-defined]
            return True
    return False


class _Target:
    """What a DRF permission asks of the view: its declared access and the URL's arguments."""

    def __init__(self, cls: type[APIView], kwargs: dict):
        self.access = getattr(cls, "access", None)
        self.access_target = getattr(cls, "access_target", None)
        self.kwargs = kwargs


def _permitted(view: _View, request: WSGIRequest, kwargs: dict) -> bool:
    """As DRF's view checks: every one of the view's permissions grants it."""
    target = _Target(view.cls, kwargs)
    return all(permission.has_permission(request, target) for permission in view.permissions)


def _nothing(request: HttpRequest) -> HttpResponse:
    """The middleware's next step, never called: only their answer's part runs here."""
    raise AssertionError("only the middleware's answer part runs in the lane")

"""Every API error is JSON of one shape: `{"code", "message", "field"?, "errors"?}`.

`field` names the first offending field (`events[3].payload_b64`, `retention_policy.max`); `errors`
carries DRF's full per-field detail when a serializer found several. Bad input is never a 500.
"""

from __future__ import annotations

import errno
import functools
import logging
import math

import redis
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpResponse, JsonResponse
from django.views.defaults import page_not_found, server_error
from kombu.exceptions import OperationalError as KombuOperationalError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from api.rendering import ORJSONRenderer
from domain.errors import FieldError, insufficient_storage
from store.tier.base import TierError
from streams.jobs import QueueDown

logger = logging.getLogger(__name__)

# The HTTP status of each `FieldError.code` the domain and the apps raise; any other code is a 400.
# tests/api/test_error_codes.py checks that every code raised anywhere is here.
STATUS_OF_CODE = {
    "invalid": 400,
    "body_cut_off": 400,
    "unknown_delivery": 400,
    "stream_cut_not_valid": 400,
    "stream_cut_behind_previous": 400,
    "forbidden": 403,
    "not_found": 404,
    "stream_not_found": 404,
    "subscriber_not_found": 404,
    "reader_group_not_found": 404,
    "checkpoint_not_found": 404,
    "ack_policy_none": 409,
    "duplicate": 409,
    "epoch_mismatch": 409,
    "compaction_running": 409,
    "generation_mismatch": 409,
    "lease_lost": 409,
    "not_compacted": 409,
    "not_manual": 409,
    "not_persisted": 409,
    "retention_in_progress": 409,
    "no_tier": 409,
    "event_too_large": 413,
    "unsupported_media_type": 415,
    "range_not_satisfiable": 416,
    "rate_limited": 429,
    "stream_full": 507,
    "insufficient_storage": 507,
    "too_many_waiting_reads": 503,
}
# codes whose answer says when to try again (`Retry-After`, seconds)
RETRY_AFTER_OF_CODE = {"too_many_waiting_reads": "1"}


def exception_handler(exc, context):
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        # a full disk met outside publishing (a stream's first chunk, a dead-letter append): an
        # append cuts back what it wrote; say so instead of a 500
        return exception_handler(insufficient_storage(), context)
    lost = _service_lost(exc)
    if lost is not None:
        body, headers = _unavailable(*lost, exc)
        return Response(body, status=status.HTTP_503_SERVICE_UNAVAILABLE, headers=headers)
    if isinstance(exc, FieldError):
        body = {"code": exc.code, "message": f"{exc.field}: {exc.message}", "field": exc.field}
        body.update(exc.details)
        retry = RETRY_AFTER_OF_CODE.get(exc.code)
        if "retry_after_s" in exc.details:  # a wait the refusal worked out (a rate limit's)
            retry = str(max(1, math.ceil(exc.details["retry_after_s"])))
        return Response(
            body, status=STATUS_OF_CODE.get(exc.code, 400), headers={"Retry-After": retry} if retry else None
        )
    if isinstance(exc, exceptions.ValidationError):
        field, message = _first_error(exc.detail)
        if (
            not field
            and isinstance(exc.detail, dict)
            and any(getattr(e, "code", None) in ("invalid", "null") for e in exc.detail.get("non_field_errors", []))
        ):
            field = "body"  # the body as a whole: `[1]` or `null` where an object was expected
        body = {"code": "invalid", "message": f"{field}: {message}" if field else message}
        if field:
            body["field"] = field
        body["errors"] = exc.detail
        return Response(body, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, exceptions.ParseError):
        return Response(
            {"code": "malformed_json", "message": str(exc.detail), "field": "body"},
            status=status.HTTP_400_BAD_REQUEST,
        )
    response = drf_exception_handler(exc, context)
    if response is not None:
        detail = response.data.get("detail", response.data) if isinstance(response.data, dict) else response.data
        code = getattr(detail, "code", None) or _code_for(response.status_code)
        response.data = {"code": code, "message": str(detail)}
        if isinstance(exc, Http404) or response.status_code == 404:
            response.data["code"] = "not_found"
    return response


def error_response(exc: Exception) -> HttpResponse | None:
    """`exc` answered as a view's would be, outside DRF's handling of it (a woken read, the
    lane's requests: `api.lane`): the same status, headers and JSON body; None when it is a bug
    (no answer of the API's)."""
    error = exception_handler(exc, {})
    if error is None:
        return None
    response = HttpResponse(
        ORJSONRenderer().render(error.data), status=error.status_code, content_type="application/json"
    )
    for name, value in error.items():
        if name.lower() != "content-type":
            response[name] = value
    return response


def _first_error(detail, prefix: str = "") -> tuple[str, str]:
    if isinstance(detail, dict):
        for key, value in detail.items():
            if key == "non_field_errors":
                name = prefix
            elif isinstance(key, int):  # a list field's item (DRF keys those errors by index)
                name = f"{prefix}[{key}]"
            else:
                name = f"{prefix}.{key}" if prefix else str(key)
            return _first_error(value, name)
    if isinstance(detail, list) and detail:
        first = detail[0]
        if isinstance(first, (dict, list)):
            for i, item in enumerate(detail):
                if item:
                    return _first_error(item, f"{prefix}[{i}]")
        return prefix, str(first)
    return prefix, str(detail)


def _code_for(status_code: int) -> str:
    return {401: "not_authenticated", 403: "permission_denied", 405: "method_not_allowed"}.get(status_code, "error")


def _service_lost(exc) -> tuple[str, str] | None:
    """(code, what) when `exc` is the loss of a service the request needs, else None."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        return "database_unavailable", "the database"
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        return "redis_unavailable", "Redis (reader-group state)"
    if isinstance(exc, (QueueDown, KombuOperationalError)):  # a job's row is kept, failed: the lists show it
        return "broker_unavailable", "the task queue (Redis, Celery's broker)"
    if isinstance(exc, TierError):  # a released chunk the tier cannot give back now (/readyz says why)
        return "tier_unavailable", "long-term storage (a chunk this read needs lives there)"
    return None


def _unavailable(code: str, what: str, exc) -> tuple[dict, dict]:
    """A service the request needs was lost mid-way: the database (a restart, a failover, a
    killed backend; SQLite locked past its timeout) or Redis (restarted, unreachable). The
    database rolled the request's transaction back; a reader-group step is one Lua script, done
    whole or not at all, and a floor row left behind is brought up by the next step (docs/
    consuming.md). So nothing is half-done and the client may retry. Django closes a broken
    database connection when the request ends; redis-py reconnects on the next command."""
    logger.warning("%s unavailable: %s", what, exc)
    body = {"code": code, "message": f"{what} could not serve this request ({exc}); retry it"}
    return body, {"Retry-After": "1"}


def unavailable_as_503(view):
    """A plain Django view (not DRF's, whose handler above does it) answers the loss of the
    database or Redis as the API does, 503 with `Retry-After`, instead of a 500 page:
    `/metrics` reads both, and Prometheus marks a scrape that failed this way as down."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except Exception as exc:
            lost = _service_lost(exc)
            if lost is None:
                raise
            body, headers = _unavailable(*lost, exc)
            return JsonResponse(body, status=503, headers=headers)

    return wrapped


def api_aware_404(request, exception=None):
    """Django's handler404: a path under /api/ that no route matches (`/api/v1/streams/%C2%84/x/`)
    is answered in the API's error shape; the console keeps its page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"code": "not_found", "message": f"no API resource at {request.path}"}, status=404)
    return page_not_found(request, exception)


def api_aware_500(request):
    """Django's handler500: still a bug, but an API client gets JSON it can read."""
    if request.path.startswith("/api/"):
        return JsonResponse({"code": "server_error", "message": "the server failed on this request"}, status=500)
    return server_error(request)

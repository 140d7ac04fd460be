"""Large events (docs/api.md, "Large events"): one event whose payload is the request's body,
published by `POST /streams/{scope}/{name}/events/raw/` and spooled to disk in pieces as it
arrives (never held whole in memory: `store.large`), then appended as one record; and any event's
payload as bytes, by `GET …/events/{segment}/{offset}/payload/`, whole or by `Range`, which is
where a read's `payload_url` for a large event leads. A large event is otherwise an event like any
other: retention, delayed delivery, long-term storage and reader groups see a record."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import cast

from django.conf import settings
from django.http import Http404, HttpResponse, StreamingHttpResponse, UnreadablePostError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import BasePermission
from rest_framework.views import APIView

from access.principals import principal_of
from access.rules import Action, KeyKind, Target, TargetKind, decide
from api.byte_ranges import content_range, parse_range
from api.errors import error_response
from api.rendering import ORJSONRenderer
from compaction.view import payload_in_view
from domain.errors import FieldError
from domain.events import parse_raw_event
from groups.models import Subscription
from store.large import BodyCutOff, BodyTooLarge, spool
from store.segment.reads import NotLarge
from streams import logs, rate_limits, services
from streams.lookups import stream_for_publish
from streams.models import Stream
from streams.wire import payload_url

OCTET_STREAM = "application/octet-stream"


class LargeEventView(APIView):
    """One event, its payload the body (`Content-Type: application/octet-stream`)."""

    access = {"POST": Action.PUBLISH}
    access_target = TargetKind.STREAM
    renderer_classes = [ORJSONRenderer]

    @extend_schema(
        request={OCTET_STREAM: OpenApiTypes.BINARY},
        parameters=[
            OpenApiParameter("routing_key", OpenApiTypes.STR, description="as an event's `routing_key`"),
            OpenApiParameter("key", OpenApiTypes.STR, description="as an event's `key` (the compaction key)"),
            OpenApiParameter("deliver_at", OpenApiTypes.STR, description="as an event's: ISO 8601 or epoch ms"),
            OpenApiParameter("delay_ms", OpenApiTypes.INT, description="as an event's"),
            OpenApiParameter("ttl_s", OpenApiTypes.NUMBER, description="as an event's"),
        ],
        responses={
            201: OpenApiResponse(
                description='{"positions": [{"segment", "offset", "payload_url"}]}: where the event was written'
            )
        },
    )
    def post(self, request, scope, name):
        media = request.META.get("CONTENT_TYPE", "").split(";")[0].strip().lower()
        if media != OCTET_STREAM:
            raise FieldError(
                "Content-Type",
                f"must be {OCTET_STREAM}: the body is the event's payload (a batch of events is sent as "
                "JSON to …/events/)",
                code="unsupported_media_type",
            )
        stream = stream_for_publish(scope, name)
        if stream is None:
            raise Http404(f"no stream {scope}/{name}")
        size = _announced_length(request)
        cap = settings.CBR_MAX_LARGE_EVENT_BYTES
        now_ms = time.time_ns() // 1_000_000
        event = parse_raw_event(dict(request.query_params.lists()), size, cap, logs.publish_limits(stream), now_ms)
        if stream.publish_rate and size is not None:  # refused before the body is read
            rate_limits.check_publish(stream, 1, size)
        try:
            read = request._request.read if size is not None else request.META["wsgi.input"].read
            payload = spool(read, size, settings.CBR_DATA_DIR / "spool", cap)
        except BodyCutOff as cut:
            raise FieldError("body", f"{cut}; nothing was written", code="body_cut_off") from None
        except UnreadablePostError as lost:  # the connection broke mid-body
            raise FieldError(
                "body", f"the body could not be read whole ({lost}); nothing was written", code="body_cut_off"
            ) from None
        except BodyTooLarge:
            raise FieldError(
                "body", f"is over {cap} bytes (CBR_MAX_LARGE_EVENT_BYTES)", code="event_too_large"
            ) from None
        try:
            if stream.publish_rate and size is None:
                rate_limits.check_publish(stream, 1, len(payload))
            positions = services.do_publish(stream, [event._replace(payload=cast(bytes, payload))])
        finally:
            payload.close()
        answer = {
            "positions": [
                {"segment": s, "offset": o, "payload_url": payload_url(stream.full_name, s, o)} for s, o in positions
            ]
        }
        return HttpResponse(
            ORJSONRenderer().render(answer), status=status.HTTP_201_CREATED, content_type="application/json"
        )


def _announced_length(request) -> int | None:
    """The body's `Content-Length`, None for a chunked body (its cap is kept as it is spooled)."""
    raw = request.META.get("CONTENT_LENGTH", "")
    if raw == "" and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
        return None
    if not raw.isdigit():
        raise FieldError(
            "Content-Length", "is required: the body's length in bytes (or a chunked body)", code="invalid"
        )
    return int(raw)


class _MayReadPayload(BasePermission):
    """Whoever may see the stream, and a reader group's key for a group that reads it (whose
    reads carry the `payload_url`s)."""

    message = "not allowed"

    def has_permission(self, request, view):
        principal = principal_of(request)
        stream = f"{view.kwargs['scope']}/{view.kwargs['name']}"
        decision = decide(principal, Action.VIEW, Target(TargetKind.STREAM, stream))
        self.message = decision.reason
        key = principal.key
        if decision.allowed or key is None or key.kind != KeyKind.READER_GROUP:
            return decision.allowed
        reads_it = any(
            Subscription.objects.filter(
                reader_group__scope__name=group.split("/")[0],
                reader_group__name=group.split("/")[1],
                stream__scope__name=view.kwargs["scope"],
                stream__name=view.kwargs["name"],
            ).exists()
            for group in key.names
        )
        if not reads_it:
            self.message = f"this API key's reader group does not read the stream {stream}"
        return reads_it


class EventPayloadView(APIView):
    """One event's payload, as bytes: whole, or the one range `Range: bytes=…` asks for."""

    access = {"GET": Action.VIEW}  # (the stream's, or a reader group's that reads it: `_MayReadPayload`)
    permission_classes = [_MayReadPayload]

    @extend_schema(
        parameters=[
            OpenApiParameter("Range", OpenApiTypes.STR, OpenApiParameter.HEADER, description="bytes=first-last")
        ],
        responses={
            (200, OCTET_STREAM): OpenApiResponse(description="the payload's bytes"),
            (206, OCTET_STREAM): OpenApiResponse(description="the range asked for, with Content-Range"),
        },
    )
    def get(self, request, scope, name, segment, offset):
        stream = _stream(scope, name)
        log = logs.stream_log(stream)
        where = (
            f"no event at segment {segment}, offset {offset} of {scope}/{name} (never written, or deleted by retention)"
        )
        try:
            large = log.large_payload(segment, offset)
        except NotLarge:
            return _small_payload(request, stream, log, segment, offset, where)
        if large is None:
            return _bytes_answer(request, _kept_by_view(stream, segment, offset, where))
        try:
            wanted = parse_range(request.META.get("HTTP_RANGE"), large.size)
        except FieldError as refused:
            large.close()
            return _not_satisfiable(refused, large.size)
        first, last = wanted if wanted is not None else (0, large.size - 1)
        response = StreamingHttpResponse(
            _pieces(large, first, last), status=200 if wanted is None else 206, content_type=OCTET_STREAM
        )
        return _with_length(response, wanted, first, last, large.size)


def _stream(scope: str, name: str) -> Stream:
    stream = Stream.objects.filter(scope__name=scope, name=name).select_related("scope").first()
    if stream is None:
        raise Http404(f"no stream {scope}/{name}")
    return stream


def _pieces(large, first: int, last: int) -> Iterator[bytes]:
    try:
        if last >= first:
            yield from large.pieces(first, last)
    finally:
        large.close()


def _kept_by_view(stream: Stream, segment: str, offset: int, where: str) -> bytes:
    """The payload of an event the live log no longer holds, as the stream's compacted view
    keeps it (the latest value of its key); 404 when it does not."""
    payload = payload_in_view(stream, segment, offset)
    if payload is None:
        raise Http404(where)
    return payload


def _small_payload(request, stream: Stream, log, segment: str, offset: int, where: str) -> HttpResponse:
    """An event that is not large: its payload, from a read of its record (or the compacted
    view's, once the log no longer holds it)."""
    got = log.segment(segment).read(offset, 1)
    if not got or got[0].offset != offset:
        return _bytes_answer(request, _kept_by_view(stream, segment, offset, where))
    return _bytes_answer(request, got[0].payload)


def _bytes_answer(request, payload: bytes) -> HttpResponse:
    """A payload held in memory, whole or the range asked for."""
    try:
        wanted = parse_range(request.META.get("HTTP_RANGE"), len(payload))
    except FieldError as refused:
        return _not_satisfiable(refused, len(payload))
    first, last = wanted if wanted is not None else (0, len(payload) - 1)
    response = HttpResponse(payload[first : last + 1], status=200 if wanted is None else 206, content_type=OCTET_STREAM)
    return _with_length(response, wanted, first, last, len(payload))


def _not_satisfiable(refused: FieldError, size: int):
    """416, in the API's error shape, with the `Content-Range` that says the payload's size."""
    response = error_response(refused)
    assert response is not None  # (a FieldError always has its answer)
    response["Content-Range"] = f"bytes */{size}"
    return response


def _with_length(response, wanted, first: int, last: int, size: int):
    response["Content-Length"] = str(max(0, last + 1 - first))
    response["Accept-Ranges"] = "bytes"
    if wanted is not None:
        response["Content-Range"] = content_range(first, last, size)
    return response

"""The stream part of the REST API (docs/api.md). Each view translates: parse, call a service,
answer. Rules live in streams.domain, domain.policy_spec and the services."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator

import orjson
from django.conf import settings
from django.http import Http404, HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from access.rules import Action, TargetKind
from api.event_serializers import EventsReadSerializer, PublishedSerializer, PublishSerializer
from api.fields import TAG_PARAMETER
from api.middleware import FreedAnswers
from api.pagination import query_int
from api.parking import PARK, Parked, check_room_to_wait
from api.rendering import ORJSONRenderer
from api.retention_serializers import (
    RetentionPolicyInSerializer,
    RetentionPolicySerializer,
    RetentionSetRecordSerializer,
    TruncateSerializer,
    TruncationRecordSerializer,
)
from api.stream_serializers import (
    ScaledSerializer,
    ScaleSerializer,
    ScalingPolicySerializer,
    ScalingSerializer,
    StreamCreateSerializer,
    StreamSerializer,
    StreamUpdateSerializer,
    segment_answer,
)
from compaction.runs import becoming_compacted_warnings
from domain.compaction import COMPACTION_NUMBERS
from domain.cuts import parse_cut_json
from domain.epoch_cuts import check_stream_cut
from domain.errors import FieldError
from domain.event_filters import EventFilter, parse_filter
from domain.events import parse_batch
from domain.policy_spec import parse_policy
from domain.times import parse_time
from groups.consuming import dead_letters
from retention import services as retention_services
from retention import set_store
from streams import deletion, logs, rate_limits, services, tiering
from streams import scaling as scaling_services
from streams import tasks as stream_tasks
from streams.browsing import between as browse_between
from streams.browsing import browse
from streams.found import found_or_404
from streams.lookups import stream_for_publish
from streams.models import Stream
from streams.tags import tagged
from streams.tailing import read_events_waiting
from streams.waking import Wait
from streams.wire import CSV_COLUMNS, csv_row, event_json

MAX_READ_LIMIT = 10_000


def get_stream(scope: str, name: str) -> Stream:
    return found_or_404(
        Stream.objects.select_related("scope__defaults", "retention_policy"),
        f"stream {scope}/{name}",
        scope__name=scope,
        name=name,
    )


def stream_answer(streams: list[Stream]) -> dict:
    return {
        "states": {s.pk: logs.stream_state(s) for s in streams},
        "tier_usage": tiering.tier_usage([s.pk for s in streams]),
    }


def checked_cut(stream: Stream, value: object, field: str, *, complete: bool, tail: dict[str, int]) -> dict[str, int]:
    """A cut from a request, checked against the stream's segments and in its full form (every
    segment of every epoch still held: `domain.epoch_cuts.check_stream_cut`)."""
    log = logs.stream_log(stream)
    return check_stream_cut(value, field, stream.layout, log.sealed_ends(), complete=complete, tail=tail)


def query_text(request, field: str, default: str = "") -> str:
    """A text query parameter; NUL cannot be stored or compared in PostgreSQL text (a 500 there)."""
    value = request.query_params.get(field, default)
    if "\x00" in value:
        raise FieldError(field, "must not contain NUL characters")
    return value


class StreamListView(GenericAPIView):
    access = {"GET": Action.VIEW, "POST": Action.MANAGE_STREAMS}
    serializer_class = StreamSerializer
    queryset = Stream.objects.select_related("scope__defaults", "retention_policy")

    @extend_schema(
        parameters=[
            OpenApiParameter("scope", OpenApiTypes.STR, description="only streams of this scope"),
            OpenApiParameter("search", OpenApiTypes.STR, description="scope or name contains it (any case)"),
            TAG_PARAMETER,
        ],
        responses=StreamSerializer(many=True),
    )
    def get(self, request):
        qs = self.get_queryset()
        if scope := query_text(request, "scope"):
            qs = qs.filter(scope__name=scope)
        qs = tagged(qs.search(query_text(request, "search").strip()), request.query_params.getlist("tag"))
        page = self.paginate_queryset(qs)
        data = StreamSerializer(page, many=True, context=stream_answer(page)).data
        return self.get_paginated_response(data)

    @extend_schema(request=StreamCreateSerializer, responses={201: StreamSerializer})
    def post(self, request):
        body = StreamCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        args = body.validated_data
        stream = retention_services.do_create_stream(
            scope=args["scope"],
            name=args["name"],
            # a scaling policy's min_segments is also the stream's first count, as in Pravega
            segment_count=max(args["segment_count"], args.get("scaling_policy", {}).get("min_segments", 1)),
            cleanup_policy=args.get("cleanup_policy"),
            on_max_limit=args["on_max_limit"],
            max_delay_s=args.get("max_delay_s"),
            message_ttl_s=args.get("message_ttl_s"),
            delayed_index=dict(args.get("delayed_index") or {}),
            compaction={k: args[k] for k in COMPACTION_NUMBERS if k in args},
            description=args.get("description", ""),
            tags=args.get("tags", {}),
            publish_rate=args.get("publish_rate") or {},
            policy=args.get("retention_policy"),
            user=request.user,
            scaling_policy=args.get("scaling_policy"),
        )
        stream = get_stream(stream.scope.name, stream.name)
        data = StreamSerializer(stream, context=stream_answer([stream])).data
        return Response(data, status=status.HTTP_201_CREATED)


class StreamDetailView(APIView):
    access = {"GET": Action.VIEW, "PATCH": Action.MANAGE_STREAMS, "DELETE": Action.DELETE_STREAM}
    access_target = TargetKind.STREAM

    @extend_schema(responses=StreamSerializer)
    def get(self, request, scope, name):
        stream = get_stream(scope, name)
        state = logs.refresh_segments(stream)
        return Response(StreamSerializer(stream, context={"states": {stream.pk: state}}).data)

    @extend_schema(request=StreamUpdateSerializer, responses=StreamSerializer)
    def patch(self, request, scope, name):
        stream = get_stream(scope, name)
        body = StreamUpdateSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        changes = dict(body.validated_data)
        if "publish_rate" in changes and changes["publish_rate"] is None:
            changes["publish_rate"] = {}  # null: no limit
        if "delayed_index" in changes:  # the keys given replace theirs, the others stay
            changes["delayed_index"] = {**stream.delayed_index, **changes["delayed_index"]}
        was_compacted = stream.is_compacted
        services.do_update_stream(stream, changes)
        answer = StreamSerializer(stream, context=stream_answer([stream])).data
        warnings = becoming_compacted_warnings(stream, was_compacted)
        if warnings:  # allowed: keyless events stay on the live log, the compacted view leaves them out
            answer["warnings"] = warnings
        return Response(answer)

    @extend_schema(responses={204: None})
    def delete(self, request, scope, name):
        deletion.do_delete_stream(get_stream(scope, name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class RetentionPolicyView(APIView):
    access = {"GET": Action.VIEW, "PUT": Action.MANAGE_STREAMS}
    access_target = TargetKind.STREAM

    @extend_schema(responses=RetentionPolicySerializer)
    def get(self, request, scope, name):
        stream = get_stream(scope, name)
        policy = getattr(stream, "retention_policy", None)
        if policy is None:
            return Response(
                {"code": "not_found", "message": "this stream has no retention policy"},
                status=status.HTTP_404_NOT_FOUND,
            )
        return Response(RetentionPolicySerializer(policy).data)

    @extend_schema(request=RetentionPolicyInSerializer, responses=RetentionPolicySerializer)
    def put(self, request, scope, name):
        stream = get_stream(scope, name)
        policy = retention_services.do_set_policy(stream, parse_policy(request.data), request.user)
        return Response(RetentionPolicySerializer(policy).data)


class EventsView(FreedAnswers, APIView):
    access = {"GET": Action.VIEW, "POST": Action.PUBLISH}
    access_target = TargetKind.STREAM

    @extend_schema(request=PublishSerializer, responses={201: PublishedSerializer})
    def post(self, request, scope, name):
        return publish(scope, name, request.data)

    @extend_schema(
        parameters=[
            OpenApiParameter("from", OpenApiTypes.STR, description='stream cut as JSON, {"0": 12}'),
            OpenApiParameter(
                "from_time",
                OpenApiTypes.DATETIME,
                description="instead of `from`: start at the first events published at or after this "
                "ISO 8601 time (with its UTC offset)",
            ),
            OpenApiParameter("limit", OpenApiTypes.INT, description=f"1..{MAX_READ_LIMIT}"),
            OpenApiParameter("contains", OpenApiTypes.STR, description="only events whose payload contains this text"),
            OpenApiParameter(
                "header",
                OpenApiTypes.STR,
                many=True,
                description="`name:value`, repeatable: only events with these header values",
            ),
            OpenApiParameter(
                "json",
                OpenApiTypes.STR,
                description="a condition on a JSON payload: `$.amount>100`, `$.state=paid` (= != < <= > >=)",
            ),
            OpenApiParameter("routing_key", OpenApiTypes.STR, description="only events with this routing key"),
            OpenApiParameter("key", OpenApiTypes.STR, description="only events with this compaction key"),
            OpenApiParameter(
                "wait_ms",
                OpenApiTypes.INT,
                description=f"0..{settings.CBR_MAX_WAIT_MS}: with nothing from `from` on, wait that long for an "
                "event (answered as soon as one is published; `events: []` when the wait ends first)",
            ),
        ],
        responses=EventsReadSerializer,
    )
    def get(self, request, scope, name):
        stream = get_stream(scope, name)
        limit = query_int(request, "limit", 100, 1, MAX_READ_LIMIT)
        wait_ms = query_int(request, "wait_ms", 0, 0, settings.CBR_MAX_WAIT_MS)
        tail = logs.stream_log(stream).tail_cut()
        raw = request.query_params.get("from")
        at = request.query_params.get("from_time")
        from_cut = {}
        if raw is not None and at is not None:
            raise FieldError("from_time", "give `from` or `from_time`, not both")
        if raw is not None:
            from_cut = checked_cut(stream, parse_cut_json(raw, "from"), "from", complete=False, tail=tail)
        elif at is not None:
            from_cut = logs.stream_log(stream).cut_at_time(int(parse_time(at, "from_time").timestamp() * 1000))
        where = search_of(request)
        if not where.empty:  # a search: each page examines at most CBR_SEARCH_SCAN_EVENTS
            if wait_ms:
                raise FieldError("wait_ms", "a search does not wait: leave wait_ms out, or the filters")
            page = browse(stream, from_cut, limit, budget=settings.CBR_SEARCH_SCAN_EVENTS, where=where)
            shown = logs.stream_log(stream).shown(page.next_cut)
            return Response({"events": page.events, "next_cut": shown, "examined": page.examined})
        if wait_ms:
            check_room_to_wait()
        park = PARK in request.META
        records, next_cut, wait = read_events_waiting(stream, from_cut, limit, wait_ms, park)
        if wait is not None:
            return Parked(wait, _resumed_events(stream, from_cut, limit, wait))
        return Response(_events_answer(stream, records, next_cut))


def publish(scope: str, name: str, data) -> HttpResponse:
    """A publish's answer (the view's and `api.lane`'s), once the batch is durable."""
    stream = stream_for_publish(scope, name)
    if stream is None:
        raise Http404(f"no stream {scope}/{name}")
    now_ms = time.time_ns() // 1_000_000
    events = parse_batch(data, logs.publish_limits(stream), now_ms)
    if stream.publish_rate:  # refused whole, before anything is written
        rate_limits.check_publish(stream, len(events), sum(len(e.payload) for e in events))
    positions = services.do_publish(stream, events)
    # rendered here, as DRF's renderer would (the same bytes and headers): DRF's rendering of a
    # `Response` was ~0.05 ms of a one-event publish's CPU
    answer = {"positions": [{"segment": s, "offset": o} for s, o in positions]}
    return HttpResponse(
        ORJSONRenderer().render(answer), status=status.HTTP_201_CREATED, content_type="application/json"
    )


def search_of(request) -> EventFilter:
    """A read's or an export's search, from its query (`domain.event_filters`)."""
    query = request.query_params
    return parse_filter(
        routing_key=query.get("routing_key"),
        key=query.get("key"),
        contains=query.get("contains"),
        headers=query.getlist("header"),
        json_condition=query.get("json"),
    )


def only_field(request, name: str, what: str) -> object:
    """A body of one field, `name`: its value; a body without it, or with another field, refused
    naming the field."""
    body = request.data
    if not isinstance(body, dict) or name not in body:
        raise FieldError(name, "is required")
    unknown = sorted(set(body) - {name})
    if unknown:
        raise FieldError(unknown[0], f"is not a field of {what}")
    return body[name]


def _events_answer(stream: Stream, records, next_cut: dict[str, int]) -> dict:
    return {
        "events": [event_json(r, stream.full_name) for r in records],
        "next_cut": logs.stream_log(stream).shown(next_cut),
    }


def _resumed_events(stream: Stream, from_cut: dict[str, int], limit: int, first: Wait):
    """What a parked plain read does when woken (`api.parking`): read once more, until its wait
    ends."""

    def resume(cause: str) -> HttpResponse:
        left = max(0, int((first.deadline - time.monotonic()) * 1000))
        records, next_cut, wait = read_events_waiting(stream, from_cut, limit, left, park=True, since=first.since)
        if wait is not None:
            return Parked(wait, _resumed_events(stream, from_cut, limit, wait))
        answer = _events_answer(stream, records, next_cut)
        return HttpResponse(ORJSONRenderer().render(answer), content_type="application/json")

    return resume


class TruncateView(APIView):
    access = {"POST": Action.TRUNCATE}
    access_target = TargetKind.STREAM

    @extend_schema(request=TruncateSerializer, responses=TruncationRecordSerializer)
    def post(self, request, scope, name):
        stream = get_stream(scope, name)
        given = only_field(request, "stream_cut", "a truncation")
        tail = logs.stream_log(stream).tail_cut()
        cut = checked_cut(stream, given, "stream_cut", complete=True, tail=tail)
        return truncated(request, stream, cut)


class PurgeSerializer(serializers.Serializer):
    to = serializers.JSONField(
        help_text='"tail" (everything held) or {"time": ISO 8601} (what was published before it)'
    )


class PurgeView(APIView):
    """A purge (admins): a manual truncation at the tail, or at a time, as the console's Purge."""

    access = {"POST": Action.TRUNCATE}
    access_target = TargetKind.STREAM

    @extend_schema(request=PurgeSerializer, responses=TruncationRecordSerializer)
    def post(self, request, scope, name):
        stream = get_stream(scope, name)
        to = only_field(request, "to", "a purge")
        return truncated(request, stream, retention_services.purge_cut(stream, to))


class ExportView(APIView):
    """The events between two cuts (default: the head to the tail when asked), filtered as a
    search is, streamed as JSON lines or CSV: an export of any size holds a page in memory."""

    serializer_class = None  # (its answer is not JSON: the schema says so in extend_schema)
    access = {"GET": Action.VIEW}
    access_target = TargetKind.STREAM

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "from", OpenApiTypes.STR, description='a stream cut as JSON, {"0": 12} (default: the head)'
            ),
            OpenApiParameter(
                "to", OpenApiTypes.STR, description="a stream cut as JSON, not included (default: the tail)"
            ),
            OpenApiParameter("format", OpenApiTypes.STR, enum=["jsonl", "csv"], description="default jsonl"),
            OpenApiParameter("contains", OpenApiTypes.STR),
            OpenApiParameter("header", OpenApiTypes.STR, many=True),
            OpenApiParameter("json", OpenApiTypes.STR),
            OpenApiParameter("routing_key", OpenApiTypes.STR),
            OpenApiParameter("key", OpenApiTypes.STR),
        ],
        responses={(200, "application/x-ndjson"): OpenApiTypes.STR, (200, "text/csv"): OpenApiTypes.STR},
    )
    def perform_content_negotiation(self, request, force=False):
        """`format` names the export's own format, not one of DRF's renderers (which would answer
        404 for `csv`); errors are JSON, as everywhere."""
        renderer = self.get_renderers()[0]
        return renderer, renderer.media_type

    def get(self, request, scope, name):
        stream = get_stream(scope, name)
        form = request.query_params.get("format", "jsonl")
        if form not in ("jsonl", "csv"):
            raise FieldError("format", "must be jsonl or csv")
        tail = logs.stream_log(stream).tail_cut()
        cuts = {}
        for field in ("from", "to"):
            raw = request.query_params.get(field)
            cuts[field] = (
                {} if raw is None else checked_cut(stream, parse_cut_json(raw, field), field, complete=False, tail=tail)
            )
        end = {**tail, **cuts["to"]}
        where = search_of(request)
        events = browse_between(stream, cuts["from"], end, where)
        body = _jsonl(events) if form == "jsonl" else _csv(events)
        media = "application/x-ndjson" if form == "jsonl" else "text/csv; charset=utf-8"
        response = StreamingHttpResponse(body, content_type=media)
        response["Content-Disposition"] = f'attachment; filename="{scope}-{name}.{form}"'
        return response


def _jsonl(events) -> Iterator[bytes]:
    lines: list[bytes] = []
    for event in events:
        lines.append(orjson.dumps(event))
        if len(lines) == 1000:
            yield b"\n".join(lines) + b"\n"
            lines = []
    if lines:
        yield b"\n".join(lines) + b"\n"


def _csv(events) -> Iterator[bytes]:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for n, event in enumerate(events, 1):
        writer.writerow(csv_row(event))
        if n % 1000 == 0:
            yield out.getvalue().encode()
            out.seek(0)
            out.truncate()
    yield out.getvalue().encode()


class RepublishPositionSerializer(serializers.Serializer):
    segment = serializers.CharField()
    offset = serializers.IntegerField(min_value=0)


class RepublishSerializer(serializers.Serializer):
    events = RepublishPositionSerializer(many=True, required=False, help_text="the dead letters to republish")
    all = serializers.BooleanField(required=False, help_text="true: every dead letter the stream holds")


class RepublishedSerializer(serializers.Serializer):
    republished = serializers.IntegerField()
    skipped = serializers.IntegerField(help_text="republished before, not a dead letter, or its stream is gone")


class RepublishView(APIView):
    """Dead letters appended again to the streams they came from, each once (operators)."""

    access = {"POST": Action.MANAGE_STREAMS}
    access_target = TargetKind.STREAM

    @extend_schema(request=RepublishSerializer, responses=RepublishedSerializer)
    def post(self, request, scope, name):
        stream = get_stream(scope, name)
        body = request.data if isinstance(request.data, dict) else None
        if body is None or not ({"events", "all"} & set(body)):
            raise FieldError("events", 'is required (or "all": true)')
        unknown = sorted(set(body) - {"events", "all"})
        if unknown:
            raise FieldError(unknown[0], "is not a field of a republish")
        if "all" in body:
            if "events" in body or body["all"] is not True:
                raise FieldError("all", 'must be true, without "events"')
            positions = None
        else:
            positions = _positions(body["events"])
        outcome = dead_letters.republish(stream, positions, user=request.user)
        return Response({"republished": outcome.republished, "skipped": outcome.skipped})


def _positions(events: object) -> list[tuple[str, int]]:
    if not isinstance(events, list) or not events:
        raise FieldError("events", "must be a list of {segment, offset}, not empty")
    if len(events) > settings.CBR_MAX_BATCH_EVENTS:
        raise FieldError("events", f"at most {settings.CBR_MAX_BATCH_EVENTS} a request")
    out = []
    for n, e in enumerate(events):
        if not isinstance(e, dict) or set(e) != {"segment", "offset"}:
            raise FieldError(f"events[{n}]", "must be {segment, offset}")
        if not isinstance(e["segment"], str):
            raise FieldError(f"events[{n}].segment", "must be a string")
        if not isinstance(e["offset"], int) or isinstance(e["offset"], bool) or e["offset"] < 0:
            raise FieldError(f"events[{n}].offset", "must be a whole number >= 0")
        out.append((e["segment"], e["offset"]))
    return out


def truncated(request, stream: Stream, cut: dict[str, int]) -> Response:
    """A manual truncation's answer: its record, or a no-op's (the cut at or behind the head)."""
    record = retention_services.do_truncate(stream, cut, rule="manual", trigger="api", user=request.user)
    if record is not None:
        return Response(TruncationRecordSerializer(record).data)
    head = logs.stream_log(stream).head_cut()
    return Response(
        {
            "id": None,
            "stream": stream.full_name,
            "rule": "manual:noop",
            "before_cut": head,
            "after_cut": head,
            "message": "the cut is at or behind the head: nothing to truncate",
        }
    )


class SealedChunkSerializer(serializers.Serializer):
    segment = serializers.CharField()
    chunk = serializers.IntegerField(help_text="the sealed chunk's base: the offset of its first event")


class SealedSerializer(serializers.Serializer):
    sealed = SealedChunkSerializer(many=True)


def refuse_fields(request, what: str) -> None:
    """A request that takes no body: none, `{}`, or a 400 naming the first field sent."""
    if request.data and not isinstance(request.data, dict):
        raise FieldError("body", "must be a JSON object")
    unknown = sorted(set(request.data or {}))
    if unknown:
        raise FieldError(unknown[0], f"is not a field of {what} (it takes none)")


class SealView(APIView):
    access = {"POST": Action.RUN_JOBS}
    access_target = TargetKind.STREAM

    @extend_schema(request=None, responses=SealedSerializer)
    def post(self, request, scope, name):
        """Seal the stream's active chunks now (operators and admins), whatever their size and
        age, so that a compaction run can fold in everything published so far. Segments whose
        active chunk is empty are left as they are."""
        stream = get_stream(scope, name)
        refuse_fields(request, "a seal")
        sealed = logs.seal_active_chunks(stream)
        return Response({"sealed": [{"segment": seg, "chunk": base} for seg, base in sealed]})


class OffloadSerializer(serializers.Serializer):
    files = serializers.IntegerField(help_text="sealed files not in long-term storage yet, queued to go there")
    bytes = serializers.IntegerField()


class OffloadView(APIView):
    access = {"POST": Action.RUN_JOBS}
    access_target = TargetKind.STREAM

    @extend_schema(request=None, responses={202: OffloadSerializer})
    def post(self, request, scope, name):
        """Copy what the stream has sealed to long-term storage now, whatever its age (operators
        and admins): the worker does it; the answer says how many files and bytes it will copy.
        409 `no_tier` when the deployment has none (`CBR_TIER_URL`)."""
        stream = get_stream(scope, name)
        refuse_fields(request, "an offload")
        pending = tiering.pending(stream)
        if pending is None:
            raise FieldError("stream", "this deployment has no long-term storage (CBR_TIER_URL is not set)", "no_tier")
        stream_tasks.offload_stream.delay(stream.pk)
        return Response({"files": len(pending), "bytes": sum(f.size for f in pending)}, status=202)


class ScaleView(APIView):
    access = {"POST": Action.MANAGE_STREAMS}
    access_target = TargetKind.STREAM

    @extend_schema(request=ScaleSerializer, responses=ScaledSerializer)
    def post(self, request, scope, name):
        """Seal active segments and make successors over exactly their keys (a split, a merge, or
        both), as one step: the stream's next epoch (operators and admins). Publishing routes by
        the new segments at once; readers pass to a successor once they have read every one of
        its predecessors to its end."""
        stream = get_stream(scope, name)
        args = ScaleSerializer(data=request.data)
        args.is_valid(raise_exception=True)
        data = args.validated_data
        scaling = scaling_services.do_scale(
            stream,
            seal=data["seal"],
            new_ranges=data["new_ranges"],
            epoch=data.get("epoch"),
            by=request.user.get_username(),
        )
        layout = stream.layout
        return Response(
            {"epoch": scaling.epoch, "segments": [segment_answer(layout, layout[c["id"]]) for c in scaling.created]}
        )


class ScalingPolicyView(APIView):
    access = {"PUT": Action.MANAGE_STREAMS}
    access_target = TargetKind.STREAM

    @extend_schema(request=ScalingPolicySerializer, responses=StreamSerializer)
    def put(self, request, scope, name):
        """Replace how the stream scales by itself (operators): `fixed` (by hand only),
        `by_event_rate` or `by_byte_rate` with a `target_rate` per segment. Evaluated every minute;
        a `min_segments` above the active count splits at the next evaluation."""
        stream = get_stream(scope, name)
        services.do_set_scaling_policy(stream, request.data)
        return Response(StreamSerializer(stream, context=stream_answer([stream])).data)


class ScalingListView(GenericAPIView):
    access = {"GET": Action.VIEW}
    access_target = TargetKind.STREAM
    serializer_class = ScalingSerializer

    @extend_schema(responses=ScalingSerializer(many=True))
    def get(self, request, scope, name):
        """The stream's scales, newest first: the epoch each made, what it sealed and made, and
        why (`manual`, or `auto` with the rule and the rates that decided it)."""
        stream = get_stream(scope, name)
        page = self.paginate_queryset(stream.scalings.all())
        return self.get_paginated_response(ScalingSerializer(page, many=True).data)


class TruncationListView(GenericAPIView):
    access = {"GET": Action.VIEW}
    access_target = TargetKind.STREAM
    serializer_class = TruncationRecordSerializer

    @extend_schema(responses=TruncationRecordSerializer(many=True))
    def get(self, request, scope, name):
        stream = get_stream(scope, name)
        qs = stream.truncations.select_related("stream__scope", "triggered_by")
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(TruncationRecordSerializer(page, many=True).data)


class RetentionSetView(GenericAPIView):
    access = {"GET": Action.VIEW}
    access_target = TargetKind.STREAM
    serializer_class = RetentionSetRecordSerializer

    @extend_schema(responses=RetentionSetRecordSerializer(many=True))
    def get(self, request, scope, name):
        stream = get_stream(scope, name)
        page = self.paginate_queryset(set_store.entries(stream))
        return self.get_paginated_response(RetentionSetRecordSerializer(page, many=True).data)

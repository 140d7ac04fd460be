"""Reader groups over REST (docs/design/acks.md): create, list, detail, delete, and the
acknowledgement cut a MANUAL subscriber publishes. Thin: groups.reader_groups does the work."""

from __future__ import annotations

from typing import cast

import orjson
from django.db.models import Prefetch
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from access.rules import Action, TargetKind
from api.errors import error_response
from api.fields import TAG_PARAMETER
from api.group_serializers import (
    AckAnswerSerializer,
    AckRequestSerializer,
    CheckpointRequestSerializer,
    CheckpointSerializer,
    ConsumerSerializer,
    NackRequestSerializer,
    ReadAnswerSerializer,
    ReaderGroupCreateSerializer,
    ReaderGroupDetailSerializer,
    ReaderGroupListItemSerializer,
    ReaderGroupSerializer,
    ReaderGroupUpdateSerializer,
    ReadRequestSerializer,
    SeekRequestSerializer,
    SubscriptionSerializer,
    TruncationCutSerializer,
    read_request,
)
from api.middleware import FreedAnswers, NamedFormats
from api.parking import PARK, Answer, Parked, ReadyAnswer, check_room_to_wait
from api.rendering import ORJSONRenderer, ReadBatch, ReadBatchRenderer
from domain.errors import FieldError
from groups import consuming, reader_groups
from groups.models import ReaderGroup, Subscription
from groups.projections.consumers import assignments, consumer_figures
from groups.projections.lag import group_state
from groups.projections.overview import group_summaries
from streams.found import found_or_404
from streams.tags import tagged
from streams.wire import READ_BATCH_MEDIA_TYPE, deliveries_json


def reader_group_queryset():
    subs = Subscription.objects.select_related("stream__scope", "stream__retention_policy", "reader_group").order_by(
        "stream__scope__name", "stream__name"
    )
    return ReaderGroup.objects.select_related("scope").prefetch_related(Prefetch("subscription_set", queryset=subs))


def get_group(scope: str, name: str) -> ReaderGroup:
    return found_or_404(reader_group_queryset(), f"reader group {scope}/{name}", scope__name=scope, name=name)


class ReaderGroupListView(GenericAPIView):
    access = {"GET": Action.VIEW, "POST": Action.MANAGE_READER_GROUPS}
    serializer_class = ReaderGroupSerializer
    queryset = ReaderGroup.objects.none()

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "lag",
                OpenApiTypes.BOOL,
                description="with `true`, each group also says `lag_events` (events from its floors to the tails) "
                "and `pending` (deliveries handed out, not acknowledged): a Redis round trip and two queries a group",
            ),
            TAG_PARAMETER,
        ],
        responses=ReaderGroupListItemSerializer(many=True),
    )
    def get(self, request):
        lag = request.query_params.get("lag", "false")
        if lag not in ("true", "false"):
            raise FieldError("lag", "must be true or false")
        page = self.paginate_queryset(tagged(reader_group_queryset(), request.query_params.getlist("tag")))
        rows = ReaderGroupSerializer(page, many=True).data
        if lag == "true":
            for row, summary in zip(rows, group_summaries(page), strict=True):
                row["lag_events"], row["pending"] = summary.lag_events, summary.pending
        return self.get_paginated_response(rows)

    @extend_schema(request=ReaderGroupCreateSerializer, responses={201: ReaderGroupSerializer})
    def post(self, request):
        body = ReaderGroupCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        args = dict(body.validated_data)
        streams = reader_groups.check_streams(args.pop("streams"))
        group = reader_groups.do_create_reader_group(streams=streams, **args)
        group = get_group(group.scope.name, group.name)
        return Response(_detail(group), status=status.HTTP_201_CREATED)


class ReaderGroupDetailView(APIView):
    access = {"GET": Action.VIEW, "PATCH": Action.MANAGE_READER_GROUPS, "DELETE": Action.MANAGE_READER_GROUPS}
    access_target = TargetKind.READER_GROUP

    @extend_schema(responses=ReaderGroupDetailSerializer)
    def get(self, request, scope, name):
        return Response(_detail(get_group(scope, name)))

    @extend_schema(request=ReaderGroupUpdateSerializer, responses=ReaderGroupDetailSerializer)
    def patch(self, request, scope, name):
        group = get_group(scope, name)
        body = ReaderGroupUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        changes = dict(body.validated_data)
        generation = changes.pop("generation", None)
        names = changes.pop("streams", None)
        streams = reader_groups.check_streams(names) if names is not None else None
        reader_groups.do_update_reader_group(group, changes, generation=generation, streams=streams)
        return Response(_detail(get_group(scope, name)))

    @extend_schema(responses={204: None})
    def delete(self, request, scope, name):
        reader_groups.do_delete_reader_group(get_group(scope, name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConsumingView(FreedAnswers, APIView):
    """What a group's consumers do: people who may consume, or the group's own API key."""

    access = {"GET": Action.VIEW, "POST": Action.CONSUME}
    access_target = TargetKind.READER_GROUP


class TruncationCutView(ConsumingView):
    @extend_schema(
        request=TruncationCutSerializer,
        responses=PolymorphicProxySerializer(
            "TruncationCutAnswer",
            serializers=[
                SubscriptionSerializer,
                inline_serializer("StreamCutsPublished", {"streams": SubscriptionSerializer(many=True)}),
            ],
            resource_type_field_name=None,
        ),
    )
    def post(self, request, scope, name):
        """Publish the group's acknowledgement cut of one stream (`stream`, `stream_cut`: answers
        that stream), or of several at once (`stream_cuts`: every cut checked first, all applied or
        none; answers `{"streams": [...]}`)."""
        group = get_group(scope, name)
        if isinstance(request.data, dict) and "stream_cuts" in request.data:
            subs = reader_groups.do_update_truncation_cuts(group, request.data)
            return Response({"streams": SubscriptionSerializer(_subscriptions([s.pk for s in subs]), many=True).data})
        sub = reader_groups.do_update_truncation_cut(group, request.data)
        return Response(SubscriptionSerializer(_subscriptions([sub.pk])[0]).data)


def _subscriptions(pks: list[int]) -> list[Subscription]:
    """The subscriptions as answers show them, in the order of `pks`."""
    found = Subscription.objects.select_related("stream__scope", "stream__retention_policy", "reader_group").in_bulk(
        pks
    )
    return [found[pk] for pk in pks]


class SeekView(ConsumingView):
    access = {"POST": Action.MANAGE_READER_GROUPS}

    @extend_schema(
        request=SeekRequestSerializer,
        responses=ReaderGroupDetailSerializer,
        examples=[
            OpenApiExample("to the head", value={"position": "head"}, request_only=True),
            OpenApiExample(
                "by publish time", value={"time": "2026-11-26T09:00:00Z", "generation": 3}, request_only=True
            ),
            OpenApiExample(
                "to stream cuts", value={"stream_cuts": {"shop/orders": {"0": 120, "1": 97}}}, request_only=True
            ),
        ],
    )
    def post(self, request, scope, name):
        """Move the group (resetReaderGroup, seek): to the head or tail, to the first events
        published at or after a time, or to given cuts. The generation moves on by one, live
        leases are dropped, and a subscriber's acknowledgement cut moves to the target (backwards
        too: it then holds what still exists from there)."""
        group = reader_groups.do_seek(get_group(scope, name), request.data)
        return Response(_detail(get_group(group.scope.name, group.name)))


def _body(data, allowed: set[str]) -> dict:
    if not isinstance(data, dict):
        raise FieldError("body", "must be a JSON object")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise FieldError(unknown[0], "is not a field of this request")
    return data


def _group_for_consuming(scope: str, name: str) -> ReaderGroup:
    return found_or_404(
        ReaderGroup.objects.select_related("scope"), f"reader group {scope}/{name}", scope__name=scope, name=name
    )


def group_and_slots_or_404(scope: str, name: str) -> tuple[ReaderGroup, list[consuming.Slot]]:
    """The group and its positions in one query (reads and acks are the hot path); 404 as above."""
    found = consuming.group_and_slots(scope, name)
    if found is None:
        group = _group_for_consuming(scope, name)  # raises the same 404 as every other view
        return group, consuming.slots(group)  # unless the group was made meanwhile
    return found


class ReadView(NamedFormats, ConsumingView):
    """Hand out up to `max_events` deliveries, each with a lease of the group's `ack_timeout_s`.
    JSON by default; a client that asks for `application/vnd.cbr.read-batch` (`Accept`) gets the
    same answer in binary (`streams.wire.encode_read_batch`), and its errors (and OPTIONS) in JSON."""

    renderer_classes = [ORJSONRenderer, ReadBatchRenderer]

    @extend_schema(
        request=ReadRequestSerializer,
        responses={(200, "application/json"): ReadAnswerSerializer, (200, READ_BATCH_MEDIA_TYPE): OpenApiTypes.BINARY},
    )
    def post(self, request, scope, name):
        binary = isinstance(request.accepted_renderer, ReadBatchRenderer)
        return read(scope, name, request.data, binary, park=PARK in request.META)

    def finalize_response(self, request, response, *args, **kwargs):
        """Only a read's answer renders in binary: anything else (an error, OPTIONS) in JSON,
        whatever the client accepts."""
        if isinstance(response, Parked):
            return response
        if (
            isinstance(getattr(request, "accepted_renderer", None), ReadBatchRenderer)
            and isinstance(response, Response)
            and not isinstance(response.data, ReadBatch)
        ):
            request.accepted_renderer, request.accepted_media_type = ORJSONRenderer(), "application/json"
        return super().finalize_response(request, response, *args, **kwargs)


def read(scope: str, name: str, data, binary: bool, park: bool) -> HttpResponse:
    """A read's answer (the view's and `api.lane`'s): its deliveries, rendered in JSON or in
    binary, or `Parked` when it found nothing and `park` lets it wait without its thread."""
    group, group_slots = group_and_slots_or_404(scope, name)
    args = read_request(data)
    if args["wait_ms"] > 0:
        check_room_to_wait()
    result = consuming.read(
        group,
        args["max_events"],
        args["wait_ms"],
        args["consumer"],
        group_slots,
        args["ack"],
        args["ranges"],
        frames=binary,  # a binary answer sends the events as stored
        park=park and args["wait_ms"] > 0,
    )
    return rendered(result, binary)


def rendered(result: consuming.ReadResult, binary: bool, shared: dict | None = None) -> HttpResponse:
    if result.wait is not None:
        return _ParkedRead(result, binary)
    renderer = ReadBatchRenderer() if binary else ORJSONRenderer()
    return HttpResponse(renderer.render(_read_answer(result, binary, shared)), content_type=renderer.media_type)


def _read_answer(result: consuming.ReadResult, binary: bool, shared: dict | None = None) -> dict | ReadBatch:
    """A read's answer (docs/api.md): JSON's object, or the binary form's parts. `shared`: what
    the JSON answers of one batch of reads share (`streams.wire.deliveries_json`)."""
    head = {
        "missed": result.missed,
        "missed_by_stream": result.missed_by_stream,
        "pending_limit_reached": result.pending_limit_reached,
    }
    if result.delivery_ranges is not None:  # only when asked for
        head["delivery_ranges"] = result.delivery_ranges
    if result.acked is not None:  # only for a read that carried an ack: other answers stay as they were
        head["ack"] = _ack_fields(result.acked) | {"refused": result.acked.refused}
    if binary:
        return ReadBatch(head, result.parts, result.lease_expires_at)
    # the deliveries already JSON: `result.deliveries` as orjson writes it, without a dict per event
    return {"deliveries": orjson.Fragment(deliveries_json(result.parts, result.lease_expires_at, shared)), **head}


_JSON, _BINARY = ORJSONRenderer(), ReadBatchRenderer()


class _ParkedRead(Parked):
    """A group's read parked: woken, it is read once more with every other group's read woken
    about the same time (`consuming.read_woken`), and answered as the view would."""

    def __init__(self, result: consuming.ReadResult, binary: bool):
        super().__init__(result.wait)
        self.reading = result.wait.reading
        self.binary = binary

    @staticmethod
    def together(parked: list[Parked], causes: list[str]) -> list[Answer | Exception]:
        reads = cast(list[_ParkedRead], parked)
        results = consuming.read_woken([read.reading for read in reads], causes)
        # one publish woke them: many hand out the same event, written once for all (by the pass
        # that read it once)
        shared: dict = {}
        return [read.answer(result, shared) for read, result in zip(reads, results, strict=True)]

    def answer(self, result: consuming.ReadResult | Exception, shared: dict | None = None) -> Answer | Exception:
        if isinstance(result, Exception):  # answered as the view's errors are (a service lost: 503)
            return error_response(result) or result  # None: a bug, the front answers it as Django answers one
        if result.wait is not None:
            return _ParkedRead(result, self.binary)
        renderer = _BINARY if self.binary else _JSON
        return ReadyAnswer(renderer.render(_read_answer(result, self.binary, shared)), renderer.media_type)


def _ack_fields(outcome: consuming.AckOutcome) -> dict:
    return {"acked": outcome.acked, "waiting_for_sinks": outcome.waiting_for_sinks, "given_back": outcome.given_back}


def _ack_answer(outcome: consuming.AckOutcome) -> Response:
    return Response(_ack_fields(outcome))


def ack(scope: str, name: str, data) -> HttpResponse:
    """An ack's answer (the view's and `api.lane`'s)."""
    group, group_slots = group_and_slots_or_404(scope, name)
    data = _body(data, {"delivery_ids", "sink", "consumer"})
    consumer = data.get("consumer", "")
    if not isinstance(consumer, str) or len(consumer) > 128:
        raise FieldError("consumer", "must be text of at most 128 characters")
    outcome = consuming.ack(group, data.get("delivery_ids"), data.get("sink"), group_slots, consumer)
    return HttpResponse(ORJSONRenderer().render(_ack_fields(outcome)), content_type="application/json")


class AckView(ConsumingView):
    """Acknowledge deliveries, in any order; for fan-out groups, on behalf of one `sink`."""

    @extend_schema(request=AckRequestSerializer, responses=AckAnswerSerializer)
    def post(self, request, scope, name):
        return ack(scope, name, request.data)


class NackView(ConsumingView):
    """Give deliveries back: handed out again after `delay_ms`; `reason` goes with a dead letter."""

    @extend_schema(request=NackRequestSerializer, responses=AckAnswerSerializer)
    def post(self, request, scope, name):
        group, group_slots = group_and_slots_or_404(scope, name)
        body = NackRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        args = body.validated_data
        return _ack_answer(
            consuming.nack(
                group, args["delivery_ids"], args["delay_ms"], args["reason"], group_slots, sink=args["sink"]
            )
        )


class ConsumerListView(ConsumingView):
    @extend_schema(
        responses=inline_serializer(
            "ConsumerList",
            {
                "results": ConsumerSerializer(many=True),
                "next": serializers.CharField(allow_null=True, help_text="always null: one page"),
            },
        )
    )
    def get(self, request, scope, name):
        """The group's consumers heard from in the last day (and any holding deliveries), the
        most recently heard first: rates, deliveries in flight, totals."""
        group = _group_for_consuming(scope, name)
        rows = [ConsumerSerializer(row).data for row in consumer_figures(group)]
        return Response({"results": rows, "next": None})


class CheckpointListView(ConsumingView):
    @extend_schema(
        responses=inline_serializer(
            "CheckpointList",
            {
                "results": CheckpointSerializer(many=True),
                "next": serializers.CharField(allow_null=True, help_text="always null: the last 100 are the list"),
            },
        )
    )
    def get(self, request, scope, name):
        group = _group_for_consuming(scope, name)
        # `next` as every list has it (docs/api.md), null: the list is the group's last 100
        return Response({"results": CheckpointSerializer(group.checkpoints.all()[:100], many=True).data, "next": None})

    @extend_schema(request=CheckpointRequestSerializer, responses={201: CheckpointSerializer})
    def post(self, request, scope, name):
        group = _group_for_consuming(scope, name)
        body = CheckpointRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        cp_name = consuming.check_checkpoint_name(body.validated_data["name"])
        cp = consuming.do_checkpoint(group, cp_name, body.validated_data["persist"])
        return Response(CheckpointSerializer(cp).data, status=status.HTTP_201_CREATED)


class CheckpointDetailView(APIView):
    """One checkpoint: read it, or delete it (people who may consume, or the group's own key)."""

    access = {"GET": Action.VIEW, "DELETE": Action.CONSUME}
    access_target = TargetKind.READER_GROUP

    @extend_schema(responses=CheckpointSerializer, operation_id="reader_groups_checkpoint_retrieve")
    def get(self, request, scope, name, checkpoint):
        group = _group_for_consuming(scope, name)
        return Response(CheckpointSerializer(consuming.get_checkpoint(group, checkpoint)).data)

    @extend_schema(responses={204: None})
    def delete(self, request, scope, name, checkpoint):
        """Delete the checkpoint. An acknowledgement cut released at it stays where it is."""
        group = _group_for_consuming(scope, name)
        consuming.do_delete_checkpoint(group, checkpoint)
        return Response(status=status.HTTP_204_NO_CONTENT)


class CheckpointReleaseView(ConsumingView):
    @extend_schema(
        request=None, responses=inline_serializer("CheckpointReleased", {"streams": SubscriptionSerializer(many=True)})
    )
    def post(self, request, scope, name, checkpoint):
        group = _group_for_consuming(scope, name)
        subs = consuming.do_release_checkpoint(group, checkpoint)
        subs = Subscription.objects.select_related("stream__scope", "stream__retention_policy", "reader_group").filter(
            pk__in=[s.pk for s in subs]
        )
        return Response({"streams": SubscriptionSerializer(subs, many=True).data})


def _detail(group: ReaderGroup) -> dict:
    """A group's detail as answered: its positions read here (Redis and the store), then rendered."""
    context = {"positions": group_state(group), "assignments": assignments(group)}
    return ReaderGroupDetailSerializer(group, context=context).data

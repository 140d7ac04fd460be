"""Retention cycles over REST: queue one now (operators and admins; with a clock of one's choosing,
admins), watch its state and progress."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from access.permissions import can
from access.rules import Action
from api.retention_serializers import CycleRequestSerializer, RetentionCycleSerializer
from domain.errors import FieldError
from domain.names import split_stream_name
from retention.cycle.gathering import streams_with_policy
from retention.models import RetentionCycle
from retention.services import check_cycle_clock
from retention.tasks import run_retention_cycle
from streams.found import found_or_404
from streams.jobs import QueueDown, queue_job


class CycleListView(GenericAPIView):
    serializer_class = RetentionCycleSerializer
    queryset = RetentionCycle.objects.select_related("stream__scope", "requested_by")

    access = {"GET": Action.VIEW, "POST": Action.RUN_JOBS}

    @extend_schema(responses=RetentionCycleSerializer(many=True))
    def get(self, request):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(RetentionCycleSerializer(page, many=True).data)

    @extend_schema(request=CycleRequestSerializer, responses={201: RetentionCycleSerializer})
    def post(self, request):
        if not isinstance(request.data, dict):  # an empty body is {}; `[]` or `3` is no request
            raise FieldError("body", "must be a JSON object")
        body = CycleRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        stream = None
        if "stream" in body.validated_data:
            scope, name = split_stream_name(body.validated_data["stream"], "stream")
            stream = streams_with_policy().filter(scope__name=scope, name=name).first()
            if stream is None:
                raise FieldError("stream", f"no stream {scope}/{name} with a retention policy", "not_found")
        now = body.validated_data.get("now")
        if now is not None:
            if not can(request, Action.TRUNCATE):  # a clock of one's choosing truncates as a manual truncation does
                raise FieldError("now", "only admins may run a cycle at a time of their choosing", "forbidden")
            check_cycle_clock(now, stream)
        cycle = RetentionCycle.objects.create(trigger="api", requested_by=request.user, stream=stream, clock=now)
        if not queue_job(cycle, run_retention_cycle):
            raise QueueDown(cycle)  # 503 broker_unavailable; the cycle is listed as failed
        return Response(RetentionCycleSerializer(cycle).data, status=status.HTTP_201_CREATED)


class CycleDetailView(GenericAPIView):
    access = {"GET": Action.VIEW}
    serializer_class = RetentionCycleSerializer

    def get(self, request, pk: int):
        cycle = found_or_404(
            RetentionCycle.objects.select_related("stream__scope", "requested_by"), f"retention cycle {pk}", pk=pk
        )
        return Response(RetentionCycleSerializer(cycle).data)

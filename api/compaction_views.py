"""The compacted view and compaction runs over REST (docs/api.md)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from access.rules import Action, TargetKind
from api.pagination import query_int
from api.stream_views import get_stream
from compaction.models import CompactedView, CompactionRun
from compaction.runs import CompactionBusy
from compaction.tasks import queue_run
from compaction.view import read_view
from domain.errors import FieldError
from streams.jobs import FAILED, QueueDown

MAX_LIMIT = 10_000


class CompactionRunSerializer(serializers.ModelSerializer):
    stream = serializers.CharField(source="stream.full_name")
    duration_s = serializers.FloatField(allow_null=True)

    class Meta:
        model = CompactionRun
        fields = [
            "id",
            "stream",
            "state",
            "trigger",
            "phase",
            "engine",
            "generation",
            "horizon",
            "chunks",
            "events_in",
            "events_out",
            "keys",
            "keyless_dropped",
            "tombstones_dropped",
            "marked_by_retention",
            "missed",
            "missed_events",
            "bytes_before",
            "bytes_after",
            "error",
            "created_at",
            "started_at",
            "finished_at",
            "duration_s",
        ]


class CompactedPageSerializer(serializers.Serializer):
    generation = serializers.IntegerField(allow_null=True)
    horizon = serializers.DictField(child=serializers.IntegerField())
    events = serializers.ListField(child=serializers.DictField())
    next_after = serializers.CharField(allow_null=True)


def _compacted(scope: str, name: str):
    stream = get_stream(scope, name)
    if not stream.is_compacted:
        raise FieldError(
            "stream",
            f"{stream.full_name} is not compacted (cleanup_policy {stream.cleanup_policy})",
            "not_compacted",
        )
    return stream


class CompactedViewView(APIView):
    access = {"GET": Action.VIEW}
    access_target = TargetKind.STREAM

    @extend_schema(
        parameters=[OpenApiParameter("key", str), OpenApiParameter("after", str), OpenApiParameter("limit", int)],
        responses=CompactedPageSerializer,
    )
    def get(self, request, scope, name):
        """The stream's compacted view: the latest event per key, in key order, paged by key."""
        stream = _compacted(scope, name)
        limit = query_int(request, "limit", 100, 1, MAX_LIMIT)
        view = CompactedView.objects.filter(stream=stream).first()
        if view is None:
            return Response({"generation": None, "horizon": {}, "events": [], "next_after": None})
        page = read_view(stream, view, request.query_params.get("key"), request.query_params.get("after"), limit)
        return Response(
            {
                "generation": view.generation,
                "horizon": view.horizon,
                "events": page.events,
                "next_after": page.next_after,
            }
        )


class CompactionListView(GenericAPIView):
    access = {"GET": Action.VIEW, "POST": Action.RUN_JOBS}
    access_target = TargetKind.STREAM
    serializer_class = CompactionRunSerializer
    queryset = CompactionRun.objects.none()

    @extend_schema(responses=CompactionRunSerializer(many=True))
    def get(self, request, scope, name):
        """The stream's compaction runs, newest first, paginated like every list (docs/api.md:
        `{"results": [...], "next": …}`; it was a bare JSON list)."""
        stream = _compacted(scope, name)
        runs = CompactionRun.objects.filter(stream=stream).select_related("stream__scope")
        page = self.paginate_queryset(runs)
        return self.get_paginated_response(CompactionRunSerializer(page, many=True).data)

    @extend_schema(request=None, responses={202: CompactionRunSerializer})
    def post(self, request, scope, name):
        """Compact now (operators and admins): the run is queued for the worker; 409 while one is running."""
        stream = _compacted(scope, name)
        try:
            run = queue_run(stream, "api")
        except CompactionBusy:
            raise FieldError(
                "stream", f"a compaction of {stream.full_name} is already running", "compaction_running"
            ) from None
        if run.state == FAILED:  # the broker did not take it (`streams.jobs`): 503 broker_unavailable
            raise QueueDown(run)
        return Response(CompactionRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)

"""Reader groups over REST (DESIGN.md §7, §10): create, list, detail, delete, and the
acknowledgement cut a MANUAL subscriber publishes. Thin: streams.reader_groups does the work."""

from __future__ import annotations

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.permissions import IsAdminUser
from rest_framework.response import Response
from rest_framework.views import APIView

from streams import reader_groups
from streams.models import ReaderGroup, Subscription

from .serializers import (
    ReaderGroupCreateSerializer,
    ReaderGroupSerializer,
    SubscriptionSerializer,
    TruncationCutSerializer,
)


def reader_group_queryset():
    subs = Subscription.objects.select_related(
        "stream__scope", "stream__retention_policy", "reader_group"
    ).order_by("stream__scope__name", "stream__name")
    return ReaderGroup.objects.select_related("scope").prefetch_related(
        Prefetch("subscription_set", queryset=subs)
    )


def get_group(scope: str, name: str) -> ReaderGroup:
    return get_object_or_404(reader_group_queryset(), scope__name=scope, name=name)


def staff_only(request, what: str):
    if request.user.is_staff:
        return None
    return Response(
        {"code": "permission_denied", "message": f"only admins {what} (until roles land)"},
        status=status.HTTP_403_FORBIDDEN,
    )


class ReaderGroupListView(GenericAPIView):
    serializer_class = ReaderGroupSerializer
    queryset = ReaderGroup.objects.none()

    @extend_schema(responses=ReaderGroupSerializer(many=True))
    def get(self, request):
        page = self.paginate_queryset(reader_group_queryset())
        return self.get_paginated_response(ReaderGroupSerializer(page, many=True).data)

    @extend_schema(request=ReaderGroupCreateSerializer, responses={201: ReaderGroupSerializer})
    def post(self, request):
        body = ReaderGroupCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        args = dict(body.validated_data)
        if args["retention_type"] != "NONE" and (denied := staff_only(request, "create subscribers")):
            return denied
        streams = reader_groups.check_streams(args.pop("streams"))
        group = reader_groups.do_create_reader_group(streams=streams, **args)
        group = get_group(group.scope.name, group.name)
        return Response(ReaderGroupSerializer(group).data, status=status.HTTP_201_CREATED)


class ReaderGroupDetailView(APIView):
    @extend_schema(responses=ReaderGroupSerializer)
    def get(self, request, scope, name):
        return Response(ReaderGroupSerializer(get_group(scope, name)).data)

    @extend_schema(responses={204: None})
    def delete(self, request, scope, name):
        group = get_group(scope, name)
        if group.is_subscriber and (denied := staff_only(request, "delete subscribers")):
            return denied
        reader_groups.do_delete_reader_group(group)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TruncationCutView(APIView):
    permission_classes = [IsAdminUser]

    @extend_schema(request=TruncationCutSerializer, responses=SubscriptionSerializer)
    def post(self, request, scope, name):
        group = get_group(scope, name)
        sub = reader_groups.do_update_truncation_cut(group, request.data)
        sub = Subscription.objects.select_related(
            "stream__scope", "stream__retention_policy", "reader_group"
        ).get(pk=sub.pk)
        return Response(SubscriptionSerializer(sub).data)

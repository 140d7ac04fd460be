"""Signing in for a token, and API keys over REST (docs/security.md): list, make (the key is in
this one answer), show, revoke. Thin: access.services checks and writes."""

from __future__ import annotations

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from access import services
from access.models import ApiKey
from access.rules import Action
from access.services import key_queryset
from api.access_serializers import (
    ApiKeyCreatedSerializer,
    ApiKeyCreateSerializer,
    ApiKeySerializer,
    AuthTokenSerializer,
    TokenSerializer,
)
from streams.found import found_or_404


class TokenView(ObtainAuthToken):
    """POST /api/v1/auth/token/ (open to everyone, as DRF's view, whose parsers it keeps): a
    missing or mistyped field is a 400 naming it; a username and password that do not match are a
    401, as for any bad credential (DRF answers 400 there)."""

    serializer_class = AuthTokenSerializer

    @extend_schema(request=AuthTokenSerializer, responses=TokenSerializer)
    def post(self, request, *args, **kwargs):
        body = self.get_serializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = authenticate(request, **body.validated_data)
        if user is None:  # or inactive
            raise AuthenticationFailed("that username and password do not match")
        token, _ = Token.objects.get_or_create(user=user)
        return Response({"token": token.key})


class ApiKeyListView(GenericAPIView):
    access = {"GET": Action.MANAGE_KEYS, "POST": Action.MANAGE_KEYS}
    serializer_class = ApiKeySerializer
    queryset = ApiKey.objects.none()

    @extend_schema(responses=ApiKeySerializer(many=True))
    def get(self, request):
        page = self.paginate_queryset(key_queryset())
        return self.get_paginated_response(ApiKeySerializer(page, many=True).data)

    @extend_schema(request=ApiKeyCreateSerializer, responses={201: ApiKeyCreatedSerializer})
    def post(self, request):
        body = ApiKeyCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        api_key, key = services.do_create_key(services.check_key_request(**body.validated_data), request.user)
        data = ApiKeySerializer(key_queryset().get(pk=api_key.pk)).data
        return Response({**data, "key": key}, status=status.HTTP_201_CREATED)


class ApiKeyDetailView(APIView):
    access = {"GET": Action.MANAGE_KEYS, "DELETE": Action.MANAGE_KEYS}

    @extend_schema(responses=ApiKeySerializer)
    def get(self, request, prefix):
        return Response(ApiKeySerializer(found_or_404(key_queryset(), f"API key {prefix}", prefix=prefix)).data)

    @extend_schema(responses={204: None})
    def delete(self, request, prefix):
        """Revoke the key: it stops working at once; the record stays."""
        services.do_revoke_key(found_or_404(ApiKey, f"API key {prefix}", prefix=prefix))
        return Response(status=status.HTTP_204_NO_CONTENT)

from __future__ import annotations

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from access.rules import KeyKind
from api.fields import RefusesUnknownFields, StreamNameField, StreamNamesField, StrictCharField, TimeField


class AuthTokenSerializer(RefusesUnknownFields, serializers.Serializer):
    """The body of POST /api/v1/auth/token/ (the pair is checked by the view: a wrong one is a 401)."""

    what = "a sign-in"

    username = StrictCharField(max_length=150)
    password = StrictCharField(trim_whitespace=False, style={"input_type": "password"})


@extend_schema_serializer(component_name="AuthToken")  # the name it had under DRF's view
class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="send it as `Authorization: Token <token>`")


class ApiKeyCreateSerializer(serializers.Serializer):
    name = StrictCharField(max_length=100, help_text="what the key is for")
    kind = serializers.ChoiceField(choices=[k.value for k in KeyKind])
    reader_group = StreamNameField(
        required=False, help_text="scope/name of the one reader group a reader_group key is for"
    )
    streams = StreamNamesField(required=False, help_text="scope/name of the streams a publish key publishes on")
    expires_at = TimeField(required=False, allow_null=True)

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({unknown[0]: "is not a field of this request"})
        return attrs


class ApiKeySerializer(serializers.Serializer):
    prefix = serializers.CharField(help_text="the key's public part, before the dot")
    name = serializers.CharField()
    kind = serializers.CharField()
    reader_group = serializers.SerializerMethodField()
    streams = serializers.SerializerMethodField()
    state = serializers.CharField(help_text="active, expired or revoked")
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    expires_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)

    def get_reader_group(self, key) -> str | None:
        group = key.reader_group
        return f"{group.scope.name}/{group.name}" if group is not None else None

    def get_streams(self, key) -> list[str]:
        return sorted(s.full_name for s in key.streams.all())


class ApiKeyCreatedSerializer(ApiKeySerializer):
    key = serializers.CharField(help_text="the whole key: shown this once, never again")

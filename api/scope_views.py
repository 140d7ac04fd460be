"""A scope's defaults for its streams over REST (docs/api.md): `PUT`, `GET`, `DELETE
/scopes/{scope}/defaults/`. Thin: retention.scope_defaults does the work."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from access.rules import Action
from api.fields import RefusesUnknownFields, declared_serializer
from api.retention_serializers import PolicyField
from domain.compaction import COMPACTION_FIELDS
from retention import scope_defaults

# null is "no default"; the bounds are a stream's own (`Any`: a class made at run time)
_CompactionDefaults: Any = declared_serializer("CompactionDefaults", COMPACTION_FIELDS, required=False, nullable=True)


class ScopeDefaultsSerializer(RefusesUnknownFields, _CompactionDefaults):
    """For the schema: parsed by domain.scope_defaults.parse_defaults (null: no default); the
    compaction settings' bounds are a stream's own (`COMPACTION_FIELDS`)."""

    what = "a scope's defaults"

    retention_policy = PolicyField(required=False, allow_null=True)


class ScopeDefaultsAnswerSerializer(ScopeDefaultsSerializer):
    scope = serializers.CharField()


def _answer(scope) -> dict:
    return {"scope": scope.name, **scope_defaults.scope_defaults(scope)}


class ScopeDefaultsView(APIView):
    access = {"GET": Action.VIEW, "PUT": Action.MANAGE_STREAMS, "DELETE": Action.MANAGE_STREAMS}

    @extend_schema(responses=ScopeDefaultsAnswerSerializer)
    def get(self, request, scope):
        """The settings the scope gives its streams that set none of their own (null: none)."""
        return Response(_answer(scope_defaults.get_scope(scope)))

    @extend_schema(
        request=ScopeDefaultsSerializer,
        responses=ScopeDefaultsAnswerSerializer,
        examples=[
            OpenApiExample(
                "a week, consumption-based; compacted with a day's view",
                value={
                    "retention_policy": {"limit_type": "time", "min": 604800, "consumption_based": True},
                    "cleanup_policy": "compact,delete",
                    "compacted_retention_s": 86400,
                },
                request_only=True,
            )
        ],
    )
    def put(self, request, scope):
        """Set the scope's defaults (operators and admins): every setting left out has none. Each
        stream of the scope that does not set a setting itself takes the scope's value at once,
        and follows it when it changes (its detail lists them in `inherited_from_scope`)."""
        made = scope_defaults.do_set_scope_defaults(scope, request.data, request.user)
        return Response(_answer(made))

    @extend_schema(responses={204: None})
    def delete(self, request, scope):
        """Remove the scope's defaults: the streams that inherited them go back to the built-in
        defaults (no retention policy, cleanup `delete`, …)."""
        scope_defaults.do_clear_scope_defaults(scope_defaults.get_scope(scope), request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

"""Lists page with `limit` and `offset`, as DRF's LimitOffsetPagination does, except that a bad
one is refused (400 naming it) instead of quietly replaced by the default."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination

from domain.errors import FieldError


def query_int(request, field: str, default: int, low: int, high: int) -> int:
    """A whole number from the query string within [low, high], or a 400 naming `field`."""
    raw = request.query_params.get(field)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise FieldError(field, "must be a whole number") from None
    if not low <= value <= high:
        raise FieldError(field, f"must be between {low} and {high}")
    return value


class StrictLimitOffsetPagination(LimitOffsetPagination):
    max_limit = 10_000
    max_offset = 1_000_000_000  # the database's integers end somewhere: a bigger one is a 400, not a 500

    def get_limit(self, request):
        return query_int(request, self.limit_query_param, self.default_limit, 1, self.max_limit)

    def get_offset(self, request):
        return query_int(request, self.offset_query_param, 0, 0, self.max_offset)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": self.max_limit},
            self.offset_query_param: {"minimum": 0, "maximum": self.max_offset},
        }
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters

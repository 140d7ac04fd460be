"""The OpenAPI schema tells the whole truth about errors (drf-spectacular postprocessing hook).

Views declare their success answers; every error the API can give is added here, once, in the
shape api/errors.py makes: `{"code", "message", "field"?, "errors"?}`. The fuzz test
(tests/fuzz/, docs/fuzzing.md) holds the server to this schema: an answer whose status is not
listed for its operation fails the run.
"""

from __future__ import annotations

import threading

from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response

from api.strict_bodies import close_request_bodies

ERROR = {
    "type": "object",
    "description": "Every API error (docs/api.md, Errors): `field` names the first offending field, "
    "`errors` carries DRF's per-field detail.",
    "properties": {
        "code": {"type": "string", "description": "what went wrong, e.g. `invalid`, `not_found`, `duplicate`"},
        "message": {"type": "string", "description": "says what was wrong, naming the field"},
        "field": {"type": "string", "description": "the first offending field: `events[3].payload_b64`"},
        "errors": {"description": "DRF's full per-field detail (a serializer's errors)"},
    },
    "required": ["code", "message"],
}

WHY = {
    400: "Invalid input: `field` names it (`malformed_json` when the body is not JSON)",
    401: "No or bad credentials",
    403: "Signed in, but not allowed",
    404: "Unknown stream, reader group or other object named in the path or the body",
    409: "A conflict: duplicate name, stale `generation` or `epoch`, lease lost, not compacted, already "
    "running, a retention cycle working on the stream",
    413: "A request body over `CBR_MAX_REQUEST_BYTES` (`body_too_large`, refused before it is read), "
    "or an event over `CBR_MAX_EVENT_BYTES` (`event_too_large`; a large event over `CBR_MAX_LARGE_EVENT_BYTES`)",
    415: "A large event's body is not `application/octet-stream` (`unsupported_media_type`, `field: Content-Type`)",
    416: "A `Range` that asks for no byte of the payload (`range_not_satisfiable`; `Content-Range: bytes */size`)",
    414: "The URL (path and query string) is over `CBR_MAX_URL_BYTES` (8000 bytes by default): "
    "`url_too_long`, `field: url`",
    429: "Too many failed sign-ins, or a publish over the stream's `publish_rate` (`rate_limited`, nothing written; "
    "Retry-After)",
    503: "The database or the task queue could not serve the request; retry (Retry-After)",
    507: "The stream is full under `on_max_limit: reject_publish`, or the data disk is full",
}

# What some operations give beyond the defaults below (operation ids are drf-spectacular's).
EXTRA = {
    "auth_token_create": {401, 429},  # 401: a username and password that do not match
    "streams_create": {409},
    "streams_events_create": {413, 429},  # 429: over the stream's publish_rate
    "streams_events_raw_create": {413, 415, 429},  # 415: a body that is not application/octet-stream
    "streams_events_payload_retrieve": {416},  # a range that starts past the end
    "streams_truncate_create": {409},
    "streams_scale_create": {409},  # a stale `epoch`
    "streams_offload_create": {409},  # no long-term storage
    "streams_compacted_retrieve": {409},
    "streams_compactions_list": {409},
    "streams_compactions_create": {409},
    "reader_groups_create": {409},
    "reader_groups_partial_update": {409},
    "reader_groups_truncation_cut_create": {409},
    "reader_groups_ack_create": {409},
    "reader_groups_nack_create": {409},
    "reader_groups_checkpoints_create": {409},
    "reader_groups_checkpoints_release_create": {409},
    "reader_groups_seek_create": {409},  # a stale generation
}
# Bodies that name other objects (streams of a reader group, the stream of a cycle or a cut).
BODY_NAMES_OBJECTS = {
    "reader_groups_create",
    "reader_groups_partial_update",
    "reader_groups_truncation_cut_create",
    "retention_cycles_create",
    "api_keys_create",
}
# OpenAPI links: what a create answers names the object that the other operations take (clients
# and the fuzzer's stateful phase follow them).
BY_SCOPE_AND_NAME = {"scope": "$response.body#/scope", "name": "$response.body#/name"}
LINKS = {
    ("streams_create", "201"): (
        BY_SCOPE_AND_NAME,
        [
            "streams_retrieve",
            "streams_partial_update",
            "streams_destroy",
            "streams_events_create",
            "streams_events_retrieve",
            "streams_truncate_create",
            "streams_truncations_list",
            "streams_retention_set_list",
            "streams_retention_policy_retrieve",
            "streams_retention_policy_update",
            "streams_compacted_retrieve",
            "streams_compactions_list",
            "streams_compactions_create",
        ],
    ),
    ("reader_groups_create", "201"): (
        BY_SCOPE_AND_NAME,
        [
            "reader_groups_retrieve",
            "reader_groups_partial_update",
            "reader_groups_destroy",
            "reader_groups_read_create",
            "reader_groups_ack_create",
            "reader_groups_nack_create",
            "reader_groups_checkpoints_retrieve",
            "reader_groups_checkpoints_create",
            "reader_groups_truncation_cut_create",
        ],
    ),
    ("reader_groups_checkpoints_create", "201"): (
        {"scope": "$request.path.scope", "name": "$request.path.name", "checkpoint": "$response.body#/name"},
        ["reader_groups_checkpoints_release_create"],
    ),
    ("api_keys_create", "201"): ({"prefix": "$response.body#/prefix"}, ["api_keys_retrieve", "api_keys_destroy"]),
    ("retention_cycles_create", "201"): ({"id": "$response.body#/id"}, ["retention_cycles_retrieve"]),
}
# A read's deliveries are what ack and nack take.
BY_PATH = {"scope": "$request.path.scope", "name": "$request.path.name"}
DELIVERED = {"delivery_ids": ["$response.body#/deliveries/0/delivery_id"]}
BODY_LINKS = {  # operation -> its 200's links that fill a body
    "reader_groups_read_create": [
        ("reader_groups_ack_create", BY_PATH, DELIVERED),
        ("reader_groups_nack_create", BY_PATH, DELIVERED),
    ],
}
# Signing in is open to everyone: it is how a token is had.
OPEN = {"auth_token_create"}
WRITES = {"post", "put", "patch"}


def add_error_responses(result, generator, request, public):
    """SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]: the Error component, the error answers of
    every operation, no security requirement on signing in, the links from creates, and request
    bodies closed to unknown fields (api/strict_bodies.py)."""
    close_request_bodies(result)
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method not in {"get", "put", "post", "patch", "delete"}:
                continue
            op_id = operation.get("operationId", "")
            if op_id in OPEN:
                operation["security"] = []
            responses = operation.setdefault("responses", {})
            for code in sorted(error_statuses(method, operation)):
                answer = {
                    "description": WHY[code],
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                }
                responses.setdefault(str(code), answer)
            add_links(op_id, responses)
    return result


def error_statuses(method: str, operation: dict) -> set[int]:
    op_id = operation.get("operationId", "")
    params = operation.get("parameters", [])
    query = any(p.get("in") == "query" for p in params)
    statuses = {414, 503} | EXTRA.get(op_id, set())  # 414: any URL may be too long
    if op_id not in OPEN:
        statuses |= {401, 403}
        if method in WRITES:
            statuses.add(507)
    if "requestBody" in operation or query:
        statuses.add(400)
    if "requestBody" in operation:
        statuses.add(413)
    if any(p.get("in") == "path" for p in params) or op_id in BODY_NAMES_OBJECTS:
        statuses.add(404)
    return statuses


def add_links(op_id: str, responses: dict) -> None:
    for (source, code), (parameters, targets) in LINKS.items():
        if op_id == source and code in responses:
            responses[code]["links"] = {target: {"operationId": target, "parameters": parameters} for target in targets}
    for target, parameters, body in BODY_LINKS.get(op_id, []):
        responses["200"].setdefault("links", {})[target] = {
            "operationId": target,
            "parameters": parameters,
            "requestBody": body,
        }


_schema: dict | None = None
_schema_lock = threading.Lock()


def openapi_schema() -> dict:
    """The schema, built once per process (cbrweb/wsgi.py builds it before a worker serves): it
    is the same for every caller, and drf-spectacular loads its extensions lazily, so concurrent
    first builds on a fresh worker failed each other (500s)."""
    global _schema
    with _schema_lock:
        if _schema is None:
            _schema = SchemaGenerator().get_schema(request=None, public=True)
    return _schema


class SchemaView(SpectacularAPIView):
    """`/api/v1/schema/`: drf-spectacular's view, answering the schema built once."""

    def _get_schema_response(self, request):
        return Response(
            data=openapi_schema(),
            headers={"Content-Disposition": f'inline; filename="{self._get_filename(request, None)}"'},
        )

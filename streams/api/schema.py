"""The OpenAPI schema tells the whole truth about errors (drf-spectacular postprocessing hook).

Views declare their success answers; every error the API can give is added here, once, in the
shape streams/api/errors.py makes: `{"code", "message", "field"?, "errors"?}`. The fuzz test
(tests/fuzz/, docs/fuzzing.md) holds the server to this schema: an answer whose status is not
listed for its operation fails the run.
"""

from __future__ import annotations

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
    409: "A conflict: duplicate name, stale `generation`, lease lost, not compacted, already running",
    413: "An event over `CBR_MAX_EVENT_BYTES`",
    429: "Too many failed sign-ins (Retry-After)",
    503: "The database or the task queue could not serve the request; retry (Retry-After)",
    507: "The stream is full under `on_max_limit: reject_publish`, or the data disk is full",
}

# What some operations give beyond the defaults below (operation ids are drf-spectacular's).
EXTRA = {
    "auth_token_create": {429},
    "streams_create": {409},
    "streams_events_create": {413},
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
}
# Bodies that name other objects (streams of a reader group, the stream of a cycle or a cut).
BODY_NAMES_OBJECTS = {
    "reader_groups_create", "reader_groups_partial_update", "reader_groups_truncation_cut_create",
    "retention_cycles_create", "api_keys_create",
}
# Signing in is open to everyone: it is how a token is had.
OPEN = {"auth_token_create"}
WRITES = {"post", "put", "patch"}


def add_error_responses(result, generator, request, public):
    """SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]: the Error component, the error answers of
    every operation, and no security requirement on signing in."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if method not in {"get", "put", "post", "patch", "delete"}:
                continue
            op_id = operation.get("operationId", "")
            params = operation.get("parameters", [])
            statuses = {503}
            if op_id in OPEN:
                operation["security"] = []
            else:
                statuses |= {401, 403}
            if "requestBody" in operation or any(p.get("in") == "query" for p in params):
                statuses.add(400)
            if any(p.get("in") == "path" for p in params) or op_id in BODY_NAMES_OBJECTS:
                statuses.add(404)
            if method in WRITES and op_id not in OPEN:
                statuses.add(507)
            statuses |= EXTRA.get(op_id, set())
            responses = operation.setdefault("responses", {})
            for code in sorted(statuses):
                responses.setdefault(str(code), {
                    "description": WHY[code],
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                })
    return result

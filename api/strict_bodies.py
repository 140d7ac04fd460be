"""The schema's request bodies are closed: every object a request body defines says
`additionalProperties: false`, as the server refuses a field it does not know, naming it (a typo
must not be silently ignored, by the server or by a client generated from the schema); and a
body whose fields go together (one of several is needed, or two exclude each other) says so.
tests/api/test_schema_strictness.py holds the server to it, endpoint by endpoint. Called by
api.schema.add_error_responses (drf-spectacular postprocessing); changes only the schema."""

from __future__ import annotations

# Which fields of a body go together, as the server parses it, in the words OpenAPI 3.0 has
# (no if/then: `oneOf`, `anyOf` and `not` over `required`), by request component.
TOGETHER: dict[str, dict] = {
    # the dead letters chosen, or all of them (api.stream_views.RepublishView)
    "RepublishRequest": {"oneOf": [{"required": ["events"]}, {"required": ["all"]}]},
    # exactly one target (domain.start_positions.parse_seek); `generation` beside it
    "SeekRequestRequest": {
        "oneOf": [{"required": ["position"]}, {"required": ["time"]}, {"required": ["stream_cuts"]}],
    },
    # `stream` and `stream_cut`, or `stream_cuts` alone (groups.reader_groups)
    "TruncationCutRequest": {
        "oneOf": [
            {"required": ["stream", "stream_cut"], "not": {"required": ["stream_cuts"]}},
            {"required": ["stream_cuts"], "not": {"anyOf": [{"required": ["stream"]}, {"required": ["stream_cut"]}]}},
        ],
    },
    # payload or payload_b64 (a string: null is a field left out), and deliver_at or delay_ms or
    # neither (domain.events)
    "EventInRequest": {
        "oneOf": [
            {"required": ["payload"], "properties": {"payload": {"type": "string"}}},
            {"required": ["payload_b64"], "properties": {"payload_b64": {"type": "string"}}},
        ],
        "not": {
            "required": ["deliver_at", "delay_ms"],
            "properties": {"deliver_at": {"not": {"enum": [None]}}, "delay_ms": {"not": {"enum": [None]}}},
        },
    },
    # a publish key names streams, a reader_group key its group (access.rules)
    "ApiKeyCreateRequest": {
        "oneOf": [
            {
                "properties": {"kind": {"enum": ["publish"]}},
                "required": ["streams"],
                "not": {"required": ["reader_group"]},
            },
            {
                "properties": {"kind": {"enum": ["reader_group"]}},
                "required": ["reader_group"],
                "not": {"required": ["streams"]},
            },
        ],
    },
    # min and max only with a time or size limit (domain.policy_spec)
    "RetentionPolicyInRequest": {
        "anyOf": [
            {"properties": {"limit_type": {"enum": ["time", "size"]}}},
            {
                "properties": {
                    "limit_type": {"enum": ["none"]},
                    "min": {"enum": [0]},
                    "max": {"enum": [None], "nullable": True},
                }
            },
        ],
    },
}


def close_request_bodies(result: dict) -> None:
    # drf-spectacular names every request-side component "<Name>Request" (COMPONENT_SPLIT_REQUEST),
    # nested ones too (DelayedIndexRequest); maps such as `headers` have no properties, so stay open
    schemas = result.get("components", {}).get("schemas", {})
    for name, schema in schemas.items():
        if name.endswith("Request") and schema.get("type") == "object" and "properties" in schema:
            schema.setdefault("additionalProperties", False)
    for name, keywords in TOGETHER.items():
        schemas[name].update(keywords)

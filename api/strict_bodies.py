"""The schema's request bodies are closed: every object a request body defines says
`additionalProperties: false`, as the server refuses a field it does not know, naming it (a typo
must not be silently ignored, by the server or by a client generated from the schema).
tests/api/test_schema_strictness.py holds the server to it, endpoint by endpoint. Called by
api.schema.add_error_responses (drf-spectacular postprocessing); changes only the schema."""

from __future__ import annotations


def close_request_bodies(result: dict) -> None:
    # drf-spectacular names every request-side component "<Name>Request" (COMPONENT_SPLIT_REQUEST),
    # nested ones too (DelayedIndexRequest); maps such as `headers` have no properties, so stay open
    for name, schema in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") and schema.get("type") == "object" and "properties" in schema:
            schema.setdefault("additionalProperties", False)

"""JSON in and out with orjson: the publish path parses and answers thousands of events per
request, where the standard library's json is several times slower."""

from __future__ import annotations

import orjson
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer


class ORJSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return orjson.loads(stream.read())
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"malformed JSON: {exc}") from None


class ORJSONRenderer(BaseRenderer):
    media_type = "application/json"
    format = "json"
    charset = None

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        # DRF keys a list's item errors by index (`{"sinks": {1: [...]}}`): integer keys are allowed
        return orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS)

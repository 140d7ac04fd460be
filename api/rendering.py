"""JSON in and out with orjson: the publish path parses and answers thousands of events per
request, where the standard library's json is several times slower."""

from __future__ import annotations

import orjson
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer

from streams.wire import READ_BATCH_MEDIA_TYPE, encode_read_batch


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


class ManyReadsRenderer(ORJSONRenderer):
    """What a client of many reads asks for (`Accept: application/x-ndjson`): their answer's
    lines are written by `api.parking.ManyReads`; anything else (an error) is JSON."""

    media_type = "application/x-ndjson"
    format = "ndjson"


class ReadBatch:
    """A read's answer for `ReadBatchRenderer`: the JSON answer's fields but its deliveries, and
    the parts that hold them."""

    def __init__(self, head: dict, parts: list, lease_expires_at: str | None):
        self.head, self.parts, self.lease_expires_at = head, parts, lease_expires_at


class ReadBatchRenderer(BaseRenderer):
    """A read's answer in the binary form of `streams.wire.encode_read_batch`, for a client that
    asks for it by `Accept`. Only a read's own answer renders with it: its errors and
    OPTIONS stay JSON (`ReadView.finalize_response`)."""

    media_type = READ_BATCH_MEDIA_TYPE
    format = "cbr-batch"
    charset = None

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if not isinstance(data, ReadBatch):
            raise TypeError("only a read's answer renders as a read batch")
        return encode_read_batch(data.head, data.parts, data.lease_expires_at)

"""The one error type that domain validation raises: it names the field that was wrong and says
what kind of wrong it is (`code`), never how a protocol shows it.

The API turns it into a JSON error with the same field and code, and the HTTP status of that code
(`api.errors.STATUS_OF_CODE`); the console shows its message beside the field.
"""

from __future__ import annotations


class FieldError(ValueError):
    def __init__(
        self,
        field: str,
        message: str,
        code: str = "invalid",
        details: dict | None = None,
    ):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.code = code
        self.details = details or {}  # more of the answer, e.g. what was applied before a refusal


def stream_full() -> FieldError:
    """The stream is at its max under `on_max_limit: reject_publish` and its slowest subscriber
    still needs the data, until a cycle finds it no longer so."""
    return FieldError(
        "stream",
        "the stream is at its max limit and its slowest subscriber still needs the data "
        "(on_max_limit: reject_publish); publishing resumes once subscribers move on",
        "stream_full",
    )


def insufficient_storage() -> FieldError:
    """The segment store's disk is full."""
    return FieldError(
        "events",
        "the segment store's disk is full (no space left in CBR_DATA_DIR); nothing of this "
        "batch was written to the segment that did not fit; publishing resumes once space is "
        "freed (retention, a bigger disk)",
        "insufficient_storage",
    )


def no_space_for_stream() -> FieldError:
    """The disk is too full for a new stream's segments; the stream was not created."""
    return FieldError(
        "segment_count",
        "the segment store's disk is full (no space left in CBR_DATA_DIR) for the stream's "
        "segments; the stream was not created: create it again once space is freed "
        "(retention, a bigger disk)",
        "insufficient_storage",
    )

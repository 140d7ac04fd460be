"""A stream's delayed index (in Redis, named by the stream's storage key) and its settings."""

from __future__ import annotations

from domain.delayed import DelayedConfig
from store.redis_connection import get_redis
from streams.delaying.index import DelayIndex
from streams.models import Stream

DEFAULTS = {
    "min_index_count_per_bucket": 50_000,
    "max_time_step_per_segment_s": 300,
    "max_indexes_per_segment": 5_000,
    "max_num_buckets": None,
}


def config_of(stream: Stream) -> DelayedConfig:
    """The stream's delayed-index settings (docs/delayed.md "Settings")."""
    values = {**DEFAULTS, **(stream.delayed_index or {})}
    return DelayedConfig(
        min_index_count_per_bucket=int(values["min_index_count_per_bucket"]),
        max_time_step_per_segment=int(values["max_time_step_per_segment_s"]) * 1000,
        max_indexes_per_segment=int(values["max_indexes_per_segment"]),
        max_num_buckets=None if values["max_num_buckets"] is None else int(values["max_num_buckets"]),
    )


def index_of(stream: Stream) -> DelayIndex:
    return DelayIndex(get_redis(), stream.storage_key)

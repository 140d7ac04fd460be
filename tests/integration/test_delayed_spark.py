"""Spark and in-process sealing cut a bucket into the same snapshot segments."""

import random

import pytest

from domain.delayed import BucketIndex, DelayedConfig, Index, cut_segments
from spark_tasks.delayed_job import cut_frame
from store.delayed_snapshots import bucket_table
from streams import services
from streams.delaying import buckets

pytestmark = pytest.mark.integration


def test_spark_and_in_process_sealing_produce_identical_snapshots(spark):
    rng = random.Random(3)
    indexes = [
        Index(rng.randrange(0, 50_000), chunk, rng.randrange(4), offset)
        for chunk in range(1, 40)
        for offset in range(chunk * 100, chunk * 100 + rng.randrange(20, 80))
    ]
    index = BucketIndex(
        DelayedConfig(min_index_count_per_bucket=10**9, max_time_step_per_segment=700, max_indexes_per_segment=50)
    )
    for ix in indexes:
        index.add(ix, now=-1)
    local = bucket_table(index.seal()).to_pylist()
    shuffled = indexes[:]
    rng.shuffle(shuffled)
    frame = spark.createDataFrame(
        [tuple(ix) for ix in shuffled], "deliver_at bigint, chunk bigint, segment int, offset bigint"
    )
    remote = [row.asDict() for row in cut_frame(frame.repartition(4), 700, 50).collect()]
    assert remote == local
    assert max(r["segment_no"] for r in local) > 10  # a real cut, many segments


@pytest.mark.django_db
def test_a_large_bucket_is_sealed_by_the_spark_job_into_the_same_segments(spark, settings):
    settings.CBR_DELAYED_SPARK_MIN_INDEXES = 100  # "large" from 100 indexes up
    stream = services.do_create_stream(
        scope="it", name="big", delayed_index={"max_time_step_per_segment_s": 2, "max_indexes_per_segment": 40}
    )
    rng = random.Random(5)
    indexes = [Index(rng.randrange(0, 60_000), 7, rng.randrange(2), o) for o in range(3000)]
    on_spark = buckets.cut(stream, indexes)
    in_process = cut_segments(sorted(indexes), 2000, 40)
    assert [s.indexes for s in on_spark] == [s.indexes for s in in_process]
    assert len(on_spark) > 30

"""Reading and writing Parquet through long-term storage in Spark's executors, for a cluster
whose executors do not see the data directory (`CBR_SPARK_SHARED_STORE=false`): a DataFrame
whose rows are read from objects of the tier (one Spark task per object, each checked against
its recorded CRC-32C), and a DataFrame's partitions written as objects of the tier (one Parquet
object per partition, under a prefix the caller removes once it has taken them).

Python functions in the executors (`mapInArrow`) do the reading and writing through CBR's own
tier client (`store.tier`): Spark itself needs no object-store connector, and a `file://` tier
and an `s3://` one go the same way. The executors need the tier's URL (sent with the job) and,
for S3, the `AWS_*` variables in their environment."""

from __future__ import annotations

import io
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from spark_tasks.compaction_job import as_view_rows
from store.parquet import SCHEMA as CHUNK_COPY_SCHEMA
from store.tier.opening import tier_for

WRITTEN = "key string, size long, crc32c string, rows long"
_WRITTEN_ARROW = pa.schema([("key", pa.string()), ("size", pa.int64()), ("crc32c", pa.string()), ("rows", pa.int64())])


def read_objects(spark: SparkSession, tier_url: str, objects: list[tuple[str, str]], schema: StructType) -> DataFrame:
    """The rows of these Parquet objects (key, CRC-32C), in `schema` (their columns cast to it:
    the chunks' copies hold millisecond times, Spark's are microseconds)."""
    target = to_arrow_schema(schema, timezone="UTC")

    def read(batches):  # in an executor
        tier = tier_for(tier_url)
        assert tier is not None
        for batch in batches:
            for key, crc in zip(batch.column("key").to_pylist(), batch.column("crc32c").to_pylist()):
                table = pq.read_table(io.BytesIO(tier.get(key, crc)))
                yield from table.select(target.names).cast(target).to_batches()

    listed = spark.createDataFrame(objects, "key string, crc32c string")
    return listed.repartition(max(1, len(objects))).mapInArrow(read, schema)


def write_objects(frame: DataFrame, tier_url: str, prefix: str) -> list[dict]:
    """Each non-empty partition of `frame` written as one Parquet object under `prefix` (zstd, in
    the partition's order); what was written, in the partitions' order: key, size, CRC-32C and
    rows. A retried task writes under a name of its own: only the answers say which objects are
    the frame's (the caller removes the prefix once it has taken them)."""
    schema = to_arrow_schema(frame.schema, timezone="UTC")

    def write(batches):  # in an executor
        buffer = io.BytesIO()
        rows = 0
        with pq.ParquetWriter(buffer, schema, compression="zstd") as writer:
            for batch in batches:
                if batch.num_rows:
                    writer.write_batch(batch)
                    rows += batch.num_rows
        if not rows:
            return
        partition = TaskContext.get().partitionId()
        tier = tier_for(tier_url)
        assert tier is not None
        stored = tier.put(f"{prefix}/part-{partition:05d}-{uuid.uuid4().hex[:8]}.parquet", buffer.getvalue())
        yield pa.RecordBatch.from_pylist(
            [{"key": stored.key, "size": stored.size, "crc32c": stored.crc32c, "rows": rows}],
            schema=_WRITTEN_ARROW,
        )

    written = [row.asDict() for row in frame.mapInArrow(write, WRITTEN).collect()]
    return sorted(written, key=lambda w: w["key"])


def chunk_copies_frame(spark: SparkSession, tier_url: str, objects: list[tuple[str, str]]) -> DataFrame:
    """The events of these chunks' columnar copies in the tier, as `spark.read.parquet` of the
    copies' files gives them."""
    return read_objects(spark, tier_url, objects, from_arrow_schema(CHUNK_COPY_SCHEMA))


def view_frame(spark: SparkSession, tier_url: str, objects: list[tuple[str, str]]) -> DataFrame:
    """The rows of a compacted view's generation from its files' copies in the tier."""
    no_events = spark.createDataFrame([], from_arrow_schema(CHUNK_COPY_SCHEMA))
    return read_objects(spark, tier_url, objects, as_view_rows(no_events).schema)


def empty_parquet(frame: DataFrame) -> bytes:
    """A Parquet file of no row in `frame`'s schema (a generation that holds no key still has one
    file, which tells its readers its columns)."""
    buffer = io.BytesIO()
    pq.write_table(to_arrow_schema(frame.schema, timezone="UTC").empty_table(), buffer, compression="zstd")
    return buffer.getvalue()

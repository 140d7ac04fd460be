"""Sealing a large delayed-delivery bucket with Spark: sort its indexes by position order, cut
them into snapshot segments with the one cutter (`domain.delayed.SegmentCutter`), and
write the rows `store.delayed_snapshots` reads. The cut is sequential by nature (each
segment opens where the last closed), so it runs over one sorted partition; the sort, the part
that grows with the bucket, runs on the cluster."""

from __future__ import annotations

from domain.delayed import Index, SegmentCutter, SnapshotSegment
from spark_tasks.session import get_spark
from store.delayed_snapshots import SCHEMA

ORDER = ["deliver_at", "chunk", "segment", "offset"]


def cut_frame(frame, window: int, max_per_segment: int):
    """Indexes (`deliver_at`, `chunk`, `segment`, `offset`) → the snapshot's rows, with
    `segment_no`, in position order."""

    def cut(batches):
        cutter = SegmentCutter(window, max_per_segment)
        for pdf in batches:
            pdf = pdf.assign(segment_no=[cutter.place(int(t)) for t in pdf["deliver_at"]])
            yield pdf[SCHEMA.names]

    ddl = ", ".join(f"{name} {'int' if SCHEMA.field(name).type.bit_width == 32 else 'bigint'}" for name in SCHEMA.names)
    single = frame.select(*ORDER).coalesce(1).sortWithinPartitions(*ORDER)
    return single.mapInPandas(cut, schema=ddl)


def cut_indexes(indexes, window: int, max_per_segment: int):
    """A bucket's indexes → its snapshot segments, cut on Spark (the session of
    `spark_tasks.session`)."""
    spark = get_spark()
    frame = spark.createDataFrame(
        [tuple(ix) for ix in indexes], "deliver_at bigint, chunk bigint, segment int, offset bigint"
    )
    groups: list[list] = []
    for row in cut_frame(frame, window, max_per_segment).toLocalIterator():
        if row.segment_no == len(groups):
            groups.append([])
        groups[-1].append(Index(row.deliver_at, row.chunk, row.segment, row.offset))
    return [SnapshotSegment(g) for g in groups]

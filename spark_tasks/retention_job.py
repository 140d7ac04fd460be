"""The retention decision as a Spark job: extract (inputs → Parquet), transform (group by stream,
apply `domain.retention.decide` through `spark_tasks.retention_inputs.decide_row`), load (collect the
decisions for the worker to apply). The rule is the local engine's, to the letter: only the
transport differs. Never touches the database or the store."""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from domain.retention import Decision, Inputs
from spark_tasks.retention_inputs import DECISION_COLUMNS, INPUT_COLUMNS, decide_row, decode_decision, encode_inputs
from spark_tasks.session import get_spark

ROOT = Path(__file__).resolve().parent.parent
# The pure modules the executors need: shipped with the job, so a cluster needs no install of CBR.
SHIPPED = (
    "retention/__init__.py",
    "domain/cuts.py",
    "domain/retention_set.py",
    "domain/retention.py",
    "spark_tasks/retention_inputs.py",
)

INPUT_SCHEMA = pa.schema(
    [
        ("stream_id", pa.int64()),
        ("now", pa.float64()),
        ("policy", pa.string()),
        ("retention_set", pa.string()),
        ("subscribers", pa.string()),
    ]
)
DECISION_SCHEMA = (
    "stream_id long, cut string, rule string, slb string, active string, at_max boolean, considered string"
)

_shipped_to: set[int] = set()


def ship_code(spark) -> None:
    """Add the pure retention modules to the session once, as a zip the executors import."""
    if id(spark) in _shipped_to:
        return
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for rel in SHIPPED:
            zf.write(ROOT / rel, rel)
    path = Path(tempfile.mkdtemp(prefix="cbr-spark-")) / "cbr_retention.zip"
    path.write_bytes(buf.getvalue())
    spark.sparkContext.addPyFile(str(path))
    _shipped_to.add(id(spark))


def decide_frame(frame):
    """DataFrame of inputs (INPUT_COLUMNS, one row per stream) → DataFrame of decisions.

    Grouping by stream: extraction makes one row per stream, so each row is one stream's whole
    group and no shuffle is needed: `mapInPandas` decides a batch of streams per call (where
    `groupBy().applyInPandas` would pay a pandas call per stream), and the input's several files
    give Spark its partitions."""
    return frame.mapInPandas(decide_batches, schema=DECISION_SCHEMA)


class InputsWriter:
    """Writes stream inputs to a directory of Parquet files, batch by batch, spread over as many
    files as Spark has cores so that the job reads them in parallel without a shuffle."""

    def __init__(self, files: int | None = None, directory: Path | None = None, prefix: str = "part"):
        """`directory`: write there (it is the caller's), with file names starting `prefix`
        (several writers, in several processes, can fill one directory)."""
        self.prefix = prefix
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if directory:
            self.path = Path(directory)
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="cbr-retention-")
            self.path = Path(self._tmp.name)
        self.files = files or _default_files()
        self._writers: list[pq.ParquetWriter] = []
        self.rows = 0
        self._batches = 0

    def __enter__(self) -> InputsWriter:
        return self

    def write(self, items: list[tuple[int, Inputs]]) -> None:
        if not items:
            return
        k = self._batches % self.files  # batches go round the files
        self._batches += 1
        while len(self._writers) <= k:
            name = self.path / f"{self.prefix}-{len(self._writers):03d}.parquet"
            self._writers.append(pq.ParquetWriter(name, INPUT_SCHEMA))
        rows = [encode_inputs(sid, inputs) for sid, inputs in items]
        self._writers[k].write_table(pa.Table.from_pylist(rows, schema=INPUT_SCHEMA))
        self.rows += len(items)

    def close(self) -> None:
        for w in self._writers:
            w.close()
        self._writers = []

    def __exit__(self, *exc) -> None:
        self.close()
        if self._tmp is not None:
            self._tmp.cleanup()


def _default_files() -> int:
    try:
        return max(1, get_spark().sparkContext.defaultParallelism)
    except Exception:  # no session can start here: one file
        return 1


def decide_file(path: Path, spark=None) -> dict[int, tuple[Decision, list]]:
    """Decide every stream of an inputs directory; per stream id, the decision and the
    subscribers it weighed."""
    spark = spark or get_spark()
    ship_code(spark)
    frame = spark.read.parquet(str(path))
    decided = decide_frame(frame).toPandas()
    columns = list(decided.columns)
    return {
        int(values[0]): decode_decision(dict(zip(columns, values)))
        for values in zip(*(decided[c].tolist() for c in columns))
    }


def decide_all(inputs: dict[int, Inputs], spark=None) -> dict[int, tuple[Decision, list]]:
    """Decide for many streams at once on Spark."""
    if not inputs:
        return {}
    with InputsWriter() as writer:
        items = list(inputs.items())
        for start in range(0, len(items), 1000):
            writer.write(items[start : start + 1000])
        writer.close()
        return decide_file(writer.path, spark)


def decide_batches(batches):
    """The Spark job's `mapInPandas` function: decide each batch of stream rows. It lives here, in
    a module shipped to the executors, so they need nothing of CBR but the pure rules. Columns
    are walked as lists (a dict per row from pandas costs as much as the decision)."""
    for pdf in batches:
        columns = [pdf[c].tolist() for c in INPUT_COLUMNS]
        out = [decide_row(dict(zip(INPUT_COLUMNS, values))) for values in zip(*columns)]
        yield pd.DataFrame(out, columns=list(DECISION_COLUMNS))

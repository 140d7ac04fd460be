"""The retention decision as a Spark job: extract (inputs → Parquet), transform (group by stream,
apply `retention.policy.decide` through `retention.inputs_codec.decide_row`), load (collect the
decisions for the worker to apply). The rule is the local engine's, to the letter: only the
transport differs. Never touches the database or the store."""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from retention.inputs_codec import decide_batches, decode_decision, encode_inputs
from retention.policy import Decision, Inputs

from .session import get_spark

ROOT = Path(__file__).resolve().parent.parent
# The pure modules the executors need: shipped with the job, so a cluster needs no install of CBR.
SHIPPED = ("retention/__init__.py", "retention/cuts.py", "retention/retention_set.py",
           "retention/policy.py", "retention/inputs_codec.py")

INPUT_SCHEMA = pa.schema([
    ("stream_id", pa.int64()), ("now", pa.float64()), ("policy", pa.string()),
    ("retention_set", pa.string()), ("subscribers", pa.string()),
])
DECISION_SCHEMA = (
    "stream_id long, cut string, rule string, slb string, active string, at_max boolean"
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

    Grouping by stream: the frame is partitioned by `stream_id`, and since extraction makes one
    row per stream, each row is one stream's whole group. `mapInPandas` then decides a batch of
    streams per call, where `groupBy().applyInPandas` would pay a pandas call per stream."""
    return frame.repartition("stream_id").mapInPandas(decide_batches, schema=DECISION_SCHEMA)


def extract(inputs: dict[int, Inputs], directory: Path) -> Path:
    rows = [encode_inputs(sid, inp) for sid, inp in inputs.items()]
    table = pa.Table.from_pylist(rows, schema=INPUT_SCHEMA)
    path = directory / "inputs.parquet"
    pq.write_table(table, path)
    return path


def decide_all(inputs: dict[int, Inputs], spark=None) -> dict[int, Decision]:
    """Decide for many streams at once on Spark."""
    if not inputs:
        return {}
    spark = spark or get_spark()
    ship_code(spark)
    with tempfile.TemporaryDirectory(prefix="cbr-retention-") as d:
        path = extract(inputs, Path(d))
        frame = spark.read.parquet(str(path))
        decided = decide_frame(frame).toPandas()
    return {int(r["stream_id"]): decode_decision(r) for r in decided.to_dict("records")}

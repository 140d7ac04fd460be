"""The Spark engine on a real standalone cluster: a master and one worker of 2 cores started from
the pyspark package (`cbrweb.spark_cluster`), the worker's executors starting in a directory
outside the repository with nothing of CBR installed: the code reaches them from the driver. A
retention cycle run by a separate driver process does exactly what the in-process engine does to
an identical fleet."""

import json
import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import factories
import psutil
import pytest
import redis as redis_lib
from cycle_fleets import T0, fleet, outcome_rows, state
from django.conf import settings
from django.db import connection

from cbrweb.spark_cluster import Cluster, start, stop
from compaction.models import CompactionRun
from compaction.runs import execute
from integration.conftest import _database_url
from retention.cycle.running import run_cycle
from retention.models import TruncationRecord
from streams.models import TierObject

ROOT = Path(__file__).resolve().parents[2]

DRIVER = """
import json, sys
from datetime import datetime
import django
django.setup()
from retention.cycle import buckets, gathering
from compaction.models import CompactionRun
from compaction.runs import execute
from retention.cycle.running import run_cycle
from streams.models import Stream
buckets.BUCKET, gathering.BATCH = int(sys.argv[2]), int(sys.argv[3])
streams = list(Stream.objects.filter(scope__name="two").order_by("id"))  # the fleet's order
outcomes = run_cycle(now=datetime.fromisoformat(sys.argv[1]), streams=streams, trigger="command", engine="spark")
print(json.dumps([[o.stream.split("/")[1], o.rule, o.truncation.after_cut if o.truncation else None] for o in outcomes]))
"""


COMPACTOR = """
import sys
from datetime import datetime
import django
django.setup()
from compaction.models import CompactionRun
from compaction.runs import execute
from streams.models import Stream
stream = Stream.objects.get(scope__name="shop", name=sys.argv[2])
run = execute(CompactionRun.objects.create(stream=stream, trigger="command"), now=datetime.fromisoformat(sys.argv[1]), seal=True)
print(run.state, run.generation)
"""


def driver(
    cluster: Cluster, bucket: int = 2000, batch: int = 500, script: str = DRIVER, args=(), env=None
) -> subprocess.Popen:
    """A separate driver process on the cluster: by default the Spark engine's cycle over scope
    "two", which prints the outcomes as JSON. `env`: more of the driver's environment."""
    env = {
        **(env or {}),
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "cbrweb.settings_test",
        "DATABASE_URL": _database_url(connection.settings_dict),
        "REDIS_URL": settings.REDIS_URL,
        "CBR_DATA_DIR": str(settings.CBR_DATA_DIR),
        "DJANGO_SECRET_KEY": "cluster-test",
        "SPARK_MASTER": cluster.master,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    return subprocess.Popen(
        [sys.executable, "-c", script, *(args or (T0.isoformat(), str(bucket), str(batch)))],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def rows(stdout: str) -> list[tuple]:
    return [tuple(row) for row in json.loads(stdout.strip().splitlines()[-1])]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("spark-cluster")
    made = Cluster(base / "state", base / "work", _free_port(), _free_port(), _free_port())
    start(made, cores=2, memory="1g")
    try:
        yield made
    finally:
        stop(made)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_cycle_on_a_standalone_cluster_does_what_the_local_engine_does(cluster):
    one, two = fleet("one"), fleet("two")
    expected = outcome_rows(run_cycle(now=T0, streams=one, trigger="command", engine="local"))
    run = driver(cluster)
    stdout, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr[-3000:]
    assert rows(stdout) == [tuple(row) for row in expected]
    assert any(cut is not None for _, _, cut in expected)  # the fleet had truncations to make
    assert state(two) == state(one)
    assert TruncationRecord.objects.filter(stream__in=two, completed=False).count() == 0
    # the buckets ran in the cluster's executor, started in its work directory outside the repo
    logs = list(cluster.work.glob("app-*/*/stderr"))
    assert logs and ROOT not in cluster.work.parents


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_cycle_on_a_cluster_without_a_shared_store_never_opens_the_executors_data_dir(cluster, tmp_path):
    """`CBR_SPARK_SHARED_STORE=false`: the executors' own data directory (another, empty one, as
    on a host that does not share the driver's) stays empty; the driver reads the ends and
    applies what the executors planned; the end is the local engine's."""
    one, two = fleet("one", sized=True), fleet("two", sized=True)
    expected = outcome_rows(run_cycle(now=T0, streams=one, trigger="command", engine="local"))
    conf, theirs = tmp_path / "spark-conf", tmp_path / "executor-data"
    conf.mkdir()
    theirs.mkdir()
    (conf / "spark-defaults.conf").write_text(f"spark.executorEnv.CBR_DATA_DIR {theirs}\n")
    run = driver(cluster, bucket=2, batch=1, env={"CBR_SPARK_SHARED_STORE": "false", "SPARK_CONF_DIR": str(conf)})
    stdout, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr[-3000:]
    assert rows(stdout) == [tuple(row) for row in expected]
    assert any(cut is not None for _, _, cut in expected)
    assert state(two) == state(one)
    assert TruncationRecord.objects.filter(stream__in=two, completed=False).count() == 0
    assert list(theirs.iterdir()) == []


def _executors(cluster: Cluster) -> list[psutil.Process]:
    """The executor JVMs of this cluster's worker (they start in its work directory)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        cmdline, cwd = proc.info["cmdline"] or [], proc.info["cwd"] or ""
        if any("CoarseGrainedExecutorBackend" in part for part in cmdline) and cwd.startswith(str(cluster.work)):
            found.append(proc)
    return found


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_an_executor_killed_mid_cycle_is_replaced_and_its_buckets_finished_once(cluster, redis_url):
    """kill -9 of the executor (its JVM and, with it, its Python workers) once the cycle has
    truncated some streams: Spark starts another executor and runs the lost buckets again; each
    retry takes over its first attempt's locks and completes what it recorded. The end is what
    the local engine makes of the same fleet: no stream truncated twice, no lock left behind."""
    one, two = fleet("one", count=40), fleet("two", count=40)
    expected = outcome_rows(run_cycle(now=T0, streams=one, trigger="command", engine="local"))
    truncated = {name for name, _, cut in expected if cut is not None}
    run = driver(cluster, bucket=1, batch=1)
    killed = []
    deadline = time.monotonic() + 300
    while run.poll() is None and time.monotonic() < deadline and not killed:
        if TruncationRecord.objects.filter(stream__in=two).count() >= 3:
            for proc in _executors(cluster):
                proc.kill()
                killed.append(proc.pid)
        time.sleep(0.05)
    stdout, stderr = run.communicate(timeout=600)
    assert killed, "the cycle ended before the executor could be killed"
    assert run.returncode == 0, stderr[-3000:]
    assert rows(stdout) == [tuple(row) for row in expected]
    assert state(two) == state(one)
    records = TruncationRecord.objects.filter(stream__in=two)
    assert records.filter(completed=False).count() == 0
    assert sorted(r.stream.name for r in records) == sorted(truncated)  # once each
    assert not list(redis_lib.Redis.from_url(redis_url).scan_iter("cbr:retention:*"))
    newest = max(cluster.work.glob("app-*"), key=lambda app: app.stat().st_mtime)
    assert len(list(newest.glob("*/stderr"))) >= 2  # a second executor took over


COUNTS = ("events_in", "events_out", "keys", "tombstones_dropped", "generation", "bytes_before", "bytes_after")


def compacted_here(api):
    """The same events in two compacted streams, "here" and "there"; "here" compacted by this
    process's local session. The streams, the run's time and its run."""
    events = [("A", "1"), ("B", "1"), ("A", "2"), ("C", "1"), ("B", None), ("D", "4")]
    streams = {}
    for name in ("here", "there"):
        streams[name] = factories.create_stream_over_api(api, name, cleanup_policy="compact", delete_retention_s=100)
        factories.publish_over_api(api, [{"key": k, "payload": v or ""} for k, v in events], stream=f"shop/{name}")
    at = datetime.now(UTC) + timedelta(seconds=10)
    here = execute(CompactionRun.objects.create(stream=streams["here"], trigger="command"), now=at, seal=True)
    return streams, at, here


def view(api, name: str) -> list[tuple]:
    page = api.get(f"/api/v1/streams/shop/{name}/compacted/").json()
    return [(e["key"], e["payload"], e["tombstone"], e["segment"], e["offset"]) for e in page["events"]]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_compaction_on_a_standalone_cluster_makes_the_view_a_local_one_makes(cluster, api, spark):
    """The same events in two compacted streams: one compacted by this process's local session,
    the other by a driver on the cluster, whose executors read the chunks' Parquet copies."""
    streams, at, here = compacted_here(api)
    run = driver(cluster, script=COMPACTOR, args=(at.isoformat(), "there"))
    stdout, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr[-3000:]
    assert stdout.split()[-2:] == ["succeeded", "1"]
    there = CompactionRun.objects.get(stream=streams["there"], state="succeeded")
    assert [getattr(there, f) for f in COUNTS] == [getattr(here, f) for f in COUNTS]
    assert here.events_out == 4  # A=2, B tombstone, C=1, D=4

    assert view(api, "there") == view(api, "here") and len(view(api, "here")) == 4


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_compaction_on_a_cluster_without_a_shared_store_goes_through_an_s3_tier(
    cluster, api, spark, tmp_path, s3_server
):
    """`CBR_SPARK_SHARED_STORE=false` with an S3 tier (moto's server): the executors, whose own
    data directory is another, empty one, read the chunks and write the view through the tier;
    the view and the counts are those of a run over the shared store, and the executors' data
    directory stays empty."""
    streams, at, here = compacted_here(api)
    conf, theirs = tmp_path / "spark-conf", tmp_path / "executor-data"
    conf.mkdir()
    theirs.mkdir()
    lines = [f"spark.executorEnv.CBR_DATA_DIR {theirs}"]
    lines += [f"spark.executorEnv.{name} {value}" for name, value in s3_server.env.items()]
    (conf / "spark-defaults.conf").write_text("\n".join(lines) + "\n")
    tier_url = f"s3://{s3_server.new_bucket()}/cbr"
    env = {**s3_server.env, "CBR_SPARK_SHARED_STORE": "false", "CBR_TIER_URL": tier_url, "SPARK_CONF_DIR": str(conf)}
    run = driver(cluster, script=COMPACTOR, args=(at.isoformat(), "there"), env=env)
    stdout, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr[-3000:]
    assert stdout.split()[-2:] == ["succeeded", "1"]
    there = CompactionRun.objects.get(stream=streams["there"], state="succeeded")
    assert [getattr(there, f) for f in COUNTS] == [getattr(here, f) for f in COUNTS]

    assert view(api, "there") == view(api, "here") and len(view(api, "here")) == 4
    assert list(theirs.iterdir()) == []
    assert TierObject.objects.filter(stream=streams["there"], kind="parquet").count() >= 1  # made in the tier

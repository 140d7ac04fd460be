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
from pathlib import Path

import pytest
from cycle_fleets import T0, fleet, outcome_rows, state
from django.conf import settings
from django.db import connection

from cbrweb.spark_cluster import Cluster, start, stop
from integration.conftest import _database_url
from retention.cycle.running import run_cycle
from retention.models import TruncationRecord

ROOT = Path(__file__).resolve().parents[2]

DRIVER = """
import json, sys
from datetime import datetime
import django
django.setup()
from retention.cycle.running import run_cycle
from streams.models import Stream
streams = list(Stream.objects.filter(scope__name="two").order_by("name"))
outcomes = run_cycle(now=datetime.fromisoformat(sys.argv[1]), streams=streams, trigger="command", engine="spark")
print(json.dumps([[o.stream.split("/")[1], o.rule, o.truncation.after_cut if o.truncation else None] for o in outcomes]))
"""


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
    env = {
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
    run = subprocess.run(
        [sys.executable, "-c", DRIVER, T0.isoformat()], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got = [tuple(row) for row in json.loads(run.stdout.strip().splitlines()[-1])]
    assert got == [tuple(row) for row in expected]
    assert any(cut is not None for _, _, cut in expected)  # the fleet had truncations to make
    assert state(two) == state(one)
    assert TruncationRecord.objects.filter(stream__in=two, completed=False).count() == 0
    # the buckets ran in the cluster's executor, started in its work directory outside the repo
    logs = list(cluster.work.glob("app-*/*/stderr"))
    assert logs and ROOT not in cluster.work.parents

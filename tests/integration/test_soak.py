"""A one-minute soak (bench/soak.py) in CI: the whole stack — gunicorn, a Celery worker and beat,
PostgreSQL, Redis — under mixed load (20 streams, 10 groups acking out of order, nacks, poison,
delayed events, compaction, retention every 10 s), then every invariant of tests/faults on what
is on disk and in the database. The ten-minute run's figures are in bench/RESULTS.md; this keeps
the script, and the promises it checks, from going stale."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from integration.conftest import ROOT

pytestmark = pytest.mark.integration


def test_a_short_soak_keeps_every_invariant_and_answers_no_error(redis_url):
    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith("postgres"):
        pytest.skip("the soak runs on PostgreSQL: set DATABASE_URL=postgres://… (CI does)")
    # names of its own, after the run's database (two runs on other databases do not meet), and a
    # Redis database no other test or bench/soak.py default uses (the soak empties it)
    base, name = database_url.split("?")[0].rsplit("/", 1)
    own_database = f"{base}/{name}_soak"
    own_redis = redis_url.rsplit("/", 1)[0] + "/11"
    proc = subprocess.run(
        [
            sys.executable,
            "bench/soak.py",
            "--minutes",
            "1",
            "--rate",
            "400",
            "--database-url",
            own_database,
            "--redis-url",
            own_redis,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = proc.stdout[-6000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, report
    assert "invariants: all hold" in proc.stdout, report
    assert "errors: 0 " in proc.stdout, report
    assert "compaction: 0 runs" not in proc.stdout, report

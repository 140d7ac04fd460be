"""API fuzzing (docs/fuzzing.md): schemathesis runs every operation of the server's own OpenAPI
schema against the real web server (gunicorn, PostgreSQL, Redis), as an admin, on a seeded world,
and fails on a 5xx, an answer that does not match the schema (status, content type, body), bad
input that was accepted, or an operation that answers without credentials.

`CBR_FUZZ_EXAMPLES` sets the examples per operation (CI's default keeps the run to a few minutes);
`CBR_FUZZ_SEED` the seed (the run is derandomized: the same seed makes the same requests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import factories
import pytest
import requests

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("CBR_FUZZ_EXAMPLES", "100"))
SEED = int(os.environ.get("CBR_FUZZ_SEED", "20261122"))
CHECKS = [
    "not_a_server_error",  # no 5xx (a 503/507 is a documented state, not a crash)
    "status_code_conformance",  # every status is one the schema lists for the operation
    "content_type_conformance",  # and in the content type it lists
    "response_schema_conformance",  # and the body matches the schema
    "negative_data_rejection",  # input that breaks the schema is refused (4xx)
    "ignored_auth",  # no credentials, bad credentials: 401, never an answer
]


@pytest.fixture
def admin_token(django_user_model):
    return factories.token_for(factories.make_user("fuzz", "admin"))


def seed_world(url: str, token: str) -> dict:
    """Streams (plain, with a retention policy, compacted), reader groups (a plain one, a MANUAL
    subscriber with a persisted checkpoint), an API key and a retention cycle: the objects the
    hooks (tests/fuzz/hooks.py) put into generated paths."""
    http = requests.Session()
    http.headers["Authorization"] = f"Token {token}"

    def post(path: str, body: dict | None = None, status: int = 201) -> dict:
        answer = http.post(f"{url}/api/v1/{path}", json=body)
        assert answer.status_code == status, (path, answer.status_code, answer.text)
        return answer.json()

    post("streams/", {"scope": "fuzz", "name": "plain", "segment_count": 2})
    post(
        "streams/",
        {
            "scope": "fuzz",
            "name": "kept",
            "segment_count": 1,
            "retention_policy": {"limit_type": "size", "min": 10, "max": 100000, "consumption_based": True},
        },
    )
    post("streams/", {"scope": "fuzz", "name": "compacted", "segment_count": 1, "cleanup_policy": "compact"})
    for stream in ("plain", "kept", "compacted"):
        post(
            f"streams/fuzz/{stream}/events/",
            {"events": [{"payload": f"event {i}", "key": f"k{i % 3}", "routing_key": f"r{i}"} for i in range(20)]},
        )
    post("reader-groups/", {"scope": "fuzz", "name": "readers", "streams": ["fuzz/plain", "fuzz/compacted"]})
    post(
        "reader-groups/",
        {
            "scope": "fuzz",
            "name": "subscriber",
            "streams": ["fuzz/kept"],
            "retention_type": "MANUAL_RELEASE_AT_USER_STREAMCUT",
        },
    )
    post("reader-groups/fuzz/subscriber/read/", {"max_events": 5}, status=200)
    post("reader-groups/fuzz/subscriber/checkpoints/", {"name": "cp1", "persist": True})
    key = post("api-keys/", {"name": "fuzz", "kind": "reader_group", "reader_group": "fuzz/readers"})
    cycle = post("retention/cycles/", {"stream": "fuzz/kept"})
    streams = [{"scope": "fuzz", "name": n} for n in ("plain", "kept", "compacted")]
    groups = [{"scope": "fuzz", "name": n} for n in ("readers", "subscriber")]
    return {
        "streams": streams,
        "reader_groups": groups,
        "checkpoints": [{"scope": "fuzz", "name": "subscriber", "checkpoint": "cp1"}],
        "api_keys": [{"prefix": key["prefix"]}],
        "cycles": [{"id": cycle["id"]}],
    }


def test_every_operation_holds_to_the_schema_under_fuzzing(web_server, admin_token, tmp_path):
    # given the real server, a seeded world and its schema
    world = seed_world(web_server.url, admin_token)
    report = tmp_path / "junit.xml"
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(Path(__file__).with_name("schemathesis.toml")),
        "run",
        f"{web_server.url}/api/v1/schema/",
        "--url",
        web_server.url,
        "--header",
        f"Authorization: Token {admin_token}",
        "--checks",
        ",".join(CHECKS),
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        str(SEED),
        "--generation-deterministic",
        "--workers",
        "2",
        "--request-timeout",
        "60",
        "--suppress-health-check",
        "all",
        "--report",
        "junit,ndjson",
        "--report-junit-path",
        str(report),
        "--report-ndjson-path",
        str(tmp_path / "events.ndjson"),
        "--no-color",
    ]
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.fuzz.hooks",
        "CBR_FUZZ_WORLD": json.dumps(world),
        "PYTHONPATH": str(ROOT),
    }

    # when schemathesis runs every operation
    started = time.monotonic()
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=45 * 60)
    took = time.monotonic() - started

    # then nothing failed
    output = run.stdout + run.stderr
    print(output)
    print(f"schemathesis: {EXAMPLES} examples per operation, seed {SEED}, {took:.0f} s")
    assert run.returncode == 0, output[-20000:]
    assert report.exists()

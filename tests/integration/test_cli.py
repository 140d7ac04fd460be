"""The `cbr` command line, installed with the project, driven end to end against the real web
server and a real Celery worker: streams, publish from stdin and from a file, tail, consume with
acknowledgements, reader groups with seek and checkpoints, a retention cycle, health."""

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import factories
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CBR = Path(sys.executable).parent / "cbr"  # the console script `make venv` installs


@pytest.fixture
def cbr(web_server, celery_worker, django_user_model):
    """`cbr …` against the web server, whose cycles the session's worker runs (same broker, same
    store)."""
    web_server.kill()
    web_server.env["CELERY_BROKER_URL"] = celery_worker.broker_url
    web_server.env["CBR_DATA_DIR"] = str(celery_worker.data_dir)
    web_server.start()
    token = factories.token_for(factories.make_user("cli", "admin"))
    env = {"PATH": "/usr/bin:/bin", "CBR_SERVER": web_server.url, "CBR_TOKEN": token}

    def run(*args: str, stdin: bytes = b"", expect: int = 0) -> str:
        done = subprocess.run([str(CBR), *args], input=stdin, capture_output=True, env=env, cwd="/", timeout=120)
        assert done.returncode == expect, (args, done.returncode, done.stdout[-2000:], done.stderr[-2000:])
        return (done.stdout + done.stderr).decode()

    return run


def lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_the_cli_end_to_end(cbr, tmp_path):
    created = json.loads(
        cbr("--json", "streams", "create", "cli/orders", "--segments", "2", "--limit-type", "size", "--min", "0")
    )
    assert created["segment_count"] == 2 and created["retention_policy"]["limit_type"] == "size"
    assert "cli/orders" in cbr("streams", "list", "--scope", "cli")
    listed = json.loads(cbr("--json", "streams", "list", "--search", "orders"))
    assert [f"{s['scope']}/{s['name']}" for s in listed] == ["cli/orders"]

    assert cbr("publish", "cli/orders", "--routing-key", "k", stdin=b"one\ntwo\nthree\n") == (
        "published 3 events to cli/orders\n"
    )
    (tmp_path / "more.txt").write_bytes(b'{"n": 4}\n\xff\xfe\n')
    positions = json.loads(
        cbr("--json", "publish", "cli/orders", "--routing-key", "k", "--file", str(tmp_path / "more.txt"))
    )
    segment = positions[0]["segment"]
    assert [p["offset"] for p in positions] == [3, 4] and {p["segment"] for p in positions} == {segment}

    events = lines(cbr("--json", "tail", "cli/orders"))
    assert [e.get("payload") for e in events] == ["one", "two", "three", '{"n": 4}', None]
    assert events[4]["payload_b64"] == "//4="
    text = cbr("tail", "cli/orders", "--from", json.dumps({segment: 3}), "--format", "hex")
    assert text.splitlines()[-1].endswith("] ff fe") and f"cli/orders {segment}:3 routing_key=k" in text
    assert cbr("tail", "cli/orders", "--from", "tail") == ""
    # from a time: how long ago, or an ISO 8601 time (UTC without an offset)
    assert len(lines(cbr("--json", "tail", "cli/orders", "--from", "1h"))) == 5
    assert cbr("tail", "cli/orders", "--from", "2099-01-01T00:00:00") == ""
    # a search: text in the payload, a condition on a JSON one
    assert [e["payload"] for e in lines(cbr("--json", "tail", "cli/orders", "--contains", "tw"))] == ["two"]
    assert [e["payload"] for e in lines(cbr("--json", "tail", "cli/orders", "--where", "$.n>3"))] == ['{"n": 4}']
    assert cbr("tail", "cli/orders", "--where", "$.n>4") == ""
    # an export, streamed through the web server: JSON lines to stdout, CSV to a file
    exported = lines(cbr("export", "cli/orders"))
    assert [e["payload_b64"] for e in exported] == [e["payload_b64"] for e in events]
    cbr("export", "cli/orders", "--format", "csv", "--contains", "t", "-o", str(tmp_path / "out.csv"))
    csv_lines = (tmp_path / "out.csv").read_text().splitlines()
    assert csv_lines[0].startswith("segment,offset,published_at") and len(csv_lines) == 3  # two and three
    refused = cbr("export", "cli/orders", "--where", "n>1", expect=1)
    assert refused.startswith("cbr: 400 ") and "(json)" in refused
    assert "--from 'soon': head, tail, a cut as JSON" in cbr("tail", "cli/orders", "--from", "soon", expect=2)

    cbr("groups", "create", "cli/billing", "--stream", "cli/orders", "--retention-type",
        "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT", "--backoff-s", "1,5")  # fmt: skip
    assert [e["payload_b64"] for e in lines(cbr("--json", "consume", "cli/billing", "--count", "2"))] == [
        "b25l",
        "dHdv",
    ]
    floors = {
        p["segment"]: p["floor"] for p in json.loads(cbr("--json", "groups", "describe", "cli/billing"))["positions"]
    }
    assert floors[segment] == 2  # the two printed were acknowledged, nothing more
    rest = cbr("consume", "cli/billing", "--idle-stop", "--wait-ms", "0")
    assert [line.split("] ", 1)[1] for line in rest.splitlines()] == ["three", '{"n": 4}', "base64://4="]
    assert "LAG" in cbr("groups", "describe", "cli/billing")
    # each consumer's figures, which the web server counts and adds up within a second
    deadline = time.monotonic() + 10
    while (seen := json.loads(cbr("--json", "groups", "consumers", "cli/billing"))) and time.monotonic() < deadline:
        if seen[0]["acked"] >= 5:
            break
        time.sleep(0.2)
    (me,) = seen  # no --consumer: reads under "default"
    assert (me["name"], me["acked"], me["in_flight"]) == ("default", 5, 0) and me["delivered"] >= 5
    table = cbr("groups", "consumers", "cli/billing").splitlines()
    assert table[0].split() == ["CONSUMER", "LAST", "READ", "LAST", "ACK", "READ/S", "ACKED/S", "IN", "FLIGHT"]
    assert table[1].split()[0] == "default" and table[1].split()[-1] == "0"

    cp = json.loads(cbr("--json", "groups", "checkpoint", "cli/billing", "after-all", "--persist"))
    assert cp["name"] == "after-all" and cp["cuts"]["cli/orders"][segment] == 5
    before = json.loads(cbr("--json", "groups", "describe", "cli/billing"))["generation"]
    moved = json.loads(cbr("--json", "groups", "seek", "cli/billing", "head"))
    assert moved["generation"] == before + 1
    again = lines(cbr("--json", "consume", "cli/billing", "--idle-stop", "--wait-ms", "0"))
    assert len(again) == 5  # a seek to the head hands everything out again

    run = json.loads(cbr("--json", "cycle", "--stream", "cli/orders", "--wait"))
    assert run["state"] == "done" and run["streams_total"] == 1

    # on a consumption-based stream a group is a subscriber unless asked otherwise, and it is said
    cbr("streams", "create", "cli/held", "--limit-type", "size", "--min", "0", "--consumption-based")
    said = cbr("groups", "create", "cli/keeper", "--stream", "cli/held")
    assert "cli/held is consumption-based: the group is a subscriber (AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT)" in said
    assert json.loads(cbr("--json", "groups", "describe", "cli/keeper"))["retention_type"] == (
        "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT"
    )
    cbr("groups", "create", "cli/reader", "--stream", "cli/held", "--retention-type", "NONE")
    assert json.loads(cbr("--json", "groups", "describe", "cli/reader"))["retention_type"] == "NONE"
    made = cbr("groups", "create", "cli/plain", "--stream", "cli/orders")  # not consumption-based: a plain reader
    assert made == "created reader group cli/plain (NONE) on cli/orders\n"
    table = cbr("groups", "list").splitlines()
    assert table[0].split()[:5] == ["GROUP", "RETENTION", "TYPE", "LAG", "PENDING"]
    cbr("publish", "cli/held", stdin=b"a\nb\nc\n")
    keeper = next(line.split() for line in table if line.startswith("cli/keeper "))
    assert keeper[2:4] == ["0", "0"]
    keeper = next(line.split() for line in cbr("groups", "list").splitlines() if line.startswith("cli/keeper "))
    assert keeper[2:4] == ["3", "0"]  # three events not read yet, nothing handed out
    listed = {g["name"]: g for g in json.loads(cbr("--json", "groups", "list"))}
    assert (listed["keeper"]["lag_events"], listed["keeper"]["pending"]) == (3, 0)
    # a purge, only with --yes; then the subscriber's lag is gone with the events
    assert "add --yes" in cbr("streams", "purge", "cli/held", expect=2)
    assert (
        cbr("streams", "purge", "cli/held", "--before", "2000-01-01T00:00:00", "--yes")
        == "nothing to purge in cli/held\n"
    )
    assert cbr("streams", "purge", "cli/held", "--yes").startswith("purged cli/held: ")
    assert json.loads(cbr("--json", "groups", "describe", "cli/keeper"))["positions"][0]["lag_events"] == 0
    assert json.loads(cbr("--json", "groups", "describe", "cli/plain"))["retention_type"] == "NONE"

    refused = cbr("streams", "create", "cli/orders", expect=1)
    assert refused.startswith("cbr: 409 ") or refused.startswith("cbr: 400 "), refused
    assert "add --yes" in cbr("groups", "delete", "cli/billing", expect=2)
    assert cbr("groups", "delete", "cli/billing", "--yes") == "deleted cli/billing\n"
    assert "cbr: 404 " in cbr("groups", "describe", "cli/billing", expect=1)
    assert cbr("streams", "delete", "cli/orders", "--yes") == "deleted cli/orders\n"

    health = cbr("health", expect=1)  # no beat runs here
    assert health.startswith("not ready: ") and "beat" in health


def test_the_cli_says_what_went_wrong_and_how_to_put_it_right(cbr, web_server):
    # a missing stream is named; --json after the command too, and errors in JSON with it
    assert "cbr: 404 not_found: no stream cli/nope" in cbr("streams", "describe", "cli/nope", expect=1)
    error = json.loads(cbr("streams", "describe", "cli/nope", "--json", expect=1))["error"]
    assert error == {"status": 404, "code": "not_found", "field": None, "message": "no stream cli/nope"}
    cbr("streams", "create", "cli/listed")
    assert [s["name"] for s in json.loads(cbr("streams", "list", "--scope", "cli", "--json"))] == ["listed"]

    # limits with their units; the list in the console's units, raw numbers under --json
    made = cbr("streams", "create", "cli/timed", "--min", "1d", "--max", "7d")  # the limit type follows the units
    assert made == "created stream cli/timed: 1 segment(s), retention time min=1d max=7d\n"
    cbr("streams", "create", "cli/sized", "--limit-type", "size", "--min", "2GiB", "--max", "50GB")
    listed = cbr("streams", "list", "--scope", "cli")
    assert "time min=1d max=7d" in listed and "size min=2.0GiB max=46.6GiB" in listed
    policies = {
        s["name"]: s["retention_policy"] for s in json.loads(cbr("streams", "list", "--scope", "cli", "--json"))
    }
    assert (policies["timed"]["min"], policies["sized"]["max"]) == (86_400, 50_000_000_000)
    mixed = cbr("streams", "create", "cli/mixed", "--limit-type", "size", "--min", "7d", expect=2)
    assert "--min is written as a duration, but the limit type is size" in mixed

    def bare(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(CBR), *args], capture_output=True, env={"PATH": "/usr/bin:/bin", **env}, cwd="/")

    # no credentials: the variables to set are named
    anonymous = bare("streams", "list", CBR_SERVER=web_server.url)
    assert anonymous.returncode == 1
    assert "set CBR_TOKEN, or CBR_USER and CBR_PASSWORD, or CBR_API_KEY" in anonymous.stderr.decode()
    # no server: the address tried is named, and where to change it
    down = bare("--json", "streams", "list", CBR_SERVER="http://127.0.0.1:9")
    assert down.returncode == 2
    message = json.loads(down.stderr)["error"]["message"]
    assert message.startswith("cannot reach the server at http://127.0.0.1:9: ") and "CBR_SERVER" in message


def test_events_published_with_a_time_to_live_are_not_consumed_after_it(cbr):
    created = json.loads(cbr("--json", "streams", "create", "cli/brief", "--message-ttl-s", "1"))
    assert created["message_ttl_s"] == 1
    cbr("groups", "create", "cli/late", "--stream", "cli/brief", "--start", "head")
    cbr("publish", "cli/brief", stdin=b"gone\n")  # lives as the stream says: a second
    cbr("publish", "cli/brief", "--ttl-s", "600", stdin=b"kept\n")  # its own time to live wins
    time.sleep(1.5)  # past the stream's time to live
    got = lines(cbr("--json", "consume", "cli/late", "--idle-stop", "--wait-ms", "0"))
    assert [base64.b64decode(e["payload_b64"]) for e in got] == [b"kept"]
    assert got[0]["headers"] == {"cbr-ttl-ms": "600000"}

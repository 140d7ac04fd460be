"""A 64 MiB event through the real web server (gunicorn, two processes) with the Python client:
published from a file and read back whole and by range, while no web process's peak memory
grows by more than a small multiple of the piece size; an upload cut off mid-way writes nothing."""

import hashlib
import http.client
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import factories
import pytest

from cbr_client import Client
from store.large import PIECE_BYTES
from streams import logs
from streams.models import Stream

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SIZE = 64 * 1024 * 1024
CBR = Path(sys.executable).parent / "cbr"  # the console script `make venv` installs


@pytest.fixture
def token(django_user_model):
    return factories.token_for(factories.make_user("big", "admin"))


def _workers(server) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(server.proc.pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _status(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


def _reset_peaks(pids: list[int]) -> dict[int, int]:
    """Each process's peak resident size set back to its resident size now (`clear_refs` 5);
    that size, by process."""
    for pid in pids:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    return {pid: _status(pid, "VmRSS") for pid in pids}


def _grown(before: dict[int, int]) -> int:
    return max(_status(pid, "VmHWM") - rss for pid, rss in before.items())


def test_a_64_mib_event_goes_through_without_the_server_holding_it(web_server, token, tmp_path):
    cbr = Client(web_server.url, token=token)
    cbr.create_stream("big/files")
    group = cbr.create_reader_group("big/readers", ["big/files"], retention_type="NONE")
    path = tmp_path / "payload.bin"
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for i in range(SIZE // PIECE_BYTES):
            piece = os.urandom(PIECE_BYTES) if i % 16 == 0 else bytes([i % 251]) * PIECE_BYTES
            digest.update(piece)
            f.write(piece)
    workers = _workers(web_server)
    assert len(workers) == 2
    cbr.publish("big/files", ["before"])  # both workers warm

    before = _reset_peaks(workers)
    with open(path, "rb") as f:
        position = cbr.publish_large("big/files", f, key="report-7")
    published_growth = _grown(before)

    _, message = list(group.read(max_events=10))
    before = _reset_peaks(workers)
    got = hashlib.sha256()
    for piece in cbr.payload(position["payload_url"]):
        got.update(piece)
    read_growth = _grown(before)
    assert got.hexdigest() == digest.hexdigest()
    tail = b"".join(cbr.payload(position["payload_url"], first=SIZE - 10))
    assert len(tail) == 10

    # the event is in the store as one record of its size; the processes held pieces of it
    assert message.payload_url == position["payload_url"]
    assert message.data["payload_size"] == SIZE and message.data["key"] == "report-7"
    assert published_growth < 16 * PIECE_BYTES, published_growth
    assert read_growth < 16 * PIECE_BYTES, read_growth


def test_an_upload_cut_off_mid_way_writes_nothing(web_server, token):
    cbr = Client(web_server.url, token=token)
    cbr.create_stream("big/cut")
    host, port = web_server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(
            b"POST /api/v1/streams/big/cut/events/raw/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Token " + token.encode() + b"\r\n"
            b"Content-Type: application/octet-stream\r\nContent-Length: 10000000\r\n\r\n" + b"x" * 3_000_000
        )
        s.shutdown(socket.SHUT_WR)  # the client goes away with 3 of its 10 MB sent
        s.settimeout(30)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert not answer.startswith(b"HTTP/1.1 201")  # (a client that went away is sent nothing)
    cbr.publish("big/cut", ["after"])
    stream = Stream.objects.get(scope__name="big", name="cut")
    records, _ = logs.stream_log(stream).read({}, 10)
    assert [r.record.payload for r in records] == [b"after"]  # nothing of the cut-off upload


def test_the_cli_publishes_a_file_above_the_json_limit_as_a_large_event(web_server, token, tmp_path):
    cbr = Client(web_server.url, token=token)
    cbr.create_stream("big/cli")
    path = tmp_path / "video.bin"
    data = os.urandom(3 * 1024 * 1024 + 5)  # above the JSON limit (1 MiB)
    path.write_bytes(data)
    env = {"PATH": "/usr/bin:/bin", "CBR_SERVER": web_server.url, "CBR_TOKEN": token}
    command = [str(CBR), "publish", "big/cli", "--file", str(path), "--whole", "--key", "v1"]
    done = subprocess.run(command, capture_output=True, env=env, cwd="/", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert b"published 1 large event (3145733 bytes)" in done.stdout
    shown = subprocess.run(
        [str(CBR), "tail", "big/cli", "--limit", "1"], capture_output=True, env=env, cwd="/", timeout=120
    )
    assert b"large event, 3145733 bytes: /api/v1/streams/big/cli/events/0/0/payload/" in shown.stdout, shown
    (event,) = cbr.events("big/cli")["events"]
    assert event["key"] == "v1" and b"".join(cbr.payload(event["payload_url"])) == data


def test_a_chunked_upload_is_taken_and_one_over_the_cap_refused_as_it_arrives(web_server, token):
    cbr = Client(web_server.url, token=token)
    cbr.create_stream("big/chunked")
    host, port = web_server.url.removeprefix("http://").split(":")
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/octet-stream"}

    def upload(pieces):
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            conn.request(
                "POST",
                "/api/v1/streams/big/chunked/events/raw/?key=c",
                body=pieces,
                headers=headers,
                encode_chunked=True,
            )
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    data = [os.urandom(100_000) for _ in range(30)]
    status, answer = upload(iter(data))
    assert status == 201, answer
    url = json.loads(answer)["positions"][0]["payload_url"]
    assert b"".join(cbr.payload(url)) == b"".join(data)

    web_server.kill()
    web_server.env["CBR_MAX_LARGE_EVENT_BYTES"] = "1000000"
    web_server.start()
    status, answer = upload(iter(data))  # 3 MB, chunked, against a 1 MB cap
    assert status == 413 and json.loads(answer)["field"] == "body", answer
    assert len(cbr.events("big/chunked")["events"]) == 1  # nothing more written

"""A read's answer in its two forms (issue 26), one process, no server: what building a batch of
1 000 deliveries costs the server and decoding it costs the Python client, and its size.

  json    the web worker's `ReadResult.deliveries` (one dict per event) serialised by orjson,
          as the JSON renderer does; the client's orjson.loads of it
  binary  `streams.wire.encode_read_batch` of the same events as the store hands them to a
          binary read (frames, not decoded: one slice for a run of them); the client's
          `decode_read_batch` to the same object the JSON gives

what the store's read of the events costs each (`store reads`: a JSON read decodes each record,
`framing.read_records`; a binary one checks each and leaves it as stored, `framing.read_frames`),
and what the client's `read` makes of each (`messages`): a `Message` around each decoded JSON
delivery, or, from the binary answer, a `BatchMessage` per event that reads its fields from the
answer when asked for; `+ payloads`: the same, then every message's `payload` (bytes) taken, as
a consumer that handles its events does.

Events of ~100 B (text), no keys or headers, as bench/consume.py publishes them. The end-to-end
figures of both forms are bench/consume.py's `--acks carried,carried-json`.
Usage: .venv/bin/python bench/read_format.py [--events 1000] [--repeat 300]
"""

from __future__ import annotations

import argparse
import os
import time

import django
from _common import machine

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbrweb.settings")
django.setup()

import orjson  # noqa: E402

from cbr_client import Message, _batch_messages, decode_read_batch  # noqa: E402
from domain.acks import Delivery  # noqa: E402
from groups.consuming.answers import ReadPart, ReadResult  # noqa: E402
from store import framing  # noqa: E402
from store.framing import Record  # noqa: E402
from streams.wire import encode_read_batch  # noqa: E402


def per_call_ms(fn, repeat: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    published = int(time.time() * 1000)
    records = [
        Record(i, published, None, i * 100, None, None, None, os.urandom(50).hex().encode(), False)
        for i in range(args.events)
    ]
    # a JSON read decodes its records; a binary one leaves them as the store keeps them
    parts = [ReadPart.of("bench/stream", "0", "123456-7-0", [(r, Delivery(r.offset, 1)) for r in records])]
    chunk = b"".join(map(framing.frame_record, records))  # the events as a chunk file holds them
    frames, _ = framing.read_frames(chunk)
    stored = [ReadPart.of("bench/stream", "0", "123456-7-0", [(f, Delivery(f.offset, 1)) for f in frames])]
    head = {"missed": 0, "missed_by_stream": {}, "pending_limit_reached": False}
    expires = "2026-11-27T00:00:00.000Z"

    def as_json() -> bytes:  # a fresh result each time: its deliveries are built once per result
        result = ReadResult(parts, lease_expires_at=expires)
        return orjson.dumps({"deliveries": result.deliveries, **head})

    def as_binary() -> bytes:
        return encode_read_batch(head, stored, expires)

    json_body, binary_body = as_json(), as_binary()
    assert decode_read_batch(binary_body) == orjson.loads(json_body)

    def json_messages() -> list:
        return [Message(None, d) for d in orjson.loads(json_body)["deliveries"]]  # type: ignore[arg-type]

    def binary_messages() -> list:
        return _batch_messages(None, binary_body)["deliveries"]

    assert (
        [m.payload for m in json_messages()] == [m.payload for m in binary_messages()] == [r.payload for r in records]
    )
    n = args.events
    rows = [
        (
            "json",
            per_call_ms(as_json, args.repeat),
            per_call_ms(lambda: orjson.loads(json_body), args.repeat),
            json_body,
        ),
        (
            "binary",
            per_call_ms(as_binary, args.repeat),
            per_call_ms(lambda: decode_read_batch(binary_body), args.repeat),
            binary_body,
        ),
    ]
    made = {
        "json": (
            lambda: framing.read_records(chunk),
            json_messages,
            lambda: [m.payload for m in json_messages()],
        ),
        "binary": (
            lambda: framing.read_frames(chunk),
            binary_messages,
            lambda: [m.payload for m in binary_messages()],
        ),
    }
    print(f"{n:,} deliveries of ~100 B; ms per 1 000 events")
    print(
        f"{'form':8} {'store reads':>12} {'server builds':>14} {'client decodes':>15} {'messages':>9}"
        f" {'+ payloads':>11} {'bytes':>10}"
    )
    for name, build, decode, body in rows:
        reads, messages, payloads = (per_call_ms(f, args.repeat) for f in made[name])
        print(
            f"{name:8} {reads * 1000 / n:12.3f} {build * 1000 / n:14.3f} {decode * 1000 / n:15.3f}"
            f" {messages * 1000 / n:9.3f} {payloads * 1000 / n:11.3f} {len(body):10,}"
        )


if __name__ == "__main__":
    main()

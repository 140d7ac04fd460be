"""`cbr`: CBR from the command line, in the spirit of `pulsar-admin` and `nats`.

    cbr streams list|create|describe|policy|seal|compact|delete
    cbr publish STREAM [--file F]          one event per line of stdin (or the file); --whole: one event
                                           (a file above the JSON limit as a large event, streamed)
    cbr tail STREAM [--from head|tail|CUT] [--follow]   browse, no acknowledgement
    cbr consume GROUP [--count N]          read, print, acknowledge (at least once)
    cbr groups list|create|describe|seek|checkpoint|delete
    cbr cycle [--stream S] [--wait]        run a retention cycle
    cbr health                             what /readyz answers (exit 1 when not ready)
    cbr context add|use|list|show|rm       saved servers and credentials
    cbr completion bash                    a completion script: eval "$(cbr completion bash)"

The server and the credentials come from flags, the environment or a saved context (`cbr
context`): `--server`/`CBR_SERVER` (default http://127.0.0.1:8000), `--token`/`CBR_TOKEN`,
`--api-key`/`CBR_API_KEY`, or `--user`/`CBR_USER` with `--password`/`CBR_PASSWORD`. `--json` (before or after the command)
prints what the API answered, one JSON document (or one per line for events), for scripts, and an
error as one JSON object on stderr. Exit status: 0 done, 1 the server refused (its error on stderr:
status, code, field, message), 2 the server could not be reached or the command line was wrong.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any

from cbr_client import CBRError, Client, Message, contexts

SUBSCRIBER = "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT"  # what `groups create` makes on a consumption-based stream
POLICY_FLAGS = ("limit_type", "min", "max", "consumption_based", "subscriber_timeout_s", "fallback_after_s")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    # the client says on stderr when it sends a request again (a 503 the server says to retry)
    logging.basicConfig(format="cbr: %(message)s", level=logging.WARNING, stream=sys.stderr)
    try:
        if getattr(args, "local", None) is not None:  # `context`, `completion`: no server asked
            return args.local(args, parser) or 0
        given = {setting: getattr(args, setting) for setting in contexts.SETTINGS}
        for setting, value in contexts.resolve(given, args.context).items():
            setattr(args, setting, value)
        client = Client(
            args.server,
            token=args.token or None,
            api_key=args.api_key or None,
            username=args.user or None,
            password=args.password or None,
        )
        with client:
            return args.run(client, args) or 0
    except CBRError as exc:
        message = str(exc.body.get("message", ""))
        if exc.status == 401 and not (args.token or args.api_key or args.user):
            message = f"{message} (no credentials given: set CBR_TOKEN, or CBR_USER and CBR_PASSWORD, or CBR_API_KEY)"
        return _error(args, 1, message, status=exc.status, code=exc.code, field=exc.field)
    except OSError as exc:  # refused, reset, unknown host, timed out
        why = exc.strerror or str(exc) or type(exc).__name__
        return _error(args, 2, f"cannot reach the server at {args.server}: {why} (--server, CBR_SERVER or cbr context)")
    except ValueError as exc:
        return _error(args, 2, str(exc))
    except KeyboardInterrupt:
        return 130


def _error(args, exit_status: int, message: str, **error: Any) -> int:
    """An error on stderr: a line (`cbr: 404 not_found: no stream shop/orders`), or with `--json`
    one JSON object (`{"error": {"status": 404, "code": "not_found", "field": null, "message": …}}`;
    `status` and `code` null when no server answered)."""
    if getattr(args, "json", False):
        body = {
            "status": error.get("status"),
            "code": error.get("code"),
            "field": error.get("field"),
            "message": message,
        }
        print(json.dumps({"error": body}), file=sys.stderr)
    elif "status" in error:
        where = f" ({error['field']})" if error.get("field") else ""
        print(f"cbr: {error['status']} {error['code']}{where}: {message}", file=sys.stderr)
    else:
        print(f"cbr: {message}", file=sys.stderr)
    return exit_status


# -- output ------------------------------------------------------------------------------------


def _out(args, answer: Any, human: str | None = None) -> None:
    if args.json:
        print(json.dumps(answer, indent=2 if not isinstance(answer, list) or len(answer) < 1000 else None))
    else:
        print(human if human is not None else _fields(answer))


def _fields(answer: dict) -> str:
    """An object as `name: value` lines (nested values as compact JSON)."""
    width = max((len(k) for k in answer), default=0)
    return "\n".join(
        f"{k.ljust(width)}  {v if isinstance(v, str | int | float) or v is None else json.dumps(v)}"
        for k, v in answer.items()
    )


def _table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [header, *[["" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def _payload(event: dict, form: str) -> str:
    if "payload_url" in event:  # a large event: where its bytes are, not the bytes
        return f"(large event, {event['payload_size']} bytes: {event['payload_url']})"
    raw = base64.b64decode(event["payload_b64"])
    if form == "hex":
        return raw.hex(" ")
    text = event.get("payload")
    if text is None:
        return "base64:" + event["payload_b64"]
    if form == "pretty":
        try:
            return json.dumps(json.loads(text), indent=2)
        except ValueError:
            return text
    return text


def _event_line(args, event: dict) -> str:
    if args.json:
        return json.dumps(event)
    where = f"{event.get('stream', args.stream if 'stream' in args else '')} {event['segment']}:{event['offset']}"
    extra = "".join(f" {k}={event[k]}" for k in ("routing_key", "key") if event.get(k))
    return f"[{where}{extra}] {_payload(event, args.format)}"


# -- streams -----------------------------------------------------------------------------------


def _policy(args) -> dict:
    """The policy flags given, as the API takes them: `--min`/`--max` written with a unit say
    the limit type when `--limit-type` does not (and must agree with it when it does)."""
    policy = {k: getattr(args, k) for k in POLICY_FLAGS if getattr(args, k) is not None}
    kinds = {flag: policy[flag][1] for flag in ("min", "max") if flag in policy and policy[flag][1]}
    for flag in ("min", "max"):
        if flag in policy:
            policy[flag] = policy[flag][0]
    if kinds:
        written = set(kinds.values())
        limit_type = policy.get("limit_type") or (written.pop() if len(written) == 1 else None)
        for flag, kind in kinds.items():
            if kind != limit_type:
                raise ValueError(
                    f"--{flag} is written as a {'duration' if kind == 'time' else 'size'}, but the limit type is {limit_type}"
                )
        policy["limit_type"] = limit_type
    return policy


# Sizes and durations as people write them (`50GB`, `2GiB`, `7d`, `1h30m`) and sizes as they read
# them (`47.7 MiB`: 1024-based, IEC labels). The server's `domain.quantities` reads and writes them
# the same way; this program imports nothing of the server, and one table of cases in the tests
# holds the two to each other.
_SIZE_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "pib": 2**50,
}
_DURATION_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86_400, "w": 604_800}
_QUANTITY_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)")


def quantity(text: str) -> tuple[int, str | None]:
    """A whole number of bytes or seconds and which it was written as ("size", "time", None)."""
    raw = text.strip().lower().replace("_", "")
    total, kinds, at = 0.0, set(), 0
    for match in _QUANTITY_PART.finditer(raw):
        if match.start() != at:
            break
        number, unit = float(match.group(1)), match.group(2)
        if not unit:
            if match.end() != len(raw) or at:
                break
            return int(number), None
        if unit in _SIZE_UNITS:
            total, kind = total + number * _SIZE_UNITS[unit], "size"
        elif unit in _DURATION_UNITS:
            total, kind = total + number * _DURATION_UNITS[unit], "time"
        else:
            break
        kinds.add(kind)
        at = match.end()
    if not raw or at != len(raw) or len(kinds) != 1:
        raise argparse.ArgumentTypeError(
            f"{text.strip()!r} is not a size or a duration: a number, or one with a unit "
            "(bytes: B, KB, MB, GB, TB or KiB, MiB, GiB, TiB; time: s, m, h, d, w)"
        )
    return int(total), kinds.pop()


def _duration(text: str) -> int:
    value, kind = quantity(text)
    if kind == "size":
        raise argparse.ArgumentTypeError(f"{text.strip()!r} is a size, not a duration")
    return value


def quantity_bytes(text: str) -> int:
    """A size in bytes: a number, or one with a unit (1MB, 512KiB)."""
    value, kind = quantity(text)
    if kind == "time":
        raise argparse.ArgumentTypeError(f"{text.strip()!r} is a duration, not a size")
    return value


def size_text(n: int | None) -> str:
    if n is None:
        return "—"
    if abs(n) < 1024:
        return "1\xa0byte" if n == 1 else f"{n}\xa0bytes"
    value, unit = float(n), 0
    labels = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB")
    while abs(value) >= 1024 and unit < len(labels) - 1:
        value /= 1024
        unit += 1
    return f"{value:.1f}\xa0{labels[unit]}"


def rate_text(per_s: float | None) -> str:
    """Events per second as the console shows them: `0`, `0.03`, `2.5`, `1,234`."""
    if per_s is None:
        return "—"
    if per_s == 0:
        return "0"
    if per_s < 0.995:
        return f"{per_s:.2f}"
    if per_s < 9.95:
        return f"{per_s:.1f}"
    return f"{round(per_s):,}"


def _seconds_text(seconds: int) -> str:
    """86400 → `1d`, 5400 → `1h30m`, 90 → `1m30s` (at most two units)."""
    if seconds == 0:
        return "0s"
    parts: list[str] = []
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and len(parts) < 2:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


def streams_list(client: Client, args) -> None:
    found = list(client.streams(search=args.search, scope=args.scope, tags=args.tags))
    rows = [
        [f"{s['scope']}/{s['name']}", s["segment_count"], s["event_count"], size_text(s["size_bytes"]), _policy_text(s)]
        for s in found
    ]
    _out(args, found, _table(rows, ["STREAM", "SEGMENTS", "EVENTS", "HELD", "POLICY"]))


def _policy_text(stream: dict) -> str:
    p = stream.get("retention_policy")
    if not p:
        return "-"
    shown = _seconds_text if p["limit_type"] == "time" else (lambda n: size_text(n).replace("\xa0", ""))
    text = p["limit_type"] if p["limit_type"] == "none" else f"{p['limit_type']} min={shown(p['min'])}"
    text += f" max={shown(p['max'])}" if p.get("max") is not None else ""
    return text + (" consumption-based" if p.get("consumption_based") else "")


def streams_create(client: Client, args) -> None:
    scope, name = _split(args.stream)
    settings: dict[str, Any] = {}
    if args.cleanup_policy:
        settings["cleanup_policy"] = args.cleanup_policy
    if args.description:
        settings["description"] = args.description
    if args.set_tags:
        settings["tags"] = dict(args.set_tags)
    if policy := _policy(args):
        settings["retention_policy"] = policy
    rate = {
        k: v for k, v in (("events_per_s", args.publish_events_per_s), ("bytes_per_s", args.publish_bytes_per_s)) if v
    }
    if rate:
        settings["publish_rate"] = rate
    if args.message_ttl_s:
        settings["message_ttl_s"] = args.message_ttl_s
    made = client.create_stream(scope, name, segment_count=args.segments, **settings)
    shown = _policy_text(made)
    kept = "no retention policy" if shown == "-" else f"retention {shown}"
    _out(args, made, f"created stream {args.stream}: {made['segment_count']} segment(s), {kept}")


def streams_republish(client: Client, args) -> None:
    if bool(args.all) == bool(args.event):
        raise ValueError("republish: give --all, or --event SEGMENT:OFFSET (repeatable)")
    positions = None
    if args.event:
        positions = []
        for written in args.event:
            segment, sep, offset = written.rpartition(":")
            if not sep or not offset.isdigit():
                raise ValueError(f"--event {written!r}: SEGMENT:OFFSET, e.g. 0:42")
            positions.append((segment, int(offset)))
    done = client.republish(args.stream, positions)
    skipped = f", {done['skipped']} skipped (republished before, or their stream is gone)" if done["skipped"] else ""
    _out(args, done, f"republished {done['republished']} dead letter(s) from {args.stream}{skipped}")


def streams_purge(client: Client, args) -> int:
    """A destructive command: done only with --yes."""
    if not args.yes:
        print(f"cbr: purging {args.stream} deletes its events for good; add --yes to do it", file=sys.stderr)
        return 2
    record = client.purge(args.stream, None if args.before is None else _since(args.before))
    if record.get("id") is None:
        _out(args, record, f"nothing to purge in {args.stream}")
    else:
        _out(args, record, f"purged {args.stream}: {size_text(record.get('reclaimed_bytes', 0))} reclaimed")
    return 0


def streams_describe(client: Client, args) -> None:
    _out(args, client.stream(args.stream))


def streams_policy(client: Client, args) -> None:
    policy = _policy(args)
    _out(args, client.set_retention_policy(args.stream, **policy) if policy else client.retention_policy(args.stream))


def streams_seal(client: Client, args) -> None:
    sealed = client.seal(args.stream)
    _out(args, sealed, _table([[s["segment"], s["chunk"]] for s in sealed], ["SEGMENT", "CHUNK SEALED"]))


def _range_text(key_range: list[float]) -> str:
    return f"[{key_range[0]:.4g}, {key_range[1]:.4g})"


def streams_segments(client: Client, args) -> None:
    segments = client.segments(args.stream)
    rows = [
        [
            s["id"],
            _range_text(s["key_range"]),
            s["epoch"],
            "sealed" if s["sealed"] else "active",
            ",".join(s["predecessors"]) or "-",
        ]
        for s in segments
    ]
    _out(args, segments, _table(rows, ["SEGMENT", "KEY RANGE", "EPOCH", "STATE", "PREDECESSORS"]))


def streams_scale(client: Client, args) -> int:
    if sum(x is not None for x in (args.split, args.merge, args.seal)) != 1:
        print("cbr: give one of --split SEGMENT, --merge SEGMENT SEGMENT…, --seal … --ranges …", file=sys.stderr)
        return 2
    if args.split is not None:
        scaled = client.split(args.stream, args.split, args.parts)
    elif args.merge is not None:
        scaled = client.merge(args.stream, args.merge)
    else:
        try:
            ranges = json.loads(args.ranges or "")
        except json.JSONDecodeError:
            print('cbr: --ranges must be JSON, e.g. "[[0, 0.25], [0.25, 0.5]]"', file=sys.stderr)
            return 2
        scaled = client.scale(args.stream, args.seal, ranges, args.epoch)
    rows = [[s["id"], _range_text(s["key_range"]), ",".join(s["predecessors"])] for s in scaled["segments"]]
    _out(args, scaled, f"epoch {scaled['epoch']}\n" + _table(rows, ["NEW SEGMENT", "KEY RANGE", "REPLACES"]))
    return 0


def streams_scaling_policy(client: Client, args) -> None:
    """Show a stream's scaling policy, or set it when `--type` is given."""
    if args.type is None:
        policy = client.stream(args.stream).get("scaling_policy") or {"type": "fixed"}
    else:
        given = {"target_rate": args.target_rate, "scale_factor": args.scale_factor, "min_segments": args.min_segments}
        settings = {k: v for k, v in given.items() if v is not None}
        policy = client.set_scaling_policy(args.stream, args.type, **settings).get("scaling_policy") or {
            "type": "fixed"
        }
    _out(args, policy)


def streams_offload(client: Client, args) -> None:
    queued = client.offload(args.stream)
    _out(args, queued, f"queued {queued['files']} sealed file(s), {queued['bytes']:,} bytes, for long-term storage")


def streams_scalings(client: Client, args) -> None:
    scalings = list(client.scalings(args.stream))
    rows = [
        [
            h["epoch"],
            h["at"][:19],
            h["trigger"],
            ",".join(h["sealed"]),
            ",".join(c["id"] for c in h["created"]),
            h["rule"] or h["by"] or "-",
        ]
        for h in scalings
    ]
    _out(args, scalings, _table(rows, ["EPOCH", "AT", "TRIGGER", "SEALED", "MADE", "WHY"]))


def streams_compact(client: Client, args) -> None:
    run = client.compact(args.stream)
    if args.wait:
        while run.get("state") in ("queued", "running"):
            time.sleep(0.5)
            run = next((r for r in client.compactions(args.stream) if r["id"] == run["id"]), run)
    _out(args, run)


def _delete(args, name: str, consequence: str, delete) -> int:
    """A destructive command: done only with --yes."""
    if not args.yes:
        print(f"cbr: deleting {name} {consequence}; add --yes to do it", file=sys.stderr)
        return 2
    delete(name)
    if not args.json:
        print(f"deleted {name}")
    return 0


def streams_delete(client: Client, args) -> int:
    return _delete(args, args.stream, "deletes its events", client.delete_stream)


# -- events ------------------------------------------------------------------------------------


def _lines(source: IO[bytes]) -> Iterator[bytes]:
    for line in source:
        yield line.rstrip(b"\n").rstrip(b"\r")


def _batches(items: Iterable[dict], size: int) -> Iterator[list[dict]]:
    batch: list[dict] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def publish(client: Client, args) -> None:
    if args.large or (args.file and args.whole and os.path.getsize(args.file) > client.max_event_bytes):
        _publish_large(client, args)
        return
    source = open(args.file, "rb") if args.file else sys.stdin.buffer
    with source:
        payloads = [source.read()] if args.whole else _lines(source)
        fields: dict[str, Any] = {k: getattr(args, k) for k in ("routing_key", "key") if getattr(args, k)}
        if args.header:
            fields["headers"] = dict(h.split("=", 1) for h in args.header)
        events = ({**_encoded(p), **fields} for p in payloads)
        positions: list[dict] = []
        for batch in _batches(events, args.batch):
            positions += client.publish(args.stream, batch, delay_ms=args.delay_ms, ttl_s=args.ttl_s)
    _out(args, positions, f"published {len(positions)} event{'s' * (len(positions) != 1)} to {args.stream}")


def _publish_large(client: Client, args) -> None:
    """The whole input as one large event, streamed from the file (or stdin) to the server."""
    if args.header:
        raise ValueError(
            "publish: a large event takes no --header (its fields are --routing-key, --key, --delay-ms, --ttl-s)"
        )
    if not args.file:
        raise ValueError("publish: --large reads a --file (a large event's length is sent before it)")
    with open(args.file, "rb") as source:
        position = client.publish_large(
            args.stream, source, routing_key=args.routing_key, key=args.key, delay_ms=args.delay_ms, ttl_s=args.ttl_s
        )
    size = os.path.getsize(args.file)
    _out(args, [position], f"published 1 large event ({size} bytes) to {args.stream}: {position['payload_url']}")


def _encoded(payload: bytes) -> dict:
    try:
        return {"payload": payload.decode()}
    except UnicodeDecodeError:
        return {"payload_b64": base64.b64encode(payload).decode()}


FOLLOW_WAIT_MS = 30_000  # how long `tail --follow` asks the server to wait for new events


def tail(client: Client, args) -> None:
    """A plain read from the head, the tail or a cut; with --follow, new events as they come."""
    cut, at = None, None
    if args.start == "tail":
        cut = client.stream(args.stream)["tail_cut"]
    elif args.start.startswith("{"):
        cut = json.loads(args.start)
    elif args.start != "head":
        at = _since(args.start)
    shown = 0
    while args.limit is None or shown < args.limit:
        want = 1000 if args.limit is None else min(1000, args.limit - shown)
        asked = time.monotonic()
        searching = bool(args.contains or args.where_header or args.where)
        page = client.events(
            args.stream,
            cut,
            want,
            wait_ms=FOLLOW_WAIT_MS if args.follow and not searching else 0,
            from_time=at,
            contains=args.contains,
            headers=args.where_header or (),
            json_condition=args.where,
        )
        at = None  # then on from where the page stopped
        for event in page["events"]:
            print(_event_line(args, event), flush=True)
        shown += len(page["events"])
        moved = page["next_cut"] != cut
        cut = page["next_cut"]
        if not page["events"] and not (searching and moved):  # a search's page may find none and go on
            if not args.follow:
                return
            if time.monotonic() - asked < FOLLOW_WAIT_MS / 2000:
                time.sleep(args.poll_s)  # a server that does not wait (an older one): poll


def _since(value: str) -> str:
    """`--from` as a time: an ISO 8601 time (without an offset: UTC), or how long ago (`15m`, `2h`,
    `1d`)."""
    try:
        ago = _duration(value)
    except argparse.ArgumentTypeError:
        try:
            at = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(
                f"--from {value!r}: head, tail, a cut as JSON, an ISO 8601 time or how long ago (15m, 2h, 1d)"
            ) from None
        return (at if at.tzinfo else at.replace(tzinfo=datetime.UTC)).isoformat()
    return (datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=ago)).isoformat()


def export(client: Client, args) -> None:
    """The pieces as they come, to stdout or a file: nothing held whole."""
    pieces = client.export(
        args.stream,
        None if args.start is None else json.loads(args.start),
        None if args.end is None else json.loads(args.end),
        args.form,
        contains=args.contains,
        headers=args.where_header or (),
        json_condition=args.where,
    )
    first = next(pieces, b"")  # an error answer raises here, before a file is made
    out = open(args.output, "wb") if args.output else sys.stdout.buffer  # noqa: SIM115 - closed below
    try:
        out.write(first)
        for piece in pieces:
            out.write(piece)
        out.flush()
    finally:
        if args.output:
            out.close()


def consume(client: Client, args) -> None:
    """Read, print, acknowledge: a message is acknowledged once its line is written (at least
    once: a consumer stopped before that gets it again after its lease)."""
    group = client.reader_group(args.group)
    stream = group.consume(
        max_events=args.max if args.count is None else min(args.max, args.count),
        wait_ms=args.wait_ms,
        consumer=args.consumer,
        idle_stop=args.idle_stop,
    )
    message: Message
    owned: list[str] | None = None
    for done, message in enumerate(stream, 1):
        if owned is None:  # an ordered group: say which segments this consumer reads
            owned = group.assignments().get(args.consumer or "default", [])
            if owned:
                print(f"cbr: {args.consumer or 'default'} reads {', '.join(owned)}", file=sys.stderr, flush=True)
        print(_event_line(args, message.data), flush=True)
        message.ack()
        if args.count is not None and done >= args.count:
            stream.close()  # settles this read's acknowledgements; the rest of it comes again later
            break


# -- reader groups -----------------------------------------------------------------------------


def groups_list(client: Client, args) -> None:
    found = list(client.reader_groups(lag=True, tags=args.tags))
    rows = [
        [
            f"{g['scope']}/{g['name']}",
            g["retention_type"],
            g.get("lag_events", "-"),
            g.get("pending", "-"),
            ",".join(s["stream"] for s in g["streams"]),
        ]
        for g in found
    ]
    _out(args, found, _table(rows, ["GROUP", "RETENTION TYPE", "LAG", "PENDING", "STREAMS"]))


def _tag_filter(parser) -> None:
    parser.add_argument(
        "--tag",
        dest="tags",
        action="append",
        default=[],
        metavar="KEY[:VALUE]",
        help="only those with this tag (key:value, or key for any value; repeatable: all must match)",
    )


def _tag(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals:
        raise argparse.ArgumentTypeError(f"{text!r}: key=value")
    return key, value


def _tags_to_set(parser) -> None:
    parser.add_argument(
        "--tag",
        dest="set_tags",
        action="append",
        type=_tag,
        default=[],
        metavar="KEY=VALUE",
        help="a tag to set (repeatable)",
    )


def _start(value: str) -> str | dict:
    if value in ("head", "tail"):
        return value
    if value.startswith("{"):
        return {"stream_cuts": json.loads(value)}
    return {"time": value}


def groups_create(client: Client, args) -> None:
    scope, name = _split(args.group)
    retention_type = args.retention_type
    if retention_type is None:
        # on a consumption-based stream a plain reader would hold nothing back: a subscriber by
        # default there, and said
        holding = [s for s in args.streams if (client.stream(s).get("retention_policy") or {}).get("consumption_based")]
        retention_type = SUBSCRIBER if holding else "NONE"
        if holding:
            print(
                f"cbr: {', '.join(holding)} {'is' if len(holding) == 1 else 'are'} consumption-based: the group is a "
                f"subscriber ({SUBSCRIBER}); --retention-type NONE for a plain reader",
                file=sys.stderr,
            )
    config: dict[str, Any] = {"retention_type": retention_type, "start": _start(args.start)}
    for flag in (
        "ack_timeout_s",
        "max_deliveries",
        "on_poison",
        "ack_policy",
        "checkpoint_interval_s",
        "delivery",
        "consumer_timeout_s",
        "subscriber_timeout_s",
    ):
        if getattr(args, flag) is not None:
            config[flag] = getattr(args, flag)
    if args.backoff_s:
        config["backoff_s"] = [int(v) for v in args.backoff_s.split(",")]
    if args.set_tags:
        config["tags"] = dict(args.set_tags)
    if args.dispatch_events_per_s:
        config["dispatch_rate"] = {"events_per_s": args.dispatch_events_per_s}
    client.create_reader_group(scope, name, args.streams, **config)
    made = client.reader_group(args.group).info()
    streams = ", ".join(sub["stream"] for sub in made["streams"])
    _out(args, made, f"created reader group {args.group} ({made['retention_type']}) on {streams}")


def groups_describe(client: Client, args) -> None:
    info = client.reader_group(args.group).info()
    if args.json:
        _out(args, info)
        return
    head = {k: info[k] for k in ("retention_type", "generation", "ack_policy", "finished") if k in info}
    rows = [
        [p.get("stream", ""), p["segment"], p["floor"], p["head"], p["tail"], p["lag_events"], p["pending"]]
        for p in info.get("positions", [])
    ]
    print(
        f"{args.group}\n{_fields(head)}\n\n{_table(rows, ['STREAM', 'SEGMENT', 'FLOOR', 'HEAD', 'TAIL', 'LAG', 'PENDING'])}"
    )


def groups_consumers(client: Client, args) -> None:
    consumers = client.reader_group(args.group).consumers()
    if args.json:
        _out(args, consumers)
        return
    rows = [
        [
            c["name"] + (" (waiting)" if c["waiting"] else ""),
            c["last_read"] or "—",
            c["last_ack"] or "—",
            rate_text(c["read_rate"]),
            rate_text(c["ack_rate"]),
            c["in_flight"],
        ]
        for c in consumers
    ]
    print(_table(rows, ["CONSUMER", "LAST READ", "LAST ACK", "READ/S", "ACKED/S", "IN FLIGHT"]))


def groups_seek(client: Client, args) -> None:
    group = client.reader_group(args.group)
    if args.to in ("head", "tail"):
        info = group.seek(args.to)
    elif args.to.startswith("{"):
        info = group.seek(stream_cuts=json.loads(args.to))
    else:
        info = group.seek(time=args.to)
    _out(args, info, f"{args.group} moved to {args.to} (generation {info['generation']})")


def groups_checkpoint(client: Client, args) -> None:
    _out(args, client.reader_group(args.group).checkpoint(args.name, persist=args.persist))


def groups_delete(client: Client, args) -> int:
    return _delete(args, args.group, "releases its hold on retention", client.delete_reader_group)


# -- jobs and health ---------------------------------------------------------------------------


def cycle(client: Client, args) -> int:
    run = client.run_cycle(args.stream)
    if args.wait:
        while run["state"] in ("queued", "running"):
            time.sleep(0.5)
            run = client.cycle(run["id"])
    _out(args, run)
    return 1 if run["state"] == "failed" else 0


def health(client: Client, args) -> int:
    answer = client.readiness()
    human = "ready" if answer["ready"] else "not ready: " + ", ".join(answer["down"])
    _out(args, answer, human)
    return 0 if answer["ready"] else 1


# -- the command line --------------------------------------------------------------------------


def _split(name: str) -> tuple[str, str]:
    scope, _, rest = name.partition("/")
    if not scope or not rest or "/" in rest:
        raise ValueError(f"{name!r} is not scope/name")
    return scope, rest


# -- contexts and completion (no server asked) -------------------------------------------------


def context_commands(commands) -> None:
    context = commands.add_parser("context", help="saved servers and credentials: add, use, list, show, rm")
    sub = context.add_subparsers(required=True, metavar="ACTION")
    p = sub.add_parser("add", help="save a context (replacing one of that name)")
    p.add_argument("name", help="the context's name")
    p.add_argument("--url", dest="ctx_server", required=True, help="the server's URL")
    p.add_argument("--with-token", dest="ctx_token", help="an API token")
    p.add_argument("--with-api-key", dest="ctx_api_key", help="a scoped API key")
    p.add_argument("--with-user", dest="ctx_user", help="a user to sign in with")
    p.add_argument("--with-password", dest="ctx_password", help="that user's password")
    p.add_argument("--select", action="store_true", help="use it from now on")
    p.set_defaults(local=context_add)
    p = sub.add_parser("use", help="use this context from now on")
    p.add_argument("name", help="the context's name")
    p.set_defaults(local=context_use)
    sub.add_parser("list", help="the contexts, the one in use marked *").set_defaults(local=context_list)
    p = sub.add_parser("show", help="a context's settings, secrets masked (default: the one in use)")
    p.add_argument("name", nargs="?", help="the context's name")
    p.set_defaults(local=context_show)
    p = sub.add_parser("rm", help="forget a context")
    p.add_argument("name", help="the context's name")
    p.set_defaults(local=context_rm)


def context_add(args, parser) -> None:
    data = contexts.load()
    saved = {s: getattr(args, f"ctx_{s}") for s in contexts.SETTINGS if getattr(args, f"ctx_{s}")}
    data["contexts"][args.name] = saved
    if args.select or data["current"] is None:
        data["current"] = args.name
    contexts.save(data)
    using = " (in use)" if data["current"] == args.name else ""
    _out(args, contexts.shown(saved), f"saved context {args.name}{using} in {contexts.config_file()}")


def context_use(args, parser) -> None:
    data = contexts.load()
    if args.name not in data["contexts"]:
        raise ValueError(f"no context {args.name!r} (cbr context list shows them)")
    data["current"] = args.name
    contexts.save(data)
    _out(args, {"current": args.name}, f"using context {args.name}: {data['contexts'][args.name]['server']}")


def context_list(args, parser) -> None:
    data = contexts.load()
    rows = [
        [("* " if name == data["current"] else "  ") + name, ctx.get("server", ""), _credential(ctx)]
        for name, ctx in sorted(data["contexts"].items())
    ]
    _out(
        args,
        data["contexts"] and {"current": data["current"], "contexts": sorted(data["contexts"])} or {},
        _table(rows, ["CONTEXT", "SERVER", "CREDENTIAL"]),
    )


def _credential(ctx: dict) -> str:
    if ctx.get("token"):
        return "token"
    if ctx.get("api_key"):
        return "API key"
    return f"user {ctx['user']}" if ctx.get("user") else "-"


def context_show(args, parser) -> None:
    data = contexts.load()
    name = args.name or data["current"]
    if not name or name not in data["contexts"]:
        raise ValueError(f"no context {name!r} (cbr context list shows them)" if name else "no context in use")
    _out(args, {"name": name, **contexts.shown(data["contexts"][name])})


def context_rm(args, parser) -> None:
    data = contexts.load()
    if data["contexts"].pop(args.name, None) is None:
        raise ValueError(f"no context {args.name!r} (cbr context list shows them)")
    if data["current"] == args.name:
        data["current"] = None
    contexts.save(data)
    _out(args, {"removed": args.name}, f"removed context {args.name}")


def completion(args, parser) -> None:
    """A bash completion script made from this parser: every command's words and options."""
    words: dict[str, list[str]] = {}

    def walk(node: argparse.ArgumentParser, path: str) -> None:
        options = [o for action in node._actions for o in action.option_strings if o.startswith("--")]
        subs: list[str] = []
        for action in node._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    subs.append(name)
                    walk(child, f"{path} {name}")
        words[path] = subs + options

    walk(parser, "cbr")  # (bash's tables take no empty key)
    table = "\n".join(f'  ["{path}"]="{" ".join(found)}"' for path, found in sorted(words.items()))
    print(
        '# cbr\'s bash completion: eval "$(cbr completion bash)" (in ~/.bashrc to keep it)\n'
        f"declare -gA _cbr_words=(\n{table}\n)\n"
        "_cbr() {\n"
        '  local cur="${COMP_WORDS[COMP_CWORD]}" path=cbr w next\n'
        '  for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do\n'
        '    next="$path $w"\n'
        '    [[ -n "${_cbr_words[$next]+set}" ]] && path="$next"\n'
        "  done\n"
        '  COMPREPLY=($(compgen -W "${_cbr_words[$path]}" -- "$cur"))\n'
        "}\n"
        "complete -F _cbr cbr"
    )


def _parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="cbr", description=__doc__.split("\n\n")[0])
    # each: the flag, else its environment variable, else the context, else the default (contexts.py)
    top.add_argument("--server", help="the server's URL ($CBR_SERVER; default http://127.0.0.1:8000)")
    top.add_argument("--token", help="an API token ($CBR_TOKEN)")
    top.add_argument("--api-key", help="a scoped API key ($CBR_API_KEY)")
    top.add_argument("--user", help="sign in with a user ($CBR_USER)")
    top.add_argument("--password", help="the user's password ($CBR_PASSWORD)")
    top.add_argument("--context", help="a saved context's server and credentials ($CBR_CONTEXT; cbr context)")
    top.add_argument("--json", action="store_true", help="print the API's answers as JSON")
    commands = top.add_subparsers(required=True, metavar="COMMAND")

    def command(parent, name: str, run, help: str) -> argparse.ArgumentParser:
        parser = parent.add_parser(name, help=help, description=help)
        parser.set_defaults(run=run)
        # after the command too (`cbr streams list --json`); not given there, the top's stands
        parser.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="print the API's answers as JSON"
        )
        return parser

    def policy_flags(parser) -> None:
        parser.add_argument(
            "--limit-type",
            dest="limit_type",
            choices=["time", "size", "none"],
            help="what the limits count (default: what --min/--max are written in)",
        )
        parser.add_argument("--min", type=quantity, help="always kept: a duration (7d, 12h) or a size (50GB, 2GiB)")
        parser.add_argument("--max", type=quantity, help="never held beyond: a duration or a size")
        parser.add_argument(
            "--consumption-based",
            dest="consumption_based",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="whether subscribers' acknowledgements hold data back",
        )
        parser.add_argument(
            "--subscriber-timeout-s", dest="subscriber_timeout_s", type=_duration, help="seconds, or 30m, 2h, 7d"
        )
        parser.add_argument("--fallback-after-s", dest="fallback_after_s", type=_duration, help="seconds, or 30m, 2h")

    def formats(parser) -> None:
        parser.add_argument("--format", choices=["text", "pretty", "hex"], default="text", help="how payloads print")

    streams = commands.add_parser("streams", help="list, create, describe, change and delete streams")
    sub = streams.add_subparsers(required=True, metavar="ACTION")
    p = command(sub, "list", streams_list, "the streams")
    p.add_argument("--search", default="", help="streams whose scope or name holds this text")
    p.add_argument("--scope", default="", help="one scope's streams")
    _tag_filter(p)
    p = command(sub, "create", streams_create, "create a stream, with its retention policy")
    _tags_to_set(p)
    p.add_argument("stream", help="scope/name")
    p.add_argument("--segments", type=int, default=1, help="how many segments (default 1)")
    p.add_argument(
        "--cleanup-policy",
        choices=["delete", "compact", "compact,delete"],
        help="compact: a compacted stream (default: the scope's, else delete)",
    )
    p.add_argument("--description", default="", help="what the stream is for")
    p.add_argument(
        "--publish-events-per-s",
        dest="publish_events_per_s",
        type=float,
        help="its publish rate: publishes over it are refused with 429 (events/s)",
    )
    p.add_argument(
        "--publish-bytes-per-s",
        dest="publish_bytes_per_s",
        type=quantity_bytes,
        help="its publish rate in payload bytes/s: a number, or 1MB, 512KiB",
    )
    p.add_argument(
        "--message-ttl-s",
        dest="message_ttl_s",
        type=int,
        help="how long its events without their own ttl_s live (seconds)",
    )
    policy_flags(p)
    p = command(sub, "describe", streams_describe, "a stream: cuts, sizes, policy")
    p.add_argument("stream", help="scope/name")
    p = command(sub, "policy", streams_policy, "show a stream's retention policy, or set it with the flags")
    p.add_argument("stream", help="scope/name")
    policy_flags(p)
    p = command(sub, "seal", streams_seal, "seal the active chunks now (operators)")
    p.add_argument("stream", help="scope/name")
    p = command(sub, "offload", streams_offload, "copy what a stream has sealed to long-term storage now (operators)")
    p.add_argument("stream", help="scope/name")
    p = command(sub, "segments", streams_segments, "a stream's segments: key ranges, epochs, sealed or active")
    p.add_argument("stream", help="scope/name")
    p = command(sub, "scale", streams_scale, "split or merge a stream's segments (operators)")
    p.add_argument("stream", help="scope/name")
    p.add_argument("--split", metavar="SEGMENT", help="split this active segment into equal parts")
    p.add_argument("--parts", type=int, default=2, help="with --split: how many (default 2)")
    p.add_argument("--merge", nargs="+", metavar="SEGMENT", help="merge these neighbouring active segments")
    p.add_argument("--seal", nargs="+", metavar="SEGMENT", help="seal these, with --ranges: any scale")
    p.add_argument("--ranges", help='with --seal: the new key ranges as JSON, e.g. "[[0, 0.25], [0.25, 0.5]]"')
    p.add_argument("--epoch", type=int, help="with --seal: the epoch last seen (refused if it moved on)")
    p = command(
        sub, "scaling-policy", streams_scaling_policy, "show how a stream scales by itself, or set it with --type"
    )
    p.add_argument("stream", help="scope/name")
    p.add_argument("--type", choices=["fixed", "by_event_rate", "by_byte_rate"], help="set the policy")
    p.add_argument("--target-rate", type=float, help="per segment: events/s (by_event_rate) or KiB/s (by_byte_rate)")
    p.add_argument("--scale-factor", type=int, help="a hot segment splits into at most this many (default 2)")
    p.add_argument("--min-segments", type=int, help="never fewer active segments (default 1)")
    p = command(sub, "scalings", streams_scalings, "a stream's scaling history, newest first")
    p.add_argument("stream", help="scope/name")
    p = command(sub, "compact", streams_compact, "compact a compacted stream now")
    p.add_argument("stream", help="scope/name")
    p.add_argument("--wait", action="store_true", help="until the run is done")
    p = command(sub, "republish", streams_republish, "dead letters back to the streams they came from, each once")
    p.add_argument("stream", help="the dead-letter stream, scope/name-dlq")
    p.add_argument("--event", action="append", metavar="SEGMENT:OFFSET", help="this dead letter (repeatable)")
    p.add_argument("--all", action="store_true", help="every dead letter the stream holds")
    p = command(sub, "purge", streams_purge, "delete a stream's events, all or those before a time (admins)")
    p.add_argument("stream", help="scope/name")
    p.add_argument(
        "--before",
        help="only what was published before this: an ISO 8601 time (UTC without an offset) or how long ago (7d)",
    )
    p.add_argument("--yes", action="store_true", help="really")
    p = command(sub, "delete", streams_delete, "delete a stream and its events (admins)")
    p.add_argument("stream", help="scope/name")
    p.add_argument("--yes", action="store_true", help="really")

    p = command(commands, "publish", publish, "publish one event per line of stdin or of a file")
    p.add_argument("stream", help="scope/name")
    p.add_argument("--file", help="read this file instead of stdin")
    p.add_argument(
        "--whole",
        action="store_true",
        help="the whole input is one event (bytes as they are); a --file above the JSON limit goes as a large event",
    )
    p.add_argument(
        "--large", action="store_true", help="the --file is one large event, streamed (any size up to the server's cap)"
    )
    p.add_argument("--routing-key", dest="routing_key", help="events with one routing key keep their order")
    p.add_argument("--key", help="the compaction key")
    p.add_argument("--header", action="append", metavar="NAME=VALUE", help="a header of every event (repeatable)")
    p.add_argument("--delay-ms", dest="delay_ms", type=int, help="reader groups get them this much later")
    p.add_argument(
        "--ttl-s",
        dest="ttl_s",
        type=float,
        help="they live this long (from their delivery time): past it, groups that have not processed them never get them",
    )
    p.add_argument("--batch", type=int, default=1000, help="events per request")

    p = command(commands, "tail", tail, "print a stream's events (a plain read: nothing acknowledged)")
    p.add_argument("stream", help="scope/name")
    p.add_argument(
        "--from",
        dest="start",
        default="head",
        help="head, tail, a cut as JSON ('{\"0\": 120}'), an ISO 8601 time (UTC without an offset) or how long ago (15m, 2h)",
    )
    p.add_argument("--limit", type=int, help="stop after this many")
    p.add_argument("--follow", "-f", action="store_true", help="wait for new events")
    p.add_argument("--contains", help="only events whose payload contains this text")
    p.add_argument(
        "--header",
        dest="where_header",
        action="append",
        metavar="NAME:VALUE",
        help="only events with this header (repeatable)",
    )
    p.add_argument("--where", metavar="CONDITION", help="only events whose JSON payload meets it: '$.amount>100'")
    p.add_argument(
        "--poll-s", dest="poll_s", type=float, default=1.0, help="with --follow, against a server that does not wait"
    )
    formats(p)

    p = command(commands, "export", export, "write a stream's events as JSON lines or CSV (filtered as tail's)")
    p.add_argument("stream", help="scope/name")
    p.add_argument("--from", dest="start", help="a cut as JSON (default: the head), e.g. '{\"0\": 120}'")
    p.add_argument("--to", dest="end", help="a cut as JSON, not included (default: the tail)")
    p.add_argument("--format", dest="form", choices=["jsonl", "csv"], default="jsonl", help="default jsonl")
    p.add_argument("--output", "-o", help="write to this file (default: stdout)")
    p.add_argument("--contains", help="only events whose payload contains this text")
    p.add_argument(
        "--header", dest="where_header", action="append", metavar="NAME:VALUE", help="only events with this header"
    )
    p.add_argument("--where", metavar="CONDITION", help="only events whose JSON payload meets it: '$.amount>100'")

    p = command(commands, "consume", consume, "read a reader group's events, print and acknowledge each")
    p.add_argument("group", help="scope/name")
    p.add_argument("--count", type=int, help="stop after this many")
    p.add_argument("--idle-stop", dest="idle_stop", action="store_true", help="stop when a read finds nothing")
    p.add_argument("--max", type=int, default=100, help="events per read")
    p.add_argument(
        "--wait-ms",
        dest="wait_ms",
        type=int,
        default=None,
        help="how long a read waits for events (default 30000, 1000 with --idle-stop)",
    )
    p.add_argument("--consumer", help="this consumer's name (the console shows it)")
    formats(p)

    groups = commands.add_parser(
        "groups", help="reader groups: list, create, describe, consumers, seek, checkpoint, delete"
    )
    sub = groups.add_subparsers(required=True, metavar="ACTION")
    _tag_filter(command(sub, "list", groups_list, "the reader groups"))
    p = command(sub, "create", groups_create, "create a reader group")
    _tags_to_set(p)
    p.add_argument("group", help="scope/name")
    p.add_argument("--stream", dest="streams", action="append", required=True, help="scope/name (repeatable)")
    p.add_argument(
        "--retention-type",
        default=None,
        choices=["NONE", SUBSCRIBER, "MANUAL_RELEASE_AT_USER_STREAMCUT"],
        help=f"default: {SUBSCRIBER} when a stream is consumption-based, else NONE",
    )
    p.add_argument("--start", default="head", help="head, tail, an ISO 8601 time, or stream cuts as JSON")
    p.add_argument("--ack-timeout-s", dest="ack_timeout_s", type=int, help="a delivery's lease, seconds")
    p.add_argument("--max-deliveries", dest="max_deliveries", type=int, help="deliveries before an event is poison")
    p.add_argument(
        "--on-poison",
        dest="on_poison",
        choices=["dead_letter", "skip", "halt"],
        help="what poison does (default dead_letter)",
    )
    p.add_argument(
        "--delivery",
        choices=["shared", "ordered"],
        help="ordered: each segment read by one consumer at a time (per-key order in what consumers process)",
    )
    p.add_argument(
        "--consumer-timeout-s",
        dest="consumer_timeout_s",
        type=int,
        help="ordered: a consumer silent this long gives up its segments (once its leases expire)",
    )
    p.add_argument(
        "--subscriber-timeout-s",
        dest="subscriber_timeout_s",
        type=_duration,
        help="a subscriber's own subscriber timeout, seconds or 30m, 2h, 7d: its cut older than this "
        "holds nothing back (wins over its streams' policies)",
    )
    p.add_argument(
        "--ack-policy", dest="ack_policy", choices=["explicit", "none"], help="none: at most once, no acknowledgements"
    )
    p.add_argument(
        "--checkpoint-interval-s", dest="checkpoint_interval_s", type=int, help="AUTOMATIC: checkpoint this often"
    )
    p.add_argument("--backoff-s", dest="backoff_s", help="seconds per redelivery, e.g. 1,5,30")
    p.add_argument(
        "--dispatch-events-per-s",
        dest="dispatch_events_per_s",
        type=float,
        help="its dispatch rate: its reads hand out no more than this (events/s)",
    )
    p = command(sub, "describe", groups_describe, "a group: settings, and per segment floor, head, tail, lag")
    p.add_argument("group", help="scope/name")
    p = command(sub, "consumers", groups_consumers, "a group's consumers: rates over the last minute, in flight")
    p.add_argument("group", help="scope/name")
    p = command(sub, "seek", groups_seek, "move a group (operators): head, tail, a time or stream cuts")
    p.add_argument("group", help="scope/name")
    p.add_argument("to", help='head, tail, an ISO 8601 time, or stream cuts as JSON: \'{"shop/orders": {"0": 5}}\'')
    p = command(sub, "checkpoint", groups_checkpoint, "record a checkpoint of the group's floors now")
    p.add_argument("group", help="scope/name")
    p.add_argument("name", help="the checkpoint's name")
    p.add_argument("--persist", action="store_true", help="kept until deleted (or wholly before the heads)")
    p = command(sub, "delete", groups_delete, "delete a group, releasing its hold on retention")
    p.add_argument("group", help="scope/name")
    p.add_argument("--yes", action="store_true", help="really")

    context_commands(commands)
    p = commands.add_parser("completion", help='a shell completion script: eval "$(cbr completion bash)"')
    p.add_argument("shell", choices=["bash"], help="the shell (bash)")
    p.set_defaults(local=completion)

    p = command(commands, "cycle", cycle, "run a retention cycle (of one stream with --stream)")
    p.add_argument("--stream", help="only this stream (scope/name); default: every stream with a policy")
    p.add_argument("--wait", action="store_true", help="until it is done (exit 1 if it failed)")
    command(commands, "health", health, "whether the service can do its work (exit 1 when not)")
    return top


if __name__ == "__main__":
    sys.exit(main())

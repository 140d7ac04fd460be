"""A small Python client of CBR's REST API: publish, consume at least once, checkpoint.

Standard library only (orjson is used when installed: large reads decode faster; crc32c too: a
binary read's events are checked against their CRC), and it imports
nothing of the server: install it alone (`pip install ./client` from a checkout, anywhere Python
3.11+ runs; `make venv` installs it with the project), or copy this one file into a program.
The `cbr` command line (`cbr_client.cli`) is built on it.

    from cbr_client import Client

    cbr = Client("http://127.0.0.1:8000", username="admin", password="…")
    cbr.create_stream("shop/orders", segment_count=4, exist_ok=True)
    cbr.publish("shop/orders", ["first", {"payload": "second", "routing_key": "user-7"}])

    # a program that only consumes one group, or only publishes, is better off with an API key:
    worker = Client("http://127.0.0.1:8000", api_key="AbCd1234.…")

    group = cbr.create_reader_group("shop/billing", ["shop/orders"], exist_ok=True,
                                    retention_type="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT")
    for message in group.consume(max_events=100, wait_ms=1000, idle_stop=True):
        with message:                    # acked when the block ends; an exception nacks it
            handle(message.payload)      # (and is swallowed: the event comes again later)

Acknowledgements are sent in batches: those of one read go in one request before the next read
(and when the loop ends). A consumer that dies before that is covered by at-least-once: the
unacknowledged events come again once their leases expire.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import functools
import http.client
import json
import logging
import struct
import time
import urllib.parse
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, cast

try:  # optional: where orjson is installed, large reads decode several times faster
    import orjson
except ImportError:  # pragma: no cover - the standard library does the same, slower
    orjson = None  # type: ignore[assignment]  # the optional-import idiom: None stands for "not installed"
try:  # optional: where crc32c is installed (the server's own), a binary read's events are checked
    from crc32c import crc32c as _crc32c
except ImportError:  # pragma: no cover - the server checked them when it read them
    _crc32c = None  # type: ignore[assignment]


_log = logging.getLogger("cbr_client")


def _scope_and_name(full_or_scope: str, name: str | None) -> tuple[str, str]:
    """("scope", "name") from "scope/name", or from the two given apart (the older form)."""
    if name is not None:
        if not isinstance(name, str):
            raise TypeError(f"the name must be a str, not {name!r} (give settings by keyword)")
        return full_or_scope, name
    scope, slash, rest = full_or_scope.partition("/")
    if not slash or not scope or not rest or "/" in rest:
        raise ValueError(f"{full_or_scope!r} is not scope/name")
    return scope, rest


def _seconds(retry_after: str | None) -> float | None:
    """`Retry-After` as seconds (CBR sends a number of them; an HTTP date is not waited for)."""
    try:
        return max(0.0, float(retry_after)) if retry_after is not None else None
    except ValueError:
        return None


class CBRError(Exception):
    """An error answer: `status` (HTTP), `code`, `field` (what was wrong), the whole `body`."""

    def __init__(self, status: int, body: dict):
        self.status = status
        self.body = body
        self.code = body.get("code", "error")
        self.field = body.get("field")
        super().__init__(f"{status} {self.code}: {body.get('message', body)}")


class Client:
    IDLE_S = 1.0  # reopen a keep-alive connection idle longer than this (gunicorn keeps 2 s)
    # a text or bytes event larger than this is published alone as a large event (`publish_large`):
    # the server's CBR_MAX_EVENT_BYTES by default
    max_event_bytes = 1024 * 1024
    RETRY_MAX_S = 5.0  # the longest pause between two sendings of a request the server said to retry
    WAIT_MARGIN_S = 15.0  # a waiting read's answer may come this long after its wait ends

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        retry_for_s: float = 30.0,
    ):
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https"):
            raise ValueError(f"base_url must be http(s)://…, not {base_url!r}")
        self._scheme, self._netloc = url.scheme, url.netloc
        self._prefix = url.path.rstrip("/") + "/api/v1/"
        self._timeout = timeout
        self.retry_for_s = retry_for_s  # how long a request is sent again when the server says to (`_exchange`)
        self._conn: http.client.HTTPConnection | None = None
        self._used = 0.0
        self.token = token
        self.read_carries_acks = True  # False once a server (an older one) refuses a read's `ack`
        self.binary_reads = True  # reads answered in binary (READ_BATCH); False once a server does not offer it
        self.api_key = api_key  # a key scoped to one reader group or to publishing (docs/security.md)
        if token is None and api_key is None and username is not None:
            self.token = self._object("POST", "auth/token/", {"username": username, "password": password})["token"]

    # -- plumbing ------------------------------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is not None and time.monotonic() - self._used > self.IDLE_S:
            self.close()  # the server may have closed an idle keep-alive connection meanwhile
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self._netloc, timeout=self._timeout)
        return self._conn

    def request(self, method: str, path: str, body: object = None, accept: str = "application/json") -> dict | list:
        """One API call; answers the decoded JSON (an object, or a list where the endpoint answers
        one, e.g. a stream's compaction runs), raises CBRError for an error answer. A dropped
        keep-alive connection is reopened once (only for requests that are safe to repeat: reads,
        and acks, which are idempotent). `accept`: a read may ask for its answer in binary
        (`READ_BATCH`), decoded to the same object as its JSON."""
        status, binary, raw = self._exchange(method, path, body, accept)
        return _answer(status, raw, decode_read_batch if binary else None)

    def _exchange(
        self, method: str, path: str, body: object, accept: str, wait_s: float = 0.0
    ) -> tuple[int, bool, bytes]:
        """Send one request; (its status, whether the answer is a binary read batch, its body).
        `wait_s`: how long the server may hold it before answering (a waiting read): the socket's
        timeout is that much longer.

        What the server says to send again is sent again: a 503 or 429 with `Retry-After` (the
        database or Redis lost for a moment, too many reads waiting: nothing was applied, docs/
        api.md). After `Retry-After`, then twice as long each time up to `RETRY_MAX_S`, for at
        most `retry_for_s` in all (0: never); a wait that would pass that budget is not begun,
        and the answer is the caller's."""
        deadline = time.monotonic() + self.retry_for_s
        pause = 0.0
        while True:
            status, binary, raw, retry_after = self._send_once(method, path, body, accept, wait_s)
            if retry_after is None or status not in (429, 503):
                return status, binary, raw
            pause = min(self.RETRY_MAX_S, max(retry_after, pause * 2))
            if time.monotonic() + pause > deadline:
                return status, binary, raw
            _log.warning("%s %s answered %d: sent again in %.1f s", method, path, status, pause)
            time.sleep(pause)

    def _send_once(
        self, method: str, path: str, body: object, accept: str, wait_s: float
    ) -> tuple[int, bool, bytes, float | None]:
        """One request sent (again once over a new connection if a kept-alive one was dropped);
        as `_exchange`, and the answer's `Retry-After` in seconds (None without one)."""
        timeout = max(self._timeout, wait_s + self.WAIT_MARGIN_S) if wait_s else self._timeout
        data = None if body is None else _dumps(body)
        headers = {"Content-Type": "application/json", "Accept": accept}
        if self.api_key:
            headers["Authorization"] = f"Api-Key {self.api_key}"
        elif self.token:
            headers["Authorization"] = f"Token {self.token}"
        for attempt in (0, 1):
            conn = self._connection()
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            try:
                conn.request(method, self._prefix + path, body=data, headers=headers)
            except (ConnectionResetError, BrokenPipeError):  # not sent: safe to send again
                self.close()
                if attempt:
                    raise
                continue
            try:
                response = conn.getresponse()
                raw = response.read()
                self._used = time.monotonic()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt or not _repeatable(method, path):
                    raise
            except http.client.HTTPException as exc:  # e.g. an answer cut off mid-body by a dying server
                self.close()
                if attempt or not _repeatable(method, path):
                    raise ConnectionError(f"the connection broke while reading the answer: {exc!r}") from exc
        binary = response.status < 400 and response.getheader("Content-Type", "").startswith(READ_BATCH)
        return response.status, binary, raw, _seconds(response.getheader("Retry-After"))

    def _object(self, method: str, path: str, body: object = None, accept: str = "application/json") -> dict:
        """`request` for an endpoint that answers a JSON object (all but a few, e.g. a stream's
        compaction runs)."""
        return cast(dict, self.request(method, path, body, accept))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- streams -------------------------------------------------------------------------------

    def create_stream(
        self, stream: str, name: str | None = None, segment_count: int = 1, *, exist_ok: bool = False, **settings
    ) -> dict:
        """Create a stream, "scope/name" as everywhere else in the client
        (`create_stream("shop/orders", segment_count=4)`; `create_stream("shop", "orders", …)`
        still works). `exist_ok`: a stream of that name already there is answered as it is (its
        settings are not compared with these), not raised as 409 `duplicate`: a script can run
        twice."""
        scope, name = _scope_and_name(stream, name)
        try:
            return self._object(
                "POST", "streams/", {"scope": scope, "name": name, "segment_count": segment_count, **settings}
            )
        except CBRError as exc:
            if not (exist_ok and exc.status == 409 and exc.code == "duplicate"):
                raise
            return self.stream(f"{scope}/{name}")

    def stream(self, stream: str) -> dict:
        return self._object("GET", f"streams/{stream}/")

    def streams(self, search: str = "", scope: str = "", tags: Iterable[str] = ()) -> Iterator[dict]:
        """Every stream (a scope's, or those whose scope or name contains `search`, or that carry
        every tag of `tags`: "key:value", or "key" for any value), page by page."""
        return self._pages("streams/", {"search": search, "scope": scope}, tags)

    def purge(self, stream: str, before: str | datetime.datetime | None = None) -> dict:
        """Delete a stream's events (admins): all it holds, or those published before `before`
        (an ISO 8601 time with its offset, or an aware datetime). A manual truncation, recorded as
        one: its record (`"id": None` when there was nothing to delete)."""
        if before is None:
            to: str | dict = "tail"
        else:
            to = {"time": before.isoformat() if isinstance(before, datetime.datetime) else before}
        return self._object("POST", f"streams/{stream}/purge/", {"to": to})

    def export(
        self,
        stream: str,
        start: dict[str, int] | None = None,
        end: dict[str, int] | None = None,
        form: str = "jsonl",
        contains: str | None = None,
        headers: Iterable[str] = (),
        json_condition: str | None = None,
    ) -> Iterator[bytes]:
        """A stream's events from `start` (default the head) up to `end` (default the tail), as
        JSON lines or CSV (`form`), filtered as a search is, in pieces as they come: an export of
        any size is never held whole. An error answer raises CBRError before the first piece."""
        query = {"format": form, **_search_query(contains, headers, json_condition)}
        if start is not None:
            query["from"] = json.dumps(start)
        if end is not None:
            query["to"] = json.dumps(end)
        path = self._prefix + f"streams/{stream}/events/export/?" + urllib.parse.urlencode(query, doseq=True)
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._netloc, timeout=self._timeout)  # a connection of its own, read to its end
        try:
            conn.request("GET", path, headers=self._credentials())
            response = conn.getresponse()
            if response.status >= 400:
                _answer(response.status, response.read(), None)  # raises
            while piece := response.read(65536):
                yield piece
        finally:
            conn.close()

    def _credentials(self) -> dict[str, str]:
        if self.api_key:
            return {"Authorization": f"Api-Key {self.api_key}"}
        return {"Authorization": f"Token {self.token}"} if self.token else {}

    def republish(self, stream: str, positions: Iterable[tuple[str, int]] | None = None) -> dict:
        """Dead letters of `stream` (a `<name>-dlq`) back to the streams they came from, each once:
        those at `positions` ((segment, offset) each), or all (None). `{republished, skipped}`."""
        body: dict = (
            {"all": True} if positions is None else {"events": [{"segment": s, "offset": o} for s, o in positions]}
        )
        return self._object("POST", f"streams/{stream}/republish/", body)

    def delete_stream(self, stream: str) -> None:
        """Delete a stream and its data (admins)."""
        self.request("DELETE", f"streams/{stream}/")

    def retention_policy(self, stream: str) -> dict:
        return self._object("GET", f"streams/{stream}/retention-policy/")

    def events(
        self,
        stream: str,
        start: dict[str, int] | None = None,
        limit: int = 100,
        wait_ms: int = 0,
        from_time: str | datetime.datetime | None = None,
        contains: str | None = None,
        headers: Iterable[str] = (),
        json_condition: str | None = None,
    ) -> dict:
        """A plain read from `start` (a stream cut; None: the head) or from `from_time` (the first
        events published at or after it: an ISO 8601 time with its offset, or an aware datetime):
        `{events, next_cut}`, no delivery and no acknowledgement. Pass `next_cut` as the next
        `start`. `wait_ms`: with nothing there yet, the server waits that long for an event to be
        published. A search: `contains` (text in the payload), `headers` (`name:value` each) and
        `json_condition` (`$.amount>100`) keep only the events that match all of them; each page
        examines a bounded number of events (`examined`), its `next_cut` going on from there."""
        query = {"limit": str(limit), **_search_query(contains, headers, json_condition)}
        if start is not None:
            query["from"] = json.dumps(start)
        if from_time is not None:
            query["from_time"] = from_time.isoformat() if isinstance(from_time, datetime.datetime) else from_time
        if wait_ms:
            query["wait_ms"] = str(wait_ms)
        path = f"streams/{stream}/events/?" + urllib.parse.urlencode(query, doseq=True)
        status, _, raw = self._exchange("GET", path, None, "application/json", wait_ms / 1000)
        return cast(dict, _answer(status, raw, None))

    def run_cycle(self, stream: str | None = None) -> dict:
        """Queue a retention cycle (of every stream with a policy, or of one): the cycle's record;
        follow it with `cycle(id)`."""
        return self._object("POST", "retention/cycles/", {"stream": stream} if stream else {})

    def cycle(self, cycle_id: int) -> dict:
        return self._object("GET", f"retention/cycles/{cycle_id}/")

    def readiness(self) -> dict:
        """What `/readyz` answers (`ready`, `down` and each part), whether ready or not."""
        try:
            return self._object("GET", "readyz")
        except CBRError as exc:
            if exc.status == 503 and "ready" in exc.body:
                return exc.body
            raise

    def _pages(self, path: str, query: dict[str, str], tags: Iterable[str] = ()) -> Iterator[dict]:
        params = {k: v for k, v in query.items() if v}
        filters = [("tag", t) for t in tags]
        offset, limit = 0, 200
        while True:
            listed = [*params.items(), *filters, ("limit", limit), ("offset", offset)]
            page = self._object("GET", path + "?" + urllib.parse.urlencode(listed))
            yield from page["results"]
            if not page.get("next"):
                return
            offset += limit

    def publish(
        self,
        stream: str,
        events: Iterable[str | bytes | dict],
        *,
        delay_ms: int | None = None,
        deliver_at: str | int | None = None,
        ttl_s: float | None = None,
    ) -> list[dict]:
        """Append events (text, bytes, or full event objects); answers their positions. With
        `delay_ms` or `deliver_at` (ISO 8601 or epoch ms), every event of the call is delayed:
        reader groups receive it only from then on. With `ttl_s`, every event of the call lives
        that long (from its delivery time when delayed): past it, a group that has not processed
        it never receives it. An event object's own settings win."""
        when: dict[str, str | int] = {"delay_ms": delay_ms} if delay_ms is not None else {}
        if deliver_at is not None:
            when = {"deliver_at": deliver_at}
        events = list(events)
        large = [i for i, e in enumerate(events) if isinstance(e, str | bytes) and len(e) > self.max_event_bytes]
        if large:  # each above the JSON limit published alone, as a large event, in its place
            positions: list[dict] = []
            start = 0
            for i in large + [len(events)]:
                if events[start:i]:
                    positions += self.publish(
                        stream, events[start:i], delay_ms=delay_ms, deliver_at=deliver_at, ttl_s=ttl_s
                    )
                if i < len(events):
                    payload = cast(str | bytes, events[i])  # (one of `large`: text or bytes)
                    data = payload.encode() if isinstance(payload, str) else payload
                    positions.append(
                        self.publish_large(stream, data, delay_ms=delay_ms, deliver_at=deliver_at, ttl_s=ttl_s)
                    )
                start = i + 1
            return positions
        body = {"events": [_with(_with(_event(e), when), {} if ttl_s is None else {"ttl_s": ttl_s}) for e in events]}
        return self._object("POST", f"streams/{stream}/events/", body)["positions"]

    def publish_large(
        self,
        stream: str,
        payload: bytes | BinaryIO,
        *,
        routing_key: str | None = None,
        key: str | None = None,
        delay_ms: int | None = None,
        deliver_at: str | int | None = None,
        ttl_s: float | None = None,
    ) -> dict:
        """One large event (`POST …/events/raw/`): its payload bytes, or a binary file (read from
        where it stands to its end, sent in pieces: never read whole into memory), up to the
        server's `CBR_MAX_LARGE_EVENT_BYTES`. Answers its position, with its `payload_url`.
        Readers get `payload_url` and `payload_size` in its place (`Message.payload` fetches it)."""
        fields = {
            "routing_key": routing_key,
            "key": key,
            "delay_ms": delay_ms,
            "deliver_at": deliver_at,
            "ttl_s": ttl_s,
        }
        query = urllib.parse.urlencode({k: v for k, v in fields.items() if v is not None})
        if isinstance(payload, bytes | bytearray | memoryview):
            size = len(payload)
        else:
            at = payload.tell()
            size = payload.seek(0, 2) - at
            payload.seek(at)
        path = self._prefix + f"streams/{stream}/events/raw/" + (f"?{query}" if query else "")
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size), **self._credentials()}
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._netloc, timeout=self._timeout, blocksize=LARGE_PIECE_BYTES)  # its own: a long upload
        try:
            conn.request("POST", path, body=payload, headers=headers)
            response = conn.getresponse()
            return _answer(response.status, response.read())["positions"][0]
        finally:
            conn.close()

    def payload(self, url: str, first: int | None = None, last: int | None = None) -> Iterator[bytes]:
        """An event's payload from its `payload_url` (a large event's), in pieces as they come:
        whole, or bytes `first` to `last` (inclusive; `last` None: to the end). A payload that
        does not match what was published ends in a ConnectionError, never as if whole."""
        headers = self._credentials()
        if first is not None or last is not None:
            headers["Range"] = f"bytes={first or 0}-{'' if last is None else last}"
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._netloc, timeout=self._timeout)
        try:
            conn.request("GET", self._prefix.removesuffix("/api/v1/") + url, headers=headers)
            response = conn.getresponse()
            if response.status >= 400:
                _answer(response.status, response.read())  # raises
            while True:
                try:
                    piece = response.read(LARGE_PIECE_BYTES)
                except http.client.IncompleteRead as cut:
                    raise ConnectionError(f"the payload was cut short: {cut!r}") from cut
                if not piece:
                    break
                yield piece
        finally:
            conn.close()

    def set_retention_policy(self, stream: str, **policy) -> dict:
        return self._object("PUT", f"streams/{stream}/retention-policy/", policy)

    def scope_defaults(self, scope: str) -> dict:
        """The settings a scope gives its streams that set none of their own (null: none)."""
        return self._object("GET", f"scopes/{scope}/defaults/")

    def set_scope_defaults(self, scope: str, **settings) -> dict:
        """Replace a scope's defaults (`retention_policy`, `cleanup_policy`, compaction settings):
        a setting left out has none. Inheriting streams follow at once."""
        return self._object("PUT", f"scopes/{scope}/defaults/", settings)

    def clear_scope_defaults(self, scope: str) -> None:
        self.request("DELETE", f"scopes/{scope}/defaults/")

    def seal(self, stream: str) -> list[dict]:
        """Seal the stream's active chunks now (operators): `[{segment, chunk}]` sealed."""
        return self._object("POST", f"streams/{stream}/seal/", {})["sealed"]

    def offload(self, stream: str) -> dict:
        """Copy what the stream has sealed to long-term storage now (operators): `{files, bytes}`
        queued for the worker (a `CBRError` 409 `no_tier` when the deployment has none)."""
        return self._object("POST", f"streams/{stream}/offload/", {})

    def segments(self, stream: str) -> list[dict]:
        """The stream's segments, active or still holding data, oldest epoch first: `{id,
        key_range: [lo, hi], epoch, sealed, predecessors}` each."""
        return self.stream(stream)["segments"]

    def scale(self, stream: str, seal: list[str], new_ranges: list[list[float]], epoch: int | None = None) -> dict:
        """Seal these active segments and make successors over `new_ranges` (operators):
        `{epoch, segments}`, the new epoch and its new segments. `epoch`: the stream's epoch as
        last seen (a `CBRError` 409 `epoch_mismatch` if it has moved on)."""
        body: dict[str, Any] = {"seal": list(seal), "new_ranges": [list(r) for r in new_ranges]}
        if epoch is not None:
            body["epoch"] = epoch
        return self._object("POST", f"streams/{stream}/scale/", body)

    def split(self, stream: str, segment: str, parts: int = 2) -> dict:
        """Split one active segment into `parts` equal ranges (`scale`, at the epoch just read)."""
        detail = self.stream(stream)
        lo, hi = next(s["key_range"] for s in detail["segments"] if s["id"] == segment)
        cuts = [lo + (hi - lo) * i / parts for i in range(parts)] + [hi]
        return self.scale(stream, [segment], [[a, b] for a, b in zip(cuts, cuts[1:])], detail["epoch"])

    def merge(self, stream: str, segments: list[str]) -> dict:
        """Merge neighbouring active segments into one (`scale`, at the epoch just read)."""
        detail = self.stream(stream)
        ranges = [s["key_range"] for s in detail["segments"] if s["id"] in segments]
        lo, hi = min(r[0] for r in ranges), max(r[1] for r in ranges)
        return self.scale(stream, list(segments), [[lo, hi]], detail["epoch"])

    def set_scaling_policy(self, stream: str, type: str, **settings) -> dict:
        """How the stream scales by itself (operators): `type` "fixed", "by_event_rate" or
        "by_byte_rate", with `target_rate` (events/s, or KiB/s, per segment), `scale_factor` and
        `min_segments`; returns the stream, its `scaling_policy` as stored."""
        return self._object("PUT", f"streams/{stream}/scaling-policy/", {"type": type, **settings})

    def scalings(self, stream: str) -> Iterator[dict]:
        """The stream's scales, newest first: `{epoch, at, sealed, created, trigger, rule,
        rates, by}` each."""
        return self._pages(f"streams/{stream}/scalings/", {})

    def compact(self, stream: str) -> dict:
        """Queue a compaction run of a compacted stream now (operators): the run, as queued."""
        return self._object("POST", f"streams/{stream}/compactions/", {})

    def compactions(self, stream: str) -> list[dict]:
        """The stream's compaction runs, newest first (the first page)."""
        return self._object("GET", f"streams/{stream}/compactions/")["results"]

    # -- reader groups -------------------------------------------------------------------------

    def create_reader_group(
        self, group: str, *args: Any, exist_ok: bool = False, streams: list[str] | None = None, **config
    ) -> ReaderGroup:
        """Create a reader group, "scope/name", on its streams:
        `create_reader_group("shop/billing", ["shop/orders"], retention_type=…)`
        (`create_reader_group("shop", "billing", ["shop/orders"], …)` still works). `exist_ok`: a
        group of that name already there is a handle on it (its settings are not compared), not
        a 409 `duplicate`."""
        if args and isinstance(args[0], str):  # (scope, name, streams): the older form
            scope, name = _scope_and_name(group, args[0])
            args = args[1:]
        else:
            scope, name = _scope_and_name(group, None)
        if args:
            if streams is not None or len(args) > 1:
                raise TypeError("create_reader_group takes the group, then its streams (a list)")
            streams = args[0]
        if streams is None:
            raise TypeError("create_reader_group needs the streams it consumes")
        try:
            self.request("POST", "reader-groups/", {"scope": scope, "name": name, "streams": streams, **config})
        except CBRError as exc:
            if not (exist_ok and exc.status == 409 and exc.code == "duplicate"):
                raise
        return ReaderGroup(self, f"{scope}/{name}")

    def reader_groups(self, lag: bool = False, tags: Iterable[str] = ()) -> Iterator[dict]:
        """Every reader group (or those that carry every tag of `tags`: "key:value", or "key"),
        page by page; `lag`: each with its `lag_events` and `pending` (a server older than that
        leaves them out)."""
        return self._pages("reader-groups/", {"lag": "true"} if lag else {}, tags)

    def delete_reader_group(self, group: str) -> None:
        """Delete a reader group ("scope/name"), releasing its hold on retention."""
        self.request("DELETE", f"reader-groups/{group}/")

    def reader_group(self, group: str) -> ReaderGroup:
        """A handle on an existing group ("scope/name")."""
        return ReaderGroup(self, group)

    def read_many(self, reads: Iterable[Read]) -> Iterator[tuple[int, Batch | CBRError]]:
        """Many consumers' reads in one request (of one group or of many), over a connection of
        its own: each read's answer as soon as it has one, as `(its place in reads, its Batch)`,
        or the `CBRError` that read alone was refused with (a refusal of the whole request is
        raised). Reads that wait (`wait_ms`) cost the server no more than one lone waiting read
        each, and all of them one connection: a process holding thousands of consumers holds one
        socket for their waits, not thousands. Ends once every read has its answer."""
        reads = list(reads)
        body = {"reads": [read.body() for read in reads]}
        groups = {read.group: ReaderGroup(self, read.group) for read in reads}
        wait_s = max((read.wait_ms for read in reads), default=0) / 1000
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._netloc, timeout=max(self._timeout, wait_s + self.WAIT_MARGIN_S))
        try:
            headers = {"Content-Type": "application/json", "Accept": "application/x-ndjson", **self._credentials()}
            conn.request("POST", self._prefix + "reads/", body=_dumps(body), headers=headers)
            response = conn.getresponse()
            if response.status >= 400:
                _answer(response.status, response.read(), None)  # raises
            while line := response.readline():
                answered = _loads(line)
                n, status, answer = answered["read"], answered["status"], answered["answer"]
                if status >= 400:
                    yield n, CBRError(status, answer)
                    continue
                group = groups[reads[n].group]
                yield n, Batch((Message(group, d) for d in answer["deliveries"]), answer.get("delivery_ranges"))
        finally:
            conn.close()


@dataclass
class Read:
    """One read of many sent together (`Client.read_many`): as `ReaderGroup.read` takes it."""

    group: str  # "scope/name"
    max_events: int = 100
    wait_ms: int = 0
    consumer: str | None = None
    ack: Iterable[Message | str] = ()

    def body(self) -> dict:
        body: dict = {
            "reader_group": self.group,
            "max_events": self.max_events,
            "wait_ms": self.wait_ms,
            "ranges": True,
        }
        if self.consumer:
            body["consumer"] = self.consumer
        ack_ids = _ids(self.ack)
        if ack_ids:
            body["ack"] = {"delivery_ids": ack_ids}
        return body


@dataclass
class Message:
    """One delivery. As a context manager: acknowledged when the block ends normally; an
    exception gives it back (nack, with the exception as the reason) and is swallowed."""

    group: ReaderGroup
    data: dict
    outcome: str | None = field(default=None, repr=False)  # "ack" | "nack" once decided
    reason: str = field(default="", repr=False)

    @property
    def delivery_id(self) -> str:
        return self.data["delivery_id"]

    @property
    def payload(self) -> bytes:
        """The event's payload; a large event's is fetched from its `payload_url` (whole: use
        `payload_pieces` to read one of many megabytes a piece at a time)."""
        url = self.data.get("payload_url")
        if url is not None:
            return b"".join(self.group.client.payload(url))
        return base64.b64decode(self.data["payload_b64"])

    def payload_pieces(self) -> Iterator[bytes]:
        """The payload a piece at a time (a large event's, as it comes from the server)."""
        url = self.data.get("payload_url")
        if url is None:
            yield self.payload
        else:
            yield from self.group.client.payload(url)

    @property
    def payload_url(self) -> str | None:
        """Where a large event's payload is served (None for an event whose answer carries it)."""
        return self.data.get("payload_url")

    @property
    def text(self) -> str | None:
        if "payload_url" in self.data:
            try:
                return self.payload.decode()
            except UnicodeDecodeError:
                return None
        return self.data.get("payload")

    @property
    def delivery_count(self) -> int:
        return self.data["delivery_count"]

    @property
    def sinks_pending(self) -> list[str] | None:
        """A fan-out group's sinks that have not acknowledged this event (a redelivery is for
        them alone); None for a group without sinks."""
        return self.data.get("sinks_pending")

    def ack(self) -> None:
        self.outcome = "ack"

    def nack(self, reason: str = "") -> None:
        self.outcome, self.reason = "nack", reason

    def __enter__(self) -> Message:
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if kind is None:
            if self.outcome is None:
                self.ack()
            return False
        if kind in (KeyboardInterrupt, SystemExit, GeneratorExit):
            return False  # stopping: not acknowledged, it comes again after its lease
        self.nack(f"{kind.__name__}: {exc}"[:500])
        return True


class ReaderGroup:
    def __init__(self, client: Client, name: str):
        self.client = client
        self.name = name
        self._path = f"reader-groups/{name}/"
        self.refused = 0  # settlements the server refused in consume() (leases lost meanwhile)
        self.last_ack: dict | None = None  # what the last read's `ack` did (read(ack=...))

    WAIT_MS = 30_000  # how long consume() waits in one read by default (the server holds no thread for it)

    def info(self) -> dict:
        return self.client._object("GET", self._path)

    def read(
        self,
        max_events: int = 100,
        wait_ms: int = 0,
        consumer: str | None = None,
        ack: Iterable[Message | str] = (),
        sink: str | None = None,
    ) -> Batch:
        """Up to `max_events` deliveries. `ack`: deliveries to acknowledge first, in the same
        request (a fan-out group's `sink` acknowledges them); what that did is `last_ack`
        (`acked`, `waiting_for_sinks`, and `refused`: the deliveries whose leases were lost). A
        whole batch a read returned is acknowledged by its id ranges: a few strings, not an id
        per message."""
        body: dict = {"max_events": max_events, "wait_ms": wait_ms}
        if consumer:
            body["consumer"] = consumer
        if self.client.read_carries_acks:
            body["ranges"] = True
        ack_ids = _ids(ack)
        if ack_ids and self.client.read_carries_acks:
            body["ack"] = {"delivery_ids": ack_ids} if sink is None else {"delivery_ids": ack_ids, "sink": sink}
        elif ack_ids:  # a server older than reads with an ack: the ack goes alone first (its
            # refusals counted in `refused`, `last_ack` None)
            self._quietly(lambda: self.ack(ack_ids, sink, consumer))
        try:
            accept = READ_BATCH if self.client.binary_reads else "application/json"
            status, binary, raw = self.client._exchange("POST", self._path + "read/", body, accept, wait_ms / 1000)
            # a binary answer gives its messages as they are (their fields read when asked for);
            # a JSON one, its deliveries to wrap
            answer = _answer(status, raw, functools.partial(_batch_messages, self) if binary else None)
        except CBRError as exc:
            if exc.status == 406 and self.client.binary_reads:  # a server without the binary answer:
                self.client.binary_reads = False  # refused before anything was applied; JSON from now on
                return self.read(max_events, wait_ms, consumer, ack_ids, sink)
            if exc.field not in ("ack", "ranges") or "not a field" not in str(exc.body.get("message")):
                raise
            self.client.read_carries_acks = False  # an older server: never again on this client
            return self.read(max_events, wait_ms, consumer, ack_ids, sink)
        self.last_ack = answer.get("ack")
        deliveries = answer["deliveries"]
        messages = deliveries if binary else (Message(self, d) for d in deliveries)
        return Batch(messages, answer.get("delivery_ranges"))

    def ack(self, messages: Iterable[Message | str], sink: str | None = None, consumer: str | None = None) -> dict:
        """Acknowledge deliveries (none: nothing is sent). `consumer`: the name this consumer
        reads under (the console shows each consumer's last read and acknowledgement)."""
        body: dict = {"delivery_ids": _ids(messages)}
        if not body["delivery_ids"]:
            return {"acked": 0, "waiting_for_sinks": 0, "given_back": 0}
        if sink is not None:
            body["sink"] = sink
        if consumer:
            body["consumer"] = consumer
        return self.client._object("POST", self._path + "ack/", body)

    def nack(
        self, messages: Iterable[Message | str], delay_ms: int | None = None, reason: str = "", sink: str | None = None
    ) -> dict:
        """Give deliveries back: handed out again after `delay_ms` (None: after the group's
        `backoff_s`, at once without one). A fan-out group's `sink` gives them back for itself
        alone (the sinks that acknowledged them stay acknowledged)."""
        body: dict = {"delivery_ids": [_id(m) for m in messages], "reason": reason}
        if delay_ms is not None:
            body["delay_ms"] = delay_ms
        if sink is not None:
            body["sink"] = sink
        return self.client._object("POST", self._path + "nack/", body)

    def checkpoint(self, name: str, persist: bool = False) -> dict:
        return self.client._object("POST", self._path + "checkpoints/", {"name": name, "persist": persist})

    def seek(
        self,
        position: str | None = None,
        *,
        time: str | None = None,
        stream_cuts: dict[str, dict[str, int]] | None = None,
        generation: int | None = None,
    ) -> dict:
        """Move the group: to `position` "head" or "tail", to the first events published at or
        after `time` (ISO 8601), or to `stream_cuts` (`{"scope/name": cut}`; streams left out stay
        where they are). Exactly one of them. Live leases are dropped (deliveries in hand can no
        longer be acknowledged) and the generation moves on; answers the group's detail."""
        body: dict = {}
        if position is not None:
            body["position"] = position
        if time is not None:
            body["time"] = time
        if stream_cuts is not None:
            body["stream_cuts"] = stream_cuts
        if generation is not None:
            body["generation"] = generation
        return self.client._object("POST", self._path + "seek/", body)

    def assignments(self) -> dict[str, list[str]]:
        """An ordered group's owners: each consumer's segments, as "scope/name:segment" (a shared
        group: empty, every consumer reads every segment)."""
        return self.info().get("assignments", {})

    def consumers(self) -> list[dict]:
        """The group's consumers heard from in the last day, the most recently heard first: each
        one's last read and ack, read and ack rates over the last minute (events/s), deliveries
        in flight and totals."""
        return self.client._object("GET", self._path + "consumers/")["results"]

    def checkpoints(self) -> list[dict]:
        """The group's latest checkpoints (the last 100), newest first."""
        return self.client._object("GET", self._path + "checkpoints/")["results"]

    def delete_checkpoint(self, name: str) -> None:
        """Delete a checkpoint (a cut released at it stays)."""
        self.client.request("DELETE", self._path + f"checkpoints/{name}/")

    def release(self, checkpoint: str) -> dict:
        return self.client._object("POST", self._path + f"checkpoints/{checkpoint}/release/")

    def publish_cut(self, stream: str, cut: dict[str, int], generation: int | None = None) -> dict:
        """A MANUAL subscriber's acknowledgement cut of one stream ("scope/name")."""
        body: dict = {"stream": stream, "stream_cut": cut}
        if generation is not None:
            body["generation"] = generation
        return self.client._object("POST", self._path + "truncation-cut/", body)

    def publish_cuts(self, cuts: dict[str, dict[str, int]], generation: int | None = None) -> list[dict]:
        """Cuts of several streams at once (`{"scope/name": cut}`): all applied, or none (the
        refusal, a `CBRError`, names the first failing stream and lists every failure)."""
        body: dict = {"stream_cuts": cuts}
        if generation is not None:
            body["generation"] = generation
        return self.client._object("POST", self._path + "truncation-cut/", body)["streams"]

    def consume(
        self,
        max_events: int = 100,
        wait_ms: int | None = None,
        consumer: str | None = None,
        idle_stop: bool = False,
        sink: str | None = None,
    ) -> Generator[Message, None, None]:
        """Messages, read `max_events` at a time (long-polling `wait_ms`), settled in batches:
        those given back in a request per reason, those acknowledged by the next read, which
        carries them (and, when the loop ends, by an ack of their own). `idle_stop` ends the loop
        at the first read that finds nothing. With `sink` (a fan-out group's exporter), a
        redelivery this sink acknowledged already is not yielded again: it is for the other
        sinks."""
        if wait_ms is None:  # a loop that goes on waits long; one that stops when idle, a second
            wait_ms = 1000 if idle_stop else self.WAIT_MS
        batch: list[Message] = []
        carried: list[Message] = []  # acknowledged, for the next read to carry
        try:
            while True:
                batch = self.read(max_events, wait_ms, consumer, ack=carried, sink=sink)
                carried = []
                if self.last_ack is not None:
                    self.refused += len(self.last_ack["refused"])
                if not batch and idle_stop:
                    return
                for message in batch:
                    if sink is not None and sink not in message.data.get("sinks_pending", (sink,)):
                        message.ack()  # done for this sink already: acknowledged again, harmless
                        continue
                    yield message
                carried = self._settle(batch, sink, consumer, carry_acks=True)
                if len(carried) == len(batch):
                    carried = batch  # all of it: acknowledged by the batch's id ranges
                batch = []
        finally:
            self._settle(batch, sink, consumer)  # a batch the loop left midway: what was decided
            if carried:  # the read that was to carry them did not happen (or failed): sent alone
                self._quietly(lambda: self.ack(carried, sink, consumer))

    def _settle(
        self, batch: list[Message], sink: str | None, consumer: str | None = None, carry_acks: bool = False
    ) -> list[Message]:
        """Send the batch's nacks (one request per reason) and acks; with `carry_acks`, the
        acknowledged messages are returned instead, for the next read to carry."""
        acks = [m for m in batch if m.outcome == "ack"]
        reasons: dict[str, list[Message]] = {}
        for m in batch:
            if m.outcome == "nack":
                reasons.setdefault(m.reason, []).append(m)
        for m in batch:
            m.outcome = "settled" if m.outcome else None
        calls: list[Callable[[], object]] = [] if carry_acks or not acks else [lambda: self.ack(acks, sink, consumer)]
        calls += [functools.partial(self.nack, ms, reason=r, sink=sink) for r, ms in reasons.items()]
        for call in calls:
            self._quietly(call)
        return acks if carry_acks else []

    def _quietly(self, call: Callable[[], object]) -> None:
        """Send an ack or nack. A delivery whose lease was lost meanwhile (it took longer than
        `ack_timeout_s`: someone else holds it now) is refused by the server while the rest
        applies; that is normal at-least-once life, not a reason to stop consuming."""
        try:
            call()
        except CBRError as exc:
            if exc.code not in ("lease_lost", "unknown_delivery"):
                raise
            self.refused += len(exc.body.get("refused", []))


def _dumps(body: object) -> bytes:
    if orjson is not None:
        try:
            return orjson.dumps(body)
        except TypeError:  # what orjson does not take (an integer past 64 bits, a non-text key)
            pass
    return json.dumps(body).encode()


def _loads(raw: bytes | memoryview) -> Any:  # decoded JSON
    return orjson.loads(raw) if orjson is not None else json.loads(bytes(raw))


# A read's answer in binary (the server's `streams.wire` and docs/consuming.md describe it):
# b"CBRB", version 2, a JSON head, then each event as the server stores it (frame and body).
READ_BATCH = "application/vnd.cbr.read-batch"
_BATCH_MAGIC = b"CBRB\x02"


def _search_query(
    contains: str | None, headers: Iterable[str], json_condition: str | None
) -> dict[str, str | list[str]]:
    """A search's parameters as a read and an export take them (docs/api.md)."""
    query: dict[str, str | list[str]] = {}
    if contains is not None:
        query["contains"] = contains
    if headers:
        query["header"] = list(headers)
    if json_condition is not None:
        query["json"] = json_condition
    return query


# an event's frame (body length, CRC-32C of the body) and the body's fixed part: flags, offset,
# published_ms, deliver_at_ms, cum_size, routing key, key, headers and payload lengths
_BATCH_EVENT = struct.Struct("<IIBQqqQHHII")
_OFFSET_IN_FRAME = struct.Struct("<9xQ")  # an event's offset, where _BATCH_EVENT has it
_FRAME_SIZE = 8
_NO_TEXT = 0xFFFF
_FLAG_LARGE = 4  # a large event: its payload's size (a u64) in place of its payload
LARGE_PIECE_BYTES = 1024 * 1024  # what a large event's upload or download holds at once


def decode_read_batch(raw: bytes) -> dict:
    """A read's binary answer as the same object its JSON gives, field for field (`deliveries`
    first, each event's keys in the JSON's order). ValueError when it is not one."""
    answer = _batch_messages(None, raw)
    answer["deliveries"] = [m.data for m in answer["deliveries"]]
    return answer


@functools.lru_cache(maxsize=4096)  # the events of a batch share their publication time
def ms_to_iso(ms: int) -> str:
    """Epoch milliseconds as the JSON answers write them: `2026-11-25T08:00:00.123Z`."""
    seconds, millis = divmod(ms, 1000)
    stamp = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).replace(microsecond=millis * 1000)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class _BatchPart:
    """What every event of one segment's part of a binary read shares."""

    raw: bytes  # the whole answer
    stream: str
    segment: str
    id_prefix: str  # with its trailing "-"
    lease_expires_at: str | None
    sinks_pending: list[list[str]] | None


def _delivery_counts(runs: list[list[int]], count: int) -> list[int]:
    """A part's delivery counts, one per event, from its runs ([delivery count, events])."""
    out: list[int] = []
    for epoch, n in runs:
        out += [epoch] * n
    if len(out) != count:
        raise ValueError("a read batch whose delivery counts do not match its events")
    return out


def _batch_messages(group: ReaderGroup | None, raw: bytes) -> dict:
    """A read's binary answer as its head's fields and `deliveries`: a `BatchMessage` per event,
    which reads its fields from the answer when they are asked for (the walk here only finds
    where each event lies, and checks its CRC where the `crc32c` package is installed).
    ValueError when it is not a read batch, or is cut short, or has bytes after its last event,
    or an event that does not hold together."""
    if raw[:5] != _BATCH_MAGIC or len(raw) < 9:
        raise ValueError("not a read batch")
    (head_len,) = struct.unpack_from("<I", raw, 5)
    pos = 9 + head_len
    head = _loads(memoryview(raw)[9:pos])
    expires = head.pop("lease_expires_at")
    unpack = _BATCH_EVENT.unpack_from
    size = _BATCH_EVENT.size
    end = len(raw)
    view = memoryview(raw)
    messages: list[Message] = []
    append = messages.append
    new = object.__new__
    for about in head.pop("parts"):
        part = _BatchPart(
            raw, about["stream"], about["segment"], about["id_prefix"] + "-", expires, about.get("sinks_pending")
        )
        count = about["count"]
        for i, epoch in enumerate(_delivery_counts(about["delivery_counts"], count)):
            if pos + size > end:
                raise ValueError("a read batch cut short")
            body_len, crc, _, _, _, _, _, rk_len, key_len, headers_len, payload_len = unpack(raw, pos)
            payload_at = pos + size + headers_len
            payload_at += 0 if rk_len == _NO_TEXT else rk_len
            payload_at += 0 if key_len == _NO_TEXT else key_len
            stop = pos + _FRAME_SIZE + body_len
            if payload_at + payload_len != stop or stop > end:
                raise ValueError("a read batch cut short" if stop > end else "a read batch with a malformed event")
            if _crc32c is not None and _crc32c(view[pos + _FRAME_SIZE : stop]) != crc:
                raise ValueError("a read batch with an event that fails its CRC")
            message = new(BatchMessage)
            message.group = group  # type: ignore[assignment]  # None only inside decode_read_batch
            message._part, message._i, message._pos, message._epoch = part, i, pos, epoch
            append(message)
            pos = stop
    if pos != end:
        raise ValueError("a read batch with bytes after its last event")
    return {"deliveries": messages, **head}


class BatchMessage(Message):
    """A message of a read answered in binary (`READ_BATCH`): its delivery id, payload and text
    are read from the answer when asked for, and `data` (the delivery as the JSON answer gives it)
    is built on first use. A consumer that handles payloads gets them as the bytes they were
    published as, with no base64 on the way."""

    # Made by `_batch_messages` alone, a thousand a read, with attributes set and no call:
    # `group` (None inside decode_read_batch), its part, its index in the part, where its frame
    # starts in the answer and its delivery count. Nothing else is kept per message (no tuple of
    # fields): a consumer holds a batch while it reads the next, and every object a message keeps
    # is one more for the garbage collector to walk (three per message cost a consumer ~25 % of
    # its CPU, bench/RESULTS.md 2026-11-27). The fields are read from the frame when asked for.
    # `outcome` and `reason` keep Message's defaults until decided.
    _part: _BatchPart
    _i: int
    _pos: int
    _epoch: int
    _data: dict | None = None  # `data`, once made

    def _fields(self) -> tuple:
        """The frame's fixed fields (`_BATCH_EVENT`)."""
        return _BATCH_EVENT.unpack_from(self._part.raw, self._pos)

    def _payload_at(self, fields: tuple) -> int:
        at = self._pos + _BATCH_EVENT.size + fields[9]
        at += 0 if fields[7] == _NO_TEXT else fields[7]
        return at + (0 if fields[8] == _NO_TEXT else fields[8])

    def _texts(self, fields: tuple) -> tuple[str | None, str | None, bytes | None]:
        """The routing key, the key and the headers (still JSON text)."""
        raw = self._part.raw
        at = self._pos + _BATCH_EVENT.size
        rk_len, key_len, headers_len = fields[7:10]
        routing_key = key = headers = None
        if rk_len != _NO_TEXT:
            routing_key = raw[at : at + rk_len].decode()
            at += rk_len
        if key_len != _NO_TEXT:
            key = raw[at : at + key_len].decode()
            at += key_len
        if headers_len:
            headers = raw[at : at + headers_len]
        return routing_key, key, headers

    @property
    def delivery_id(self) -> str:
        (offset,) = _OFFSET_IN_FRAME.unpack_from(self._part.raw, self._pos)
        return f"{self._part.id_prefix}{offset}-{self._epoch}"

    @property
    def delivery_count(self) -> int:
        return self._epoch

    @property
    def payload(self) -> bytes:
        fields = self._fields()
        if fields[2] & _FLAG_LARGE:
            return b"".join(self.group.client.payload(self.data["payload_url"]))
        at = self._payload_at(fields)
        return self._part.raw[at : at + fields[10]]

    @property
    def payload_url(self) -> str | None:
        return self.data["payload_url"] if self._fields()[2] & _FLAG_LARGE else None

    def payload_pieces(self) -> Iterator[bytes]:
        if self._fields()[2] & _FLAG_LARGE:
            yield from self.group.client.payload(self.data["payload_url"])
        else:
            yield self.payload

    @property
    def text(self) -> str | None:
        try:
            return self.payload.decode()
        except UnicodeDecodeError:  # not text: the JSON has no `payload` either
            return None

    @property
    def sinks_pending(self) -> list[str] | None:
        part = self._part
        return None if part.sinks_pending is None else part.sinks_pending[self._i]

    @property
    def data(self) -> dict:
        """Message's field, made here on first use."""
        if self._data is None:
            self._data = self._json()
        return self._data

    @data.setter
    def data(self, value: dict) -> None:
        self._data = value

    def _json(self) -> dict:
        part, i, epoch = self._part, self._i, self._epoch
        fields = self._fields()
        offset, published_ms, deliver_at_ms, payload_len = fields[3], fields[4], fields[5], fields[10]
        routing_key, key, headers = self._texts(fields)
        at = self._payload_at(fields)
        payload = part.raw[at : at + payload_len]
        event = {
            "segment": part.segment,
            "offset": offset,
            "routing_key": routing_key,
            "key": key,
            "headers": None if headers is None else _loads(headers),
            "published_at": ms_to_iso(published_ms),
            "deliver_at": None if deliver_at_ms < 0 else ms_to_iso(deliver_at_ms),
        }
        if fields[2] & _FLAG_LARGE:  # its payload's size in place of its payload (docs/consuming.md)
            event["payload_url"] = f"/api/v1/streams/{part.stream}/events/{part.segment}/{offset}/payload/"
            (event["payload_size"],) = struct.unpack_from("<Q", payload)
        else:
            event["payload_b64"] = binascii.b2a_base64(payload, newline=False).decode()
            try:
                event["payload"] = payload.decode()
            except UnicodeDecodeError:  # not text: payload_b64 alone, as in the JSON
                pass
        event["stream"] = part.stream
        event["delivery_id"] = f"{part.id_prefix}{offset}-{epoch}"
        event["delivery_count"] = epoch
        event["lease_expires_at"] = part.lease_expires_at
        if part.sinks_pending is not None:
            event["sinks_pending"] = part.sinks_pending[i]
        return event


def _id(m: Message | str) -> str:
    return m if isinstance(m, str) else m.delivery_id


def _ids(messages: Iterable[Message | str]) -> list[str]:
    """The ids that name these deliveries: a whole `Batch`'s id ranges (a server that answers
    them), or each one's id."""
    if isinstance(messages, Batch) and messages.delivery_ranges is not None:
        return list(messages.delivery_ranges)
    return [_id(m) for m in messages]


class Batch(list):
    """What a read returns: its messages, and (from a server that answers them) the id ranges
    that name them all, which an ack or nack of the whole batch sends instead of each id. A slice
    or a filtered copy is a plain list: its messages are named one by one."""

    def __init__(self, messages: Iterable[Message] = (), delivery_ranges: list[str] | None = None):
        super().__init__(messages)
        self.delivery_ranges = delivery_ranges

    # a batch changed in place names its messages one by one
    def __setitem__(self, *args) -> None:
        self.delivery_ranges = None
        super().__setitem__(*args)

    def __delitem__(self, *args) -> None:
        self.delivery_ranges = None
        super().__delitem__(*args)

    def __iadd__(self, other):  # type: ignore[misc]  # list's own, typed for lists
        self.delivery_ranges = None
        return super().__iadd__(other)

    def __imul__(self, n):  # type: ignore[misc]  # list's own, typed for lists
        self.delivery_ranges = None
        return super().__imul__(n)

    def append(self, item) -> None:
        self.delivery_ranges = None
        super().append(item)

    def extend(self, items) -> None:
        self.delivery_ranges = None
        super().extend(items)

    def insert(self, index, item) -> None:
        self.delivery_ranges = None
        super().insert(index, item)

    def pop(self, *args):
        self.delivery_ranges = None
        return super().pop(*args)

    def remove(self, item) -> None:
        self.delivery_ranges = None
        super().remove(item)

    def clear(self) -> None:
        self.delivery_ranges = None
        super().clear()


def _with(event: dict, settings: dict) -> dict:
    """The event with the call's settings (delay, time to live) where it sets none of that kind."""
    kind = {"delay_ms", "deliver_at"} if {"delay_ms", "deliver_at"} & set(settings) else set(settings)
    return {**settings, **event} if settings and not kind & set(event) else event


def _event(e: str | bytes | dict) -> dict:
    if isinstance(e, dict):
        return e
    if isinstance(e, bytes):
        try:
            return {"payload": e.decode()}
        except UnicodeDecodeError:
            return {"payload_b64": base64.b64encode(e).decode()}
    return {"payload": e}


def _repeatable(method: str, path: str) -> bool:
    return method == "GET" or path.endswith(("/ack/", "/read/"))


def _answer(status: int, raw: bytes, decode: Callable[[bytes], Any] | None = None) -> Any:
    """An answer's body decoded (`decode`: a binary read batch's decoder; JSON otherwise), or the
    CBRError it stands for."""
    try:
        answer = decode(raw) if decode is not None else (_loads(raw) if raw else {})
    except ValueError:  # not JSON: a proxy's or a dying server's page
        answer = {"code": "not_json", "message": raw[:300].decode(errors="replace")}
    if status >= 400 or (isinstance(answer, dict) and answer.get("code") == "not_json"):
        raise CBRError(status, answer if isinstance(answer, dict) else {"message": answer})
    return answer


def wait_for(predicate, timeout: float = 10.0, every: float = 0.1):
    """Poll `predicate` until it answers something true (a helper for scripts and tests)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every)

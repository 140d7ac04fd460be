"""The console's event browser: page through a stream's live log from its head, its tail, a time
or a cut, filtered by routing key or key, each payload shown as text, pretty JSON or hex, with its
headers and times; a dead-letter event with the reason and where it came from; the compacted view
in key order. Operators and admins publish from the same page. Works without JavaScript: every
control is a plain form or link."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC
from urllib.parse import quote, urlencode

from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect, render

from access.permissions import can, console_access
from access.rules import Action, TargetKind
from compaction.models import CompactedView
from compaction.view import read_view
from domain.cuts import check_cut, parse_cut_json
from domain.dead_letters import read_dead_letter
from domain.errors import FieldError
from domain.event_filters import parse_filter
from domain.events import parse_batch
from domain.times import parse_time
from groups.consuming import dead_letters
from groups.consuming.dead_letters import is_dead_letter_stream
from groups.models import Republished
from streams import logs, services
from streams.browsing import browse
from streams.found import found_or_404
from streams.models import Stream

PAGE = 50
# a search's query fields, and `parse_filter`'s arguments for them (`header` apart: repeatable)
_FILTER_ARGS = {"routing_key": "routing_key", "key": "key", "contains": "contains", "json": "json_condition"}
FORMATS = ("text", "json", "hex")


def _shown(raw: bytes, text: str | None, form: str) -> str:
    """A payload as the person asked: text, pretty JSON (text that is not JSON stays as it is), or
    hex; bytes that are not UTF-8 always as hex."""
    if form == "hex" or text is None:
        return hex_rows(raw)
    if form == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


_PRINTABLE = bytes(range(0x20, 0x7F))


def hex_rows(raw: bytes) -> str:
    """As `xxd` and `hexdump -C` show bytes: a row of 16, its offset, the bytes in hex (a gap after
    the eighth) and the same bytes as ASCII (`.` for the others), the last row padded so that its
    ASCII column lines up with the rows above it."""
    rows = []
    for at in range(0, len(raw), 16):
        row = raw[at : at + 16]
        hexed = f"{row[:8].hex(' ')}  {row[8:].hex(' ')}".rstrip()
        shown = "".join(chr(b) if b in _PRINTABLE else "." for b in row)
        rows.append(f"{at:08x}  {hexed:<48}  |{shown}|")
    return "\n".join(rows)


def _decorated(events: list[dict], form: str) -> list[dict]:
    """Each event with what the page shows: the payload formatted, its size, its own headers,
    and for a dead-lettered event the `cbr-dlq-*` headers (reason, origin) apart, when they parse
    (`domain.dead_letters`; otherwise they are shown as the plain headers they then are)."""
    out = []
    for e in events:
        large = "payload_url" in e  # its bytes at its URL: the page links to them
        raw = b"" if large else base64.b64decode(e["payload_b64"])
        letter, own = read_dead_letter(e.get("headers"))
        dead = None
        if letter is not None:
            cut = json.dumps({letter.segment: letter.offset}, separators=(",", ":"))
            dead = {
                "reason": letter.reason,
                "stream": letter.stream,
                "segment": letter.segment,
                "offset": letter.offset,
                "reader_group": letter.reader_group,
                "deliveries": letter.deliveries,
                "url": f"/streams/{letter.stream}/events/?start=cut&cut={quote(cut)}",
            }
        out.append(
            {
                **e,
                "shown": "" if large else _shown(raw, e.get("payload"), form),
                "binary": not large and e.get("payload") is None,
                "size": e["payload_size"] if large else len(raw),
                "large": large,
                "own_headers": own,
                "dead": dead,
            }
        )
    return out


def _start(stream: Stream, request) -> tuple[dict[str, int], str]:
    """The cut the page starts at, from `start` (head, tail, time, cut) and its value."""
    log = logs.stream_log(stream)
    start = request.GET.get("start", "head")
    if start == "tail":
        return log.tail_cut(), start
    if start == "time":
        at = parse_time(request.GET.get("time", ""), "time", naive=UTC)  # the form's time is UTC
        return log.cut_at_time(int(at.timestamp() * 1000)), start
    if start == "cut":
        tail = log.tail_cut()
        cut = check_cut(
            parse_cut_json(request.GET.get("cut", ""), "cut"), "cut", stream.segment_ids, complete=False, tail=tail
        )
        return dict(cut), start
    return {}, "head"


@console_access({"GET": Action.VIEW}, TargetKind.STREAM)
def events_page(request, scope, name):
    stream = found_or_404(
        Stream.objects.select_related("scope", "compacted_view"), f"stream {scope}/{name}", scope__name=scope, name=name
    )
    return _page(request, stream)


def _page(request, stream: Stream, status: int = 200, **extra):
    """The browser at the page the query asks for (a publish refused: the head, with `extra`)."""
    form = request.GET.get("format", "text")
    form = form if form in FORMATS else "text"
    view = "compacted" if request.GET.get("view") == "compacted" and stream.is_compacted else "log"
    context = {
        "stream": stream,
        "format": form,
        "formats": FORMATS,
        "view": view,
        "q": request.GET,
        "can_publish": can(request, Action.PUBLISH),
        "error": None,
        **extra,
    }
    if view == "compacted":
        context.update(_compacted_page(stream, request, form))
    else:
        try:
            cut, start = _start(stream, request)
            # the search's fields filled in, as the API's query names them (blank ones left out)
            asked = [(k, v) for k in _FILTER_ARGS if (v := request.GET.get(k))]
            asked += [("header", h) for h in request.GET.getlist("header") if h.strip()]
            where = parse_filter(
                **{_FILTER_ARGS[k]: v for k, v in asked if k != "header"},
                headers=[v for k, v in asked if k == "header"],
            )
            page = browse(stream, cut, PAGE, budget=settings.CBR_SEARCH_SCAN_EVENTS, where=where)
        except FieldError as exc:
            context["error"] = exc
            status = 400
        else:
            events = _decorated(page.events, form)
            if is_dead_letter_stream(stream):  # which of them went back already
                done = set(
                    Republished.objects.filter(
                        dead_letters=stream, offset__in=[e["offset"] for e in events]
                    ).values_list("segment", "offset")
                )
                for e in events:
                    e["republished"] = (e["segment"], e["offset"]) in done
            context.update(
                start=start,
                from_cut=cut,
                events=events,
                dead_letter_stream=is_dead_letter_stream(stream),
                # the live tail's filters (static/cbr/live.js), as the API's query takes them
                live_filters="".join(f"&{urlencode([pair])}" for pair in asked),
                # the export of what the page shows, from its first event on, with its filters
                export_query=urlencode([("from", json.dumps(cut, separators=(",", ":"))), *asked]),
                can_republish=can(request, Action.MANAGE_STREAMS),
                next_cut=json.dumps(page.next_cut, separators=(",", ":")),
                examined=page.examined,
                at_tail=page.at_tail,
            )
    return render(request, "console/streams/events.html", context, status=status)


def _compacted_page(stream: Stream, request, form: str) -> dict:
    view = CompactedView.objects.filter(stream=stream).first()
    if view is None:
        return {"events": [], "generation": None}
    key = request.GET.get("key") or None
    page = read_view(stream, view, key, request.GET.get("after") or None, PAGE)
    return {"events": _decorated(page.events, form), "generation": view.generation, "next_after": page.next_after}


# the status of a refusal, as the API answers it (api.errors.STATUS_OF_CODE); any other: 400
_REFUSED_STATUS = {"event_too_large": 413, "stream_full": 507, "insufficient_storage": 507}


@console_access({"POST": Action.PUBLISH}, TargetKind.STREAM)
def publish(request, scope, name):
    """One event typed in the browser, published as the API publishes it (`parse_batch`). A
    refusal answers the page again with its status, the form open with what was typed and the
    refusal naming the field beside it; nothing is written."""
    stream = found_or_404(
        Stream.objects.select_related("scope", "compacted_view"), f"stream {scope}/{name}", scope__name=scope, name=name
    )
    try:
        event = _typed_event(request.POST)
        events = parse_batch({"events": [event]}, logs.publish_limits(stream), time.time_ns() // 1_000_000)
        ((segment, offset),) = services.do_publish(stream, events)
    except FieldError as exc:
        field = exc.field.removeprefix("events[0].")
        refusal = f"{field}: {exc.message}"
        # said beside the form's field it is about (`headers.<name>`: the headers), else above them
        beside = field.split(".", 1)[0].split("[", 1)[0]
        return _page(
            request,
            stream,
            _REFUSED_STATUS.get(exc.code, 400),
            publish_refusal=refusal,
            publish_field=beside if beside in _FORM_FIELDS else None,
            typed=request.POST,
        )
    messages.success(request, f"Published at segment {segment}, offset {offset}.")
    # the page from the new event on: its segment at it, the others at their tails
    cut = json.dumps({**logs.stream_log(stream).tail_cut(), segment: offset}, separators=(",", ":"))
    return redirect(f"/streams/{scope}/{name}/events/?start=cut&cut={quote(cut)}")


_FORM_FIELDS = frozenset({"payload", "routing_key", "key", "headers", "delay_ms"})


@console_access({"POST": Action.MANAGE_STREAMS}, TargetKind.STREAM)
def republish(request, scope, name):
    """Dead letters back to the streams they came from: the ones chosen (`position`:
    `segment:offset`, repeatable) or all (`all`), each once (`groups.consuming.dead_letters`)."""
    stream = found_or_404(
        Stream.objects.select_related("scope"), f"stream {scope}/{name}", scope__name=scope, name=name
    )
    positions = None
    if not request.POST.get("all"):
        try:
            positions = [
                (seg, int(off)) for seg, _, off in (p.partition(":") for p in request.POST.getlist("position"))
            ]
        except ValueError:
            positions = []
    try:
        if positions == []:
            raise FieldError("position", "choose the dead letters to republish, or all")
        outcome = dead_letters.republish(stream, positions, user=request.user)
    except FieldError as exc:
        messages.error(request, f"Nothing republished: {exc.field} {exc.message}.")
    else:
        skipped = (
            f", {outcome.skipped} skipped (republished before, or their stream is gone)" if outcome.skipped else ""
        )
        messages.success(request, f"{outcome.republished} dead letter(s) republished{skipped}.")
    return redirect("console:stream-events", scope=scope, name=name)


def _typed_event(post) -> dict:
    """The form's fields as an event of a publish request (headers one a line, `name=value` or
    `name: value`: split at the first `=` or `:`, so a value may hold either)."""
    event: dict = {"payload": post.get("payload", "")}
    for field in ("routing_key", "key"):
        if post.get(field):
            event[field] = post[field]
    headers = {}
    for line in post.get("headers", "").splitlines():
        if line.strip():
            at = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
            k, v = line[:at], line[at + 1 :]
            if at < 0 or not k.strip():
                raise FieldError("headers", f"'{line.strip()}' is not name=value (or name: value)")
            headers[k.strip()] = v.strip()
    if headers:
        event["headers"] = headers
    if post.get("delay_ms"):
        try:
            event["delay_ms"] = int(post["delay_ms"])
        except ValueError:
            raise FieldError("delay_ms", "must be a whole number") from None
    return event

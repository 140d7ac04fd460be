"""The console's event browser: page through a stream's live log from its head, its tail, a time
or a cut, filtered by routing key or key, each payload shown as text, pretty JSON or hex, with its
headers and times; a dead-letter event with the reason and where it came from; the compacted view
in key order. Operators and admins publish from the same page. Works without JavaScript: every
control is a plain form or link."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime
from urllib.parse import quote

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render

from access.permissions import can, console_access
from access.rules import Action, TargetKind
from compaction.models import CompactedView
from compaction.view import read_view
from domain.cuts import check_cut, parse_cut_json
from domain.errors import FieldError
from domain.events import parse_batch
from streams import logs, services
from streams.browsing import browse
from streams.models import Stream

PAGE = 50
FORMATS = ("text", "json", "hex")
DLQ = "cbr-dlq-"


def _shown(raw: bytes, text: str | None, form: str) -> str:
    """A payload as the person asked: text, pretty JSON (text that is not JSON stays as it is), or
    hex (16 bytes a line); bytes that are not UTF-8 always as hex."""
    if form == "hex" or text is None:
        return "\n".join(raw[i : i + 16].hex(" ") for i in range(0, len(raw), 16))
    if form == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def _decorated(events: list[dict], form: str) -> list[dict]:
    """Each event with what the page shows: the payload formatted, its size, its own headers,
    and for a dead-lettered event the `cbr-dlq-*` headers (reason, origin) apart."""
    out = []
    for e in events:
        raw = base64.b64decode(e["payload_b64"])
        headers = e.get("headers") or {}
        dead = {k.removeprefix(DLQ).replace("-", "_"): v for k, v in headers.items() if k.startswith(DLQ)}
        if "/" in dead.get("stream", "") and "segment" in dead and "offset" in dead:
            cut = json.dumps({dead["segment"]: int(dead["offset"])}, separators=(",", ":"))
            dead["url"] = f"/streams/{dead['stream']}/events/?start=cut&cut={quote(cut)}"
        out.append(
            {
                **e,
                "shown": _shown(raw, e.get("payload"), form),
                "binary": e.get("payload") is None,
                "size": len(raw),
                "own_headers": {k: v for k, v in headers.items() if not k.startswith(DLQ)},
                "dead": dead or None,
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
        raw = request.GET.get("time", "")
        try:
            at = datetime.fromisoformat(raw)
        except ValueError:
            raise FieldError("time", "must be a date and time, e.g. 2026-11-26T09:30") from None
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
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
    stream = get_object_or_404(Stream.objects.select_related("scope", "compacted_view"), scope__name=scope, name=name)
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
    }
    status = 200
    if view == "compacted":
        context.update(_compacted_page(stream, request, form))
    else:
        try:
            cut, start = _start(stream, request)
            page = browse(
                stream,
                cut,
                PAGE,
                routing_key=request.GET.get("routing_key") or None,
                key=request.GET.get("key") or None,
            )
        except FieldError as exc:
            context["error"] = exc
            status = 400
        else:
            context.update(
                start=start,
                from_cut=cut,
                events=_decorated(page.events, form),
                next_cut=json.dumps(page.next_cut, separators=(",", ":")),
                examined=page.examined,
                at_tail=page.at_tail,
            )
    return render(request, "streams/events.html", context, status=status)


def _compacted_page(stream: Stream, request, form: str) -> dict:
    view = CompactedView.objects.filter(stream=stream).first()
    if view is None:
        return {"events": [], "generation": None}
    key = request.GET.get("key") or None
    page = read_view(stream, view, key, request.GET.get("after") or None, PAGE)
    return {"events": _decorated(page.events, form), "generation": view.generation, "next_after": page.next_after}


@console_access({"POST": Action.PUBLISH}, TargetKind.STREAM)
def publish(request, scope, name):
    """One event typed in the browser, published as the API publishes it (`parse_batch`)."""
    stream = get_object_or_404(Stream.objects.select_related("scope"), scope__name=scope, name=name)
    event: dict = {"payload": request.POST.get("payload", "")}
    for field in ("routing_key", "key"):
        if request.POST.get(field):
            event[field] = request.POST[field]
    headers = {}
    for line in request.POST.get("headers", "").splitlines():
        if line.strip():
            k, sep, v = line.partition("=")
            if not sep:
                messages.error(request, f"headers: '{line.strip()}' is not name=value")
                return redirect("console:stream-events", scope=scope, name=name)
            headers[k.strip()] = v.strip()
    if headers:
        event["headers"] = headers
    if request.POST.get("delay_ms"):
        try:
            event["delay_ms"] = int(request.POST["delay_ms"])
        except ValueError:
            messages.error(request, "delay (ms): must be a whole number")
            return redirect("console:stream-events", scope=scope, name=name)
    try:
        events = parse_batch({"events": [event]}, logs.publish_limits(stream), time.time_ns() // 1_000_000)
        ((segment, offset),) = services.do_publish(stream, events)
    except FieldError as exc:
        messages.error(request, f"{exc.field.removeprefix('events[0].')}: {exc.message}")
        return redirect("console:stream-events", scope=scope, name=name)
    messages.success(request, f"Published at segment {segment}, offset {offset}.")
    # the page from the new event on: its segment at it, the others at their tails
    cut = json.dumps({**logs.stream_log(stream).tail_cut(), segment: offset}, separators=(",", ":"))
    return redirect(f"/streams/{scope}/{name}/events/?start=cut&cut={quote(cut)}")

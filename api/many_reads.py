"""Many reads in one request (`POST /api/v1/reads/`, docs/api.md): a client that holds many
consumers — of one group or of many — sends all their reads over one connection and gets each
read's answer as a line of its own as soon as it has one, the lone read's answer unchanged inside
it. A thousand waiting consumers cost the server one connection, not a thousand, and the client
one socket to read.

Each read is the read of `POST /reader-groups/{scope}/{name}/read/`: the same body (less the
group, named by `reader_group`), the same checks (the caller may consume from that group), the
same answer and errors, the same wait (parked without a thread under the ASGI front). A read
whose body a lone read would refuse refuses the request (nothing is read); what a read's group
refuses (not found, not allowed, no room to wait) is that read's line, and the others go on.
Their first passes are read together (`consuming.read_many`), as reads woken together are."""

from __future__ import annotations

import re
from typing import Any, cast

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import BasePermission
from rest_framework.views import APIView

from access.principals import principal_of
from access.rules import KEY_ACTIONS, Action, Target, TargetKind, decide
from api.errors import error_response
from api.fields import SINK_PATTERN, RefusesUnknownFields
from api.group_serializers import ReadRequestSerializer, read_request
from api.middleware import FreedAnswers, NamedFormats
from api.parking import MANY_READS_MEDIA_TYPE, ManyReads, check_room_to_wait
from api.reader_group_views import group_and_slots_or_404, rendered
from api.rendering import ManyReadsRenderer, ORJSONRenderer
from domain.errors import FieldError
from groups import consuming

_GROUP = re.compile(r"^[A-Za-z0-9_.-]{1,128}/[A-Za-z0-9_.-]{1,128}$")  # as the read's URL names it


class _OneRead(ReadRequestSerializer):
    what = "one of many reads"

    reader_group = serializers.RegexField(_GROUP.pattern, help_text='the group to read from, "scope/name"')


class ManyReadsRequestSerializer(RefusesUnknownFields, serializers.Serializer):
    what = "many reads"

    reads = serializers.ListField(
        child=_OneRead(),
        min_length=1,
        max_length=settings.CBR_MAX_READS_PER_REQUEST,
        help_text="each a read's body as `POST /reader-groups/{scope}/{name}/read/` takes it, and the "
        f"group it reads from; at most CBR_MAX_READS_PER_REQUEST ({settings.CBR_MAX_READS_PER_REQUEST})",
    )


class _MayConsume(BasePermission):
    """Whoever may consume from some group may send many reads (a person whose role may consume,
    a reader group's API key); each read is then checked as the lone read of its group is."""

    message = "not allowed"

    def has_permission(self, request, view):
        principal = principal_of(request)
        if principal.key is not None:
            allowed = Action.CONSUME in KEY_ACTIONS[principal.key.kind]
            self.message = "" if allowed else f"an API key for {principal.key.kind.replace('_', ' ')} may not consume"
            return allowed
        decision = decide(principal, Action.CONSUME, None)
        self.message = decision.reason
        return decision.allowed


class ManyReadsView(NamedFormats, FreedAnswers, APIView):
    """Many reads, each of the group it names, answered one line each (NDJSON) as each is
    answered: `{"read": i, "status": s, "answer": {...}}`, `i` its place in `reads`, `answer` the
    lone read's answer (or error) with its status. The answer ends once every read has its line."""

    access = {"POST": Action.CONSUME}  # of each read's group: checked read by read
    permission_classes = [_MayConsume]
    renderer_classes = [ORJSONRenderer, ManyReadsRenderer]

    @extend_schema(
        request=ManyReadsRequestSerializer,
        responses={
            (200, MANY_READS_MEDIA_TYPE): OpenApiResponse(
                description='one line a read, as it is answered: {"read": i, "status": s, "answer": '
                'the lone read\'s answer, or its error; "retry_after" when the answer says when to retry}'
            )
        },
    )
    def post(self, request):
        return ManyReads(_answers(request, _reads(request.data)))

    def finalize_response(self, request, response, *args, **kwargs):
        """The lines are theirs; anything else (an error, OPTIONS) in JSON, whatever the client
        accepts."""
        if isinstance(response, ManyReads):
            return response
        if isinstance(getattr(request, "accepted_renderer", None), ManyReadsRenderer):
            request.accepted_renderer, request.accepted_media_type = ORJSONRenderer(), "application/json"
        return super().finalize_response(request, response, *args, **kwargs)


def _reads(data) -> list[tuple[str, dict]]:
    """The body's reads, each (its group, its read's arguments), refused whole when it is not a
    list of the allowed length of reads whose bodies a lone read would take (naming the field:
    `reads[3].max_events`); nothing is read then. What depends on the group (it exists, the caller
    may consume from it, room to wait) is each read's own answer."""
    if type(data) is not dict:
        raise FieldError("reads", "the body is an object with a list of reads")
    unknown = sorted(set(data) - {"reads"})
    if unknown:
        raise FieldError(unknown[0], "unknown field: many reads take only reads")
    reads = data.get("reads")
    if type(reads) is not list or not reads:
        raise FieldError("reads", "a list of at least one read")
    if len(reads) > settings.CBR_MAX_READS_PER_REQUEST:
        raise FieldError(
            "reads",
            f"at most {settings.CBR_MAX_READS_PER_REQUEST} reads in one request (CBR_MAX_READS_PER_REQUEST)",
            details={"max": settings.CBR_MAX_READS_PER_REQUEST},
        )
    parsed = []
    for n, read in enumerate(reads):
        if type(read) is not dict:
            raise FieldError(f"reads[{n}]", "each read is an object")
        group = read.get("reader_group")
        if not isinstance(group, str) or not _GROUP.fullmatch(group):
            raise FieldError(f"reads[{n}].reader_group", 'the group to read from, "scope/name"')
        try:
            args = read_request({key: value for key, value in read.items() if key != "reader_group"})
        except ValidationError as exc:  # named as the field of this read
            raise ValidationError(cast(Any, {"reads": {n: exc.detail}})) from exc  # DRF names it reads[n].<field>
        if args["ack"] is not None:
            _check_ack_shape(args["ack"], f"reads[{n}].ack")
        parsed.append((group, args))
    return parsed


def _check_ack_shape(ack: object, name: str) -> None:
    """A read's `ack` as the schema gives it (an object of `delivery_ids`, a list of strings, and
    `sink`), checked with the request's body; what its ids and sink mean to the group is checked
    when the read is (`consuming.read_many`: that read's line)."""
    if type(ack) is not dict:
        raise FieldError(name, "must be an object: delivery_ids, and sink for a group with sinks")
    unknown = sorted(set(ack) - {"delivery_ids", "sink"})
    if unknown:
        raise FieldError(f"{name}.{unknown[0]}", "is not a field of an ack")
    ids = ack.get("delivery_ids")
    if (
        type(ids) is not list
        or not 0 < len(ids) <= settings.CBR_MAX_READ_EVENTS
        or not all(type(i) is str for i in ids)
    ):
        raise FieldError(
            f"{name}.delivery_ids", f"must be a list of 1 to {settings.CBR_MAX_READ_EVENTS} delivery ids (strings)"
        )
    sink = ack.get("sink")
    if "sink" in ack and (type(sink) is not str or not SINK_PATTERN.fullmatch(sink)):
        raise FieldError(f"{name}.sink", "a sink's name")


def _answers(request, reads: list[tuple[str, dict]]) -> list:
    """Each read's first answer (`Parked` for one that waits), by its place in `reads`."""
    principal = principal_of(request)
    answers: list = []
    let_in: list[tuple[int, consuming.ReadArgs]] = []
    waiting = 0
    found: dict[str, object] = {}  # each group named looked up once (its group and positions, or why not)
    for n, (group, body) in enumerate(reads):
        try:
            args = _read_args(principal, group, body, waiting, found)
        except Exception as exc:  # noqa: BLE001 - this read's answer
            answers.append((n, error_response(exc) or exc))
            continue
        waiting += args.wait_ms > 0
        let_in.append((n, args))
    shared: dict = {}
    results = consuming.read_many([args for _, args in let_in])
    for (n, _), result in zip(let_in, results, strict=True):
        if isinstance(result, Exception):
            answers.append((n, error_response(result) or result))
        else:
            answers.append((n, rendered(result, False, shared)))
    answers.sort(key=lambda answer: answer[0])
    return answers


def _read_args(principal, group: str, args: dict, waiting: int, looked_up: dict[str, object]) -> consuming.ReadArgs:
    """One read's arguments, checked as its lone request is, past its body (checked with the
    request's: `_reads`): the caller allowed to consume from its group, the group found, room for
    it to wait. `looked_up`: the groups this request looked up already (the same group named
    by ten thousand reads is one lookup; one not found, one 404 raised again)."""
    decision = decide(principal, Action.CONSUME, Target(TargetKind.READER_GROUP, group))
    if not decision.allowed:
        raise PermissionDenied(decision.reason)
    known = looked_up.get(group)
    if known is None:
        scope, name = group.split("/")
        try:
            known = looked_up[group] = group_and_slots_or_404(scope, name)
        except Exception as exc:  # noqa: BLE001 - raised again for every read of that group
            looked_up[group] = exc
            raise
    if isinstance(known, Exception):
        raise known
    found, shared_slots = cast(tuple, known)
    group_slots = list(shared_slots)  # (each read its own list, as a lookup of its own gives it)
    if args["wait_ms"] > 0:
        check_room_to_wait(waiting)
    return consuming.ReadArgs(
        found, group_slots, args["max_events"], args["wait_ms"], args["consumer"], args["ack"], args["ranges"]
    )

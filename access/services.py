"""Making and revoking API keys: check_* validates a request's parts (FieldError naming the
field), do_* writes. A key is returned whole once, at creation; only its hash is kept."""

from __future__ import annotations

from datetime import datetime
from typing import NotRequired, TypedDict

from django.db import transaction
from django.utils import timezone

from access.models import ApiKey
from access.rules import KeyKind
from domain.errors import FieldError
from domain.names import split_stream_name
from groups.models import ReaderGroup
from groups.reader_groups import check_streams
from streams.models import Stream

MAX_NAME = 100


class KeyRequest(TypedDict):
    """A checked request for a key (`check_key_request`), as `do_create_key` takes it."""

    name: str
    kind: KeyKind
    expires_at: datetime | None
    reader_group: NotRequired[ReaderGroup]  # a reader_group key's
    streams: NotRequired[list[Stream]]  # a publish key's


def check_key_request(
    *,
    name: object,
    kind: str,
    reader_group: object = None,
    streams: object = None,
    expires_at: datetime | None = None,
) -> KeyRequest:
    if not isinstance(name, str) or not name.strip():
        raise FieldError("name", "is required: say what the key is for")
    if len(name) > MAX_NAME:
        raise FieldError("name", f"must be at most {MAX_NAME} characters")
    checked: KeyRequest = {"name": name.strip(), "kind": KeyKind(kind), "expires_at": expires_at}
    if expires_at is not None and expires_at <= timezone.now():
        raise FieldError("expires_at", "must be in the future")
    if kind == KeyKind.READER_GROUP:
        if streams is not None:
            raise FieldError("streams", "is for publish keys; a reader_group key is for its group only")
        checked["reader_group"] = check_reader_group(reader_group)
    else:
        if reader_group is not None:
            raise FieldError("reader_group", "is for reader_group keys; a publish key names streams")
        checked["streams"] = check_streams(streams)
    return checked


def check_reader_group(value: object, field: str = "reader_group") -> ReaderGroup:
    if value is None:
        raise FieldError(field, "is required for a reader_group key ('scope/name')")
    scope, name = split_stream_name(value, field)
    group = ReaderGroup.objects.select_related("scope").filter(scope__name=scope, name=name).first()
    if group is None:
        raise FieldError(field, f"no reader group {value}", "reader_group_not_found")
    return group


@transaction.atomic
def do_create_key(checked: KeyRequest, user=None) -> tuple[ApiKey, str]:
    streams = checked.pop("streams", [])
    api_key = ApiKey(**checked, created_by=user if user is not None and user.is_authenticated else None)
    key = api_key.assign_secret()
    api_key.save()
    if streams:
        api_key.streams.set(streams)
    return api_key, key


def do_revoke_key(api_key: ApiKey) -> ApiKey:
    """Revoking is final and answers the same when repeated; the row stays for the record."""
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key


def key_queryset():
    """API keys with what their pages and answers show, fetched in one go."""
    return ApiKey.objects.select_related("reader_group__scope", "created_by").prefetch_related("streams__scope")

"""The console's forms to create and change streams and reader groups. Each turns what a person
typed into what the services take; the services and the domain check it (names, policies,
backoff, start positions, duplicates), and a refusal is shown beside the field it names."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from console.declared import blank_is_default, declared_form, declared_form_field, limit_units_agree
from console.forms import POLICY_LIMITS, TimeField, policy_body
from domain.compaction import COMPACTION_FIELDS, COMPACTION_NUMBERS
from domain.errors import FieldError
from domain.group_settings import BOUNDS, DEFAULTS, check_sinks
from domain.names import check_name
from domain.policy_spec import POLICY_FIELDS, parse_policy
from domain.rate_limits import check_dispatch_rate, check_publish_rate
from domain.tags import check_tags
from domain.ttl import MAX_TTL_S
from groups.models import AckPolicyChoice, OnPoison, RetentionType
from streams.models import OnMaxLimit


class ShowsRefusals:
    """A form that shows a domain refusal (`FieldError`) beside the field it names."""

    FIELD_NAMES: dict[str, str] = {}  # the domain's field name -> this form's

    def show(self, exc: FieldError) -> None:
        name = exc.field.removeprefix("retention_policy.")
        name = self.FIELD_NAMES.get(name.split("[")[0].split(".")[0], name)
        self.add_error(name if name in self.fields else None, exc.message)  # type: ignore[attr-defined]


def _name(value: str, field: str) -> str:
    try:
        return check_name(value, field)
    except FieldError as exc:
        raise forms.ValidationError(exc.message) from None


class TagsField(forms.CharField):
    """Tags as a person types them, `team=payments, env=prod` (`domain.tags.check_tags`); shown
    back the same way."""

    def __init__(self, **kwargs):
        super().__init__(
            required=False,
            max_length=20_000,
            help_text="key=value, separated by commas: team=payments, env=prod",
            **kwargs,
        )

    def prepare_value(self, value):
        if isinstance(value, dict):
            return ", ".join(f"{k}={v}" for k, v in value.items())
        return value

    def clean(self, value):
        text = super().clean(value)
        tags = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            key, equals, tag = part.partition("=")
            if not equals:
                raise forms.ValidationError(f"{part!r}: key=value")
            tags[key.strip()] = tag.strip()
        try:
            return check_tags(tags)
        except FieldError as exc:
            raise forms.ValidationError(exc.message) from None


# the forms' bases made from the tables (`Any`: a type checker cannot follow a class made at run time)
_StreamPolicyFields: Any = declared_form("StreamPolicyFields", POLICY_FIELDS, POLICY_LIMITS, required=False)
_StreamCompactionFields: Any = declared_form("StreamCompactionFields", COMPACTION_FIELDS, COMPACTION_NUMBERS)


class StreamForm(ShowsRefusals, _StreamPolicyFields):
    """A new stream, with its own policy (the fields of `POLICY_FIELDS`) or its scope's."""

    scope = forms.CharField(max_length=128, help_text="letters, digits, _ . -")
    name = forms.CharField(max_length=128)
    segment_count = forms.IntegerField(
        min_value=1,
        max_value=settings.CBR_MAX_SEGMENTS,
        initial=1,
        label="segments",
        help_text="events with one routing key stay in one segment, in order",
    )
    description = forms.CharField(max_length=500, required=False)
    tags = TagsField()
    cleanup_policy = declared_form_field(COMPACTION_FIELDS["cleanup_policy"], blank="the scope's default")
    on_max_limit = forms.ChoiceField(choices=OnMaxLimit.choices, initial="truncate", label="at the max limit")
    limit_type = declared_form_field(POLICY_FIELDS["limit_type"], blank="the scope's default (if any)")

    field_order = [
        "scope",
        "name",
        "segment_count",
        "description",
        "tags",
        "cleanup_policy",
        "on_max_limit",
        "limit_type",
        *POLICY_LIMITS,
    ]

    def clean_scope(self):
        return _name(self.cleaned_data["scope"], "scope")

    def clean_name(self):
        return _name(self.cleaned_data["name"], "name")

    def clean(self):
        data = super().clean()
        data["spec"] = None
        limit_units_agree(self, data.get("limit_type"))
        if not self.errors and data.get("limit_type"):
            try:
                data["spec"] = parse_policy(policy_body(data))
            except FieldError as exc:
                self.show(exc)
        return data

    def create_args(self) -> dict:
        """What `retention.services.do_create_stream` takes."""
        data = self.cleaned_data
        return {
            "scope": data["scope"],
            "name": data["name"],
            "segment_count": data["segment_count"],
            "description": data["description"],
            "tags": data["tags"],
            "cleanup_policy": data["cleanup_policy"] or None,
            "on_max_limit": data["on_max_limit"],
            "policy": data["spec"],
        }


class StreamSettingsForm(ShowsRefusals, _StreamCompactionFields):
    """What a stream's settings page changes (the policy has its own panel): its compaction
    settings (`COMPACTION_FIELDS`, a blank one is its default) and these."""

    description = forms.CharField(max_length=500, required=False)
    tags = TagsField()
    cleanup_policy = declared_form_field(COMPACTION_FIELDS["cleanup_policy"])
    on_max_limit = forms.ChoiceField(choices=OnMaxLimit.choices, label="at the max limit")
    max_delay_s = forms.IntegerField(
        required=False, min_value=0, label="longest delay (s)", help_text="blank: no limit"
    )
    message_ttl_s = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_TTL_S,
        label="time to live (s)",
        help_text="of events without their own ttl_s; blank: no limit",
    )
    events_per_s = forms.FloatField(
        required=False, label="publish rate (events/s)", help_text="blank: no limit; over it a publish gets 429"
    )
    bytes_per_s = forms.FloatField(
        required=False, label="publish rate (bytes/s)", help_text="payload bytes; blank: no limit"
    )

    field_order = [
        "description",
        "tags",
        "cleanup_policy",
        *COMPACTION_NUMBERS,
        "on_max_limit",
        "max_delay_s",
        "message_ttl_s",
        "events_per_s",
        "bytes_per_s",
    ]
    RATES = ("events_per_s", "bytes_per_s")  # the stream's `publish_rate`, a field each here

    @classmethod
    def initial_for(cls, stream) -> dict:
        initial = {name: getattr(stream, name) for name in cls.base_fields if name not in cls.RATES}
        return {**initial, **{name: _as_written(rate) for name, rate in stream.publish_rate.items()}}

    def clean(self):
        data = super().clean()
        rate = {name: data[name] for name in self.RATES if data.get(name) is not None}
        try:
            data["publish_rate"] = check_publish_rate(rate)
        except FieldError as exc:
            self.add_error(exc.field.rpartition(".")[2], exc.message)
        return data

    def changes(self, stream) -> dict:
        """Only what the person changed: an untouched inherited setting stays inherited."""
        data = {**self.cleaned_data, **blank_is_default(COMPACTION_FIELDS, self.cleaned_data, COMPACTION_NUMBERS)}
        for name in self.RATES:
            data.pop(name, None)
        return {k: v for k, v in data.items() if getattr(stream, k) != v}


START_CHOICES = [("head", "the head (every event held)"), ("tail", "the tail (only new events)"), ("time", "a time")]


class GroupForm(ShowsRefusals, forms.Form):
    """A reader group: created (every field) or changed (`editing`: no scope, name or start)."""

    FIELD_NAMES = {"start": "start"}

    scope = forms.CharField(max_length=128)
    name = forms.CharField(max_length=128)
    streams = forms.MultipleChoiceField(choices=[], help_text="the streams it consumes")
    retention_type = forms.ChoiceField(
        choices=[
            (RetentionType.NONE, "NONE: a plain reader, no hold on retention"),
            (RetentionType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT, "AUTOMATIC: releases at its last checkpoint"),
            (RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT, "MANUAL: releases at the cuts it publishes"),
        ],
        label="retention",
    )
    start = forms.ChoiceField(choices=START_CHOICES, initial="head")
    start_time = TimeField(required=False, label="start time (UTC)", help_text="with start: a time")
    ack_timeout_s = forms.IntegerField(
        min_value=BOUNDS["ack_timeout_s"][0],
        max_value=BOUNDS["ack_timeout_s"][1],
        initial=DEFAULTS["ack_timeout_s"],
        label="lease (s)",
    )
    max_deliveries = forms.IntegerField(
        min_value=BOUNDS["max_deliveries"][0], max_value=BOUNDS["max_deliveries"][1], initial=DEFAULTS["max_deliveries"]
    )
    on_poison = forms.ChoiceField(choices=OnPoison.choices, label="poison events")
    backoff_s = forms.CharField(required=False, label="backoff (s)", help_text="waits before each redelivery: 1, 5, 30")
    ack_policy = forms.ChoiceField(
        choices=[(AckPolicyChoice.EXPLICIT, "explicit (at least once)"), (AckPolicyChoice.NONE, "none (at most once)")],
        label="acknowledgement",
    )
    checkpoint_interval_s = forms.IntegerField(
        required=False,
        min_value=BOUNDS["checkpoint_interval_s"][0],
        max_value=BOUNDS["checkpoint_interval_s"][1],
        label="checkpoint every (s)",
        help_text="AUTOMATIC groups: blank for the default",
    )
    subscriber_timeout_s = forms.IntegerField(
        required=False,
        min_value=BOUNDS["subscriber_timeout_s"][0],
        max_value=BOUNDS["subscriber_timeout_s"][1],
        label="subscriber timeout (s)",
        help_text="subscribers: stale once their cut is older (blank: each stream's policy)",
    )
    max_ack_pending = forms.IntegerField(
        min_value=BOUNDS["max_ack_pending"][0],
        max_value=BOUNDS["max_ack_pending"][1],
        initial=DEFAULTS["max_ack_pending"],
        label="max pending",
        help_text="deliveries handed out and not yet settled, at most",
    )
    sinks = forms.CharField(
        required=False, help_text="fan-out: names of the sinks that each acknowledge, e.g. search, archive"
    )
    read_compacted = forms.BooleanField(required=False, help_text="read a compacted stream's view below its horizon")
    dispatch_events_per_s = forms.FloatField(
        required=False, label="dispatch rate (events/s)", help_text="its reads hand out no more; blank: no limit"
    )
    tags = TagsField()

    SETTINGS = (
        "retention_type",
        "ack_timeout_s",
        "max_deliveries",
        "on_poison",
        "ack_policy",
        "checkpoint_interval_s",
        "subscriber_timeout_s",
        "max_ack_pending",
        "read_compacted",
        "tags",
    )

    def clean_sinks(self):
        names = self.cleaned_data["sinks"].replace(",", " ").split()
        try:
            return check_sinks(names)
        except FieldError as exc:
            raise forms.ValidationError(exc.message) from None

    def __init__(self, *args, stream_names: list[str], editing: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        streams = self.fields["streams"]
        assert isinstance(streams, forms.MultipleChoiceField)
        streams.choices = [(n, n) for n in stream_names]
        self.editing = editing
        if editing:
            for name in ("scope", "name", "start", "start_time"):
                del self.fields[name]

    def clean_scope(self):
        return _name(self.cleaned_data["scope"], "scope")

    def clean_name(self):
        return _name(self.cleaned_data["name"], "name")

    def clean_backoff_s(self):
        raw = self.cleaned_data["backoff_s"].replace(",", " ").split()
        try:
            return [int(v) for v in raw] if raw else None
        except ValueError:
            raise forms.ValidationError("whole seconds, separated by commas: 1, 5, 30") from None

    def clean(self):
        data = super().clean()
        if (
            not self.editing
            and data.get("start") == "time"
            and not data.get("start_time")
            and not self.has_error("start_time")  # a time given and refused: that is said already
        ):
            self.add_error("start_time", "give the time to start from")
        rate = data.get("dispatch_events_per_s")
        try:
            data["dispatch_rate"] = check_dispatch_rate(None if rate is None else {"events_per_s": rate})
        except FieldError as exc:
            self.add_error("dispatch_events_per_s", exc.message)
        return data

    def settings(self) -> dict:
        data = self.cleaned_data
        config = {name: data[name] for name in self.SETTINGS}
        config["sinks"] = data["sinks"]
        config["dispatch_rate"] = data["dispatch_rate"]
        if data.get("backoff_s") is not None:
            config["backoff_s"] = data["backoff_s"]
        elif self.editing:
            config["backoff_s"] = None  # cleared: no backoff
        return config

    def start_position(self) -> object:
        data = self.cleaned_data
        if data["start"] == "time":
            return {"time": data["start_time"].isoformat()}
        return data["start"]

    @classmethod
    def initial_for(cls, group) -> dict:
        initial = {name: getattr(group, name) for name in cls.SETTINGS}
        initial["streams"] = [sub.stream.full_name for sub in group.subscription_set.select_related("stream__scope")]
        initial["backoff_s"] = ", ".join(str(v) for v in group.backoff_s)
        initial["sinks"] = ", ".join(group.sink_names)
        initial["dispatch_events_per_s"] = _as_written(group.dispatch_rate.get("events_per_s"))
        return initial


def _as_written(rate: float | None) -> float | int | None:
    """A rate as a person writes it in a form: 250, not 250.0 (rates are stored as numbers)."""
    return int(rate) if rate is not None and rate == int(rate) else rate

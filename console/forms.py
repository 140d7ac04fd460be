"""Console forms. Validation is the domain's: the policy form calls parse_policy and shows its
error beside the field it names."""

from __future__ import annotations

from django import forms

from domain.errors import FieldError
from domain.policy_spec import parse_policy
from domain.times import as_utc

LIMIT_CHOICES = [("none", "none"), ("time", "time (seconds)"), ("size", "size (bytes)")]


def policy_body(data: dict) -> dict:
    """A policy form's cleaned fields as the API takes a policy (a blank min is 0)."""
    return {
        "limit_type": data["limit_type"],
        "min": data.get("min") or 0,
        "max": data.get("max"),
        "consumption_based": bool(data.get("consumption_based")),
        "subscriber_timeout_s": data.get("subscriber_timeout_s"),
        "fallback_after_s": data.get("fallback_after_s"),
    }


class TimeField(forms.DateTimeField):
    """A date and time typed in a form (UTC unless it says its offset), refused beside the field
    when UTC cannot hold it (`domain.times`: 0001-01-01T00:00:00+14:00 is year 0 in UTC)."""

    def to_python(self, value):
        at = super().to_python(value)
        if at is None:
            return None
        try:
            return as_utc(at, "time")
        except FieldError as exc:
            raise forms.ValidationError(exc.message) from None


class PolicyForm(forms.Form):
    limit_type = forms.ChoiceField(choices=LIMIT_CHOICES)
    min = forms.IntegerField(required=False, label="min")
    max = forms.IntegerField(required=False, label="max")
    consumption_based = forms.BooleanField(required=False)
    subscriber_timeout_s = forms.IntegerField(required=False, label="subscriber timeout (s)")
    fallback_after_s = forms.IntegerField(required=False, label="fall back after (s)")

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            data["spec"] = parse_policy(policy_body(data))
        except FieldError as exc:
            self.add_error(exc.field if exc.field in self.fields else None, exc.message)
        return data

    @classmethod
    def initial_for(cls, policy) -> dict:
        if policy is None:
            return {"limit_type": "none", "min": 0}
        return {
            "limit_type": policy.limit_type,
            "min": policy.min_value,
            "max": policy.max_value,
            "consumption_based": policy.consumption_based,
            "subscriber_timeout_s": policy.subscriber_timeout_s,
            "fallback_after_s": policy.fallback_after_s,
        }


CLEANUP_CHOICES = [
    ("", "no default"),
    ("delete", "delete"),
    ("compact", "compact"),
    ("compact,delete", "compact,delete"),
]
POLICY_CHOICES = [("", "no default policy"), *LIMIT_CHOICES]


class ScopeDefaultsForm(forms.Form):
    """A scope's defaults (`domain.scope_defaults`): a blank field has no default. Checked by the
    domain when saved (`retention.scope_defaults.do_set_scope_defaults`), its error shown beside
    the field it names."""

    limit_type = forms.ChoiceField(choices=POLICY_CHOICES, required=False, label="limits")
    min = forms.IntegerField(required=False, label="min")
    max = forms.IntegerField(required=False, label="max")
    consumption_based = forms.BooleanField(required=False)
    subscriber_timeout_s = forms.IntegerField(required=False, label="subscriber timeout (s)")
    fallback_after_s = forms.IntegerField(required=False, label="fall back after (s)")
    cleanup_policy = forms.ChoiceField(choices=CLEANUP_CHOICES, required=False)
    min_compaction_lag_s = forms.IntegerField(required=False, label="min compaction lag (s)")
    delete_retention_s = forms.IntegerField(required=False, label="tombstones kept (s)")
    compacted_retention_s = forms.IntegerField(required=False, label="view retention (s)")
    compacted_retention_bytes = forms.IntegerField(required=False, label="view retention (bytes)")

    POLICY_FIELDS = ("min", "max", "consumption_based", "subscriber_timeout_s", "fallback_after_s")
    COMPACTION_FIELDS = (
        "min_compaction_lag_s",
        "delete_retention_s",
        "compacted_retention_s",
        "compacted_retention_bytes",
    )

    def body(self) -> dict:
        """The defaults as `PUT /scopes/{scope}/defaults/` takes them."""
        data = self.cleaned_data
        body: dict = {}
        if data.get("limit_type"):
            body["retention_policy"] = policy_body(data)
        if data.get("cleanup_policy"):
            body["cleanup_policy"] = data["cleanup_policy"]
        for name in self.COMPACTION_FIELDS:
            if data.get(name) is not None:
                body[name] = data[name]
        return body

    def show(self, exc: FieldError) -> None:
        """A refusal of the domain beside the field it names (`retention_policy.min` → `min`)."""
        name = exc.field.removeprefix("retention_policy.")
        self.add_error(name if name in self.fields else None, exc.message)

    @classmethod
    def initial_for(cls, defaults: dict) -> dict:
        policy = defaults.get("retention_policy") or {}
        initial = {name: policy.get(name) for name in cls.POLICY_FIELDS}
        initial["limit_type"] = policy.get("limit_type", "")
        initial["cleanup_policy"] = defaults.get("cleanup_policy") or ""
        initial.update({name: defaults.get(name) for name in cls.COMPACTION_FIELDS})
        return initial

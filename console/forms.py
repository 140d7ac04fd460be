"""Console forms. Validation is the domain's: the policy form calls parse_policy and shows its
error beside the field it names."""

from __future__ import annotations

from django import forms

from domain.errors import FieldError
from domain.policy_spec import parse_policy

LIMIT_CHOICES = [("none", "none"), ("time", "time (seconds)"), ("size", "size (bytes)")]


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
        raw = {
            "limit_type": data["limit_type"],
            "min": data.get("min") or 0,
            "max": data.get("max"),
            "consumption_based": bool(data.get("consumption_based")),
            "subscriber_timeout_s": data.get("subscriber_timeout_s"),
            "fallback_after_s": data.get("fallback_after_s"),
        }
        try:
            data["spec"] = parse_policy(raw)
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

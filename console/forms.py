"""Console forms of a stream's retention policy, its scale and scaling policy, and a scope's
defaults. Their fields are made from the domain's tables (`console.declared`); validation is the
domain's: the policy form calls parse_policy, the scaling policy form's body is checked by the
service that saves it, and each shows the domain's error beside the field it names."""

from __future__ import annotations

from typing import Any

from django import forms

from console.declared import blank_is_default, declared_form, declared_form_field, limit_units_agree
from console.segments import KIND_WORDS
from domain.autoscale import KINDS, policy_of
from domain.compaction import COMPACTION_FIELDS, COMPACTION_NUMBERS
from domain.errors import FieldError
from domain.policy_spec import POLICY_FIELDS, parse_policy
from domain.times import as_utc

POLICY_LIMITS = tuple(name for name in POLICY_FIELDS if name != "limit_type")  # a policy's fields but its type


def policy_body(data: dict) -> dict:
    """A policy form's cleaned fields as the API takes a policy (a blank field is its default)."""
    return blank_is_default(POLICY_FIELDS, data)


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


# the forms' bases made from the tables (`Any`: a type checker cannot follow a class made at run time)
_PolicyFields: Any = declared_form("PolicyFields", POLICY_FIELDS)
_ScopeCompactionFields: Any = declared_form(
    "ScopeCompactionFields", COMPACTION_FIELDS, COMPACTION_NUMBERS, required=False
)
_ScopePolicyFields: Any = declared_form("ScopePolicyFields", POLICY_FIELDS, required=False)


class PolicyForm(_PolicyFields):
    """A stream's own policy: the fields of `POLICY_FIELDS`."""

    def clean(self):
        data = super().clean()
        limit_units_agree(self, data.get("limit_type"))
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
        return policy.spec().as_dict()


class ScopeDefaultsForm(_ScopeCompactionFields, _ScopePolicyFields):
    """A scope's defaults (`domain.scope_defaults`): a blank field has no default. Checked by the
    domain when saved (`retention.scope_defaults.do_set_scope_defaults`), its error shown beside
    the field it names."""

    limit_type = declared_form_field(POLICY_FIELDS["limit_type"], blank="no default policy", label="limits")
    cleanup_policy = declared_form_field(COMPACTION_FIELDS["cleanup_policy"], blank="no default")

    field_order = ["limit_type", *POLICY_LIMITS, "cleanup_policy", *COMPACTION_NUMBERS]
    # what the page lays out in its two panels, besides limit_type and cleanup_policy
    POLICY_FIELDS = POLICY_LIMITS
    COMPACTION_FIELDS = COMPACTION_NUMBERS

    def clean(self):
        data = super().clean()
        limit_units_agree(self, data.get("limit_type"))
        return data

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


class ScaleForm(forms.Form):
    """The stream page's scale form (operators): split an active segment into equal parts, or
    merge it with its right-hand neighbour. `epoch` is the stream's as the page showed it: a
    stream that scaled since refuses the form (`epoch_mismatch`) rather than scaling twice."""

    action = forms.ChoiceField(choices=[("split", "Split"), ("merge", "Merge with the next")])
    segment = forms.ChoiceField(choices=[])
    parts = forms.IntegerField(min_value=2, max_value=16, initial=2, required=False)
    epoch = forms.IntegerField(min_value=0, widget=forms.HiddenInput)

    def __init__(self, *args, layout, **kwargs):
        super().__init__(*args, **kwargs)
        self.layout = layout
        self.fields["segment"].choices = [(s.id, f"{s.id}  [{s.lo:.4g}, {s.hi:.4g})") for s in layout.active]

    def scale(self) -> tuple[list[str], list[list[float]]]:
        """What to seal and the new ranges, from the cleaned fields (a merge of the last segment,
        which has no right-hand neighbour, is refused naming `segment`)."""
        s = self.layout[self.cleaned_data["segment"]]
        if self.cleaned_data["action"] == "split":
            parts = self.cleaned_data.get("parts") or 2
            edges = [s.lo + (s.hi - s.lo) * i / parts for i in range(parts)] + [s.hi]
            return [s.id], [[a, b] for a, b in zip(edges, edges[1:], strict=False)]
        right = next((t for t in self.layout.active if t.lo == s.hi), None)
        if right is None:
            raise FieldError("segment", f"segment {s.id} holds the last keys: it has no neighbour to its right")
        return [s.id, right.id], [[s.lo, right.hi]]


class ScalingPolicyForm(forms.Form):
    """The Segments panel's scaling policy form (operators). It only turns typed text into the body
    `PUT …/scaling-policy/` takes (`body`); `streams.services.do_set_scaling_policy` checks and
    saves it, and `show` puts its refusal beside the field it names. A blank number is the
    policy's default (`domain.autoscale.check_scaling_policy`)."""

    type = forms.ChoiceField(label="Scales", choices=[(kind, KIND_WORDS[kind]) for kind in KINDS])
    target_rate = forms.FloatField(label="Target rate", required=False)
    scale_factor = forms.IntegerField(label="Scale factor", required=False)
    min_segments = forms.IntegerField(label="Min segments", required=False)

    def body(self) -> dict:
        data = self.cleaned_data
        body = {"type": data["type"]}
        # the rate box keeps a rate policy's rate while `fixed` is chosen (a switch back finds
        # it): a fixed policy ignores it here, where the API refuses one sent with `fixed`
        if data["type"] != "fixed" and data.get("target_rate") is not None:
            body["target_rate"] = data["target_rate"]
        for name in ("scale_factor", "min_segments"):
            if data.get(name) is not None:
                body[name] = data[name]
        return body

    def show(self, exc: FieldError) -> None:
        """A refusal of the domain beside the field it names (`scaling_policy.target_rate` →
        `target_rate`)."""
        name = exc.field.removeprefix("scaling_policy.")
        self.add_error(name if name in self.fields else None, exc.message)

    @classmethod
    def initial_for(cls, stored: dict) -> dict:
        """The form as the stream's stored `scaling_policy` fills it (empty: fixed, 1 segment)."""
        policy = policy_of(stored)
        return {
            "type": policy.kind,
            "target_rate": format(policy.target_rate, ".15g") if policy.target_rate else None,  # 1500, not 1500.0
            "scale_factor": policy.scale_factor,
            "min_segments": policy.min_segments,
        }

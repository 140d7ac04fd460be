from __future__ import annotations

from django import forms

from access.rules import KeyKind
from console.forms import TimeField


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="what the key is for, e.g. billing-service")
    kind = forms.ChoiceField(
        choices=[
            (KeyKind.READER_GROUP.value, "consume one reader group"),
            (KeyKind.PUBLISH.value, "publish on streams"),
        ]
    )
    reader_group = forms.CharField(required=False, help_text="scope/name (for a reader-group key)")
    streams = forms.CharField(required=False, help_text="scope/name, comma-separated (for a publish key)")
    expires_at = TimeField(
        required=False,
        help_text="optional, e.g. 2027-01-31 12:00",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )

    def key_request(self) -> dict:
        """The form's fields as access.services.check_key_request takes them."""
        data = self.cleaned_data
        request = {"name": data["name"], "kind": data["kind"], "expires_at": data.get("expires_at")}
        if data["kind"] == KeyKind.READER_GROUP:
            request["reader_group"] = data["reader_group"].strip() or None
        else:
            request["streams"] = [s.strip() for s in data["streams"].split(",") if s.strip()]
        return request

"""A retention policy as a user writes it, validated field by field.

Its fields are declared once, in `POLICY_FIELDS` (`domain.fields`): the API's serializers and the
console's forms are made from that table, and `parse_policy`, which the API, the console and a
scope's defaults all call, checks a policy by it, with errors that name the field. Plain Python.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from domain.errors import FieldError
from domain.fields import MAX_BIGINT_COLUMN, MAX_INT_COLUMN, Choice, Field, Flag, Whole, take

__all__ = ["LIMIT_TYPES", "MAX_BIGINT_COLUMN", "MAX_INT_COLUMN", "POLICY_FIELDS", "PolicySpec", "parse_policy"]

# A policy's min and max are 64-bit columns, its two durations 32-bit ones.
POLICY_FIELDS: dict[str, Field] = {
    "limit_type": Choice(
        (("time", "time (seconds)"), ("size", "size (bytes)"), ("none", "none")),
        label="retention limits",
        help="what min and max measure: a time in seconds, or the stream's payload bytes",
    ),
    "min": Whole(0, MAX_BIGINT_COLUMN, label="min", help="seconds or bytes always kept", default=0, unit="limit"),
    "max": Whole(
        0, MAX_BIGINT_COLUMN, label="max", help="never held beyond (blank: no maximum)", nullable=True, unit="limit"
    ),
    "consumption_based": Flag(label="consumption-based", help="release only what subscribers processed"),
    "subscriber_timeout_s": Whole(
        0,
        MAX_INT_COLUMN,
        label="subscriber timeout (s)",
        help="a subscriber whose cut is older holds nothing (blank: never stale)",
        nullable=True,
        unit="seconds",
        unset="never stale",
    ),
    "fallback_after_s": Whole(
        0,
        MAX_INT_COLUMN,
        label="fall back after (s)",
        help="no subscriber active this long: the limits alone decide (blank: wait for ever)",
        nullable=True,
        unit="seconds",
        unset="never",
    ),
}
LIMIT_TYPES = POLICY_FIELDS["limit_type"].values  # type: ignore[union-attr]


@dataclass(frozen=True, slots=True)
class PolicySpec:
    limit_type: str
    min: int
    max: int | None
    consumption_based: bool
    subscriber_timeout_s: int | None
    fallback_after_s: int | None

    def as_dict(self) -> dict:
        return asdict(self)


def parse_policy(data: object, prefix: str = "") -> PolicySpec:
    """A policy as the API takes it (`limit_type` required, the rest as `POLICY_FIELDS` says),
    checked field by field, then as a whole: max at least min, and no limits for `none`."""
    if not isinstance(data, dict):
        raise FieldError(prefix.rstrip(".") or "retention_policy", "must be an object")
    unknown = sorted(set(data) - set(POLICY_FIELDS))
    if unknown:
        raise FieldError(f"{prefix}{unknown[0]}", "is not a field of a retention policy")
    if "limit_type" not in data:  # required: no default
        POLICY_FIELDS["limit_type"].check(None, f"{prefix}limit_type")
    values = {name: take(POLICY_FIELDS, data, name, prefix) for name in POLICY_FIELDS}
    if values["max"] is not None and values["max"] < values["min"]:  # type: ignore[operator]
        raise FieldError(f"{prefix}max", f"must be at least min ({values['min']})")
    if values["limit_type"] == "none" and (values["min"] or values["max"] is not None):
        raise FieldError(f"{prefix}limit_type", "min and max need limit_type 'time' or 'size'")
    return PolicySpec(**values)  # type: ignore[arg-type]

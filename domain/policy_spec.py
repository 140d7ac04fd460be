"""A retention policy as a user writes it (DESIGN.md §6, §10), validated field by field.

Plain Python: the API and the console both call `parse_policy`, so a policy is checked once, the
same way, with errors that name the field.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from domain.errors import FieldError

LIMIT_TYPES = ("time", "size", "none")
# the largest numbers the columns behind such fields hold (bigint, integer; api/serializers.py
# uses them too): a larger one was a database error, a 500, rather than a 400 naming the field.
# A policy's min and max are 64-bit, its two durations 32-bit.
MAX_BIGINT_COLUMN = 2**63 - 1
MAX_INT_COLUMN = 2**31 - 1
FIELDS = frozenset({"limit_type", "min", "max", "consumption_based", "subscriber_timeout_s", "fallback_after_s"})


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
    def name(f: str) -> str:
        return f"{prefix}{f}"

    if not isinstance(data, dict):
        raise FieldError(prefix.rstrip(".") or "retention_policy", "must be an object")
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise FieldError(name(unknown[0]), "is not a field of a retention policy")
    limit_type = data.get("limit_type")
    if limit_type not in LIMIT_TYPES:
        raise FieldError(name("limit_type"), f"must be one of {', '.join(LIMIT_TYPES)}")
    minimum = _count(data.get("min", 0), name("min"))
    maximum = data.get("max")
    if maximum is not None:
        maximum = _count(maximum, name("max"))
        if maximum < minimum:
            raise FieldError(name("max"), f"must be at least min ({minimum})")
    if limit_type == "none" and (minimum or maximum is not None):
        raise FieldError(name("limit_type"), "min and max need limit_type 'time' or 'size'")
    consumption = data.get("consumption_based", False)
    if not isinstance(consumption, bool):
        raise FieldError(name("consumption_based"), "must be true or false")
    timeout = _optional_count(data.get("subscriber_timeout_s"), name("subscriber_timeout_s"), MAX_INT_COLUMN)
    fallback = _optional_count(data.get("fallback_after_s"), name("fallback_after_s"), MAX_INT_COLUMN)
    return PolicySpec(limit_type, minimum, maximum, consumption, timeout, fallback)


def _count(value: object, field: str, largest: int = MAX_BIGINT_COLUMN) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(field, "must be a whole number")
    if value < 0:
        raise FieldError(field, "must not be negative")
    if value > largest:
        raise FieldError(field, f"must be at most {largest}")
    return value


def _optional_count(value: object, field: str, largest: int = MAX_BIGINT_COLUMN) -> int | None:
    return None if value is None else _count(value, field, largest)

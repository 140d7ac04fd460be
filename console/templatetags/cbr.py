"""Console filters: stream cuts, durations and delivery times as people read them."""

from datetime import datetime, timezone

from django import template

register = template.Library()

_UNITS = (("d", 86_400), ("h", 3600), ("min", 60), ("s", 1))


@register.filter
def cut(value) -> str:
    """`{"0": 544, "1": 426}` → `0:544 · 1:426` (segment:offset)."""
    if not isinstance(value, dict) or not value:
        return "—"
    return " · ".join(f"{seg}:{off}" for seg, off in sorted(value.items(), key=lambda kv: (len(kv[0]), kv[0])))


@register.filter
def duration(seconds) -> str:
    """86400 → `1 d`; 5400 → `1 h 30 min`; at most two units."""
    if seconds is None:
        return "—"
    seconds = int(seconds)
    if seconds == 0:
        return "0 s"
    parts = []
    for unit, size in _UNITS:
        if seconds >= size:
            parts.append(f"{seconds // size} {unit}")
            seconds %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


@register.filter
def cut_type(retention_type: str) -> str:
    """`MANUAL_RELEASE_AT_USER_STREAMCUT` → `manual`, `AUTOMATIC_…` → `automatic`."""
    return {"MANUAL_RELEASE_AT_USER_STREAMCUT": "manual", "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT": "automatic"}.get(
        retention_type, retention_type.lower()
    )


@register.filter
def from_ms(value):
    """Milliseconds since the epoch (a delivery time) → an aware datetime, for `date` and
    `naturaltime`; None stays None."""
    if value is None:
        return None
    return datetime.fromtimestamp(int(value) / 1000, tz=timezone.utc)


@register.filter
def from_iso(value):
    """An ISO 8601 time kept in JSON (a group's `removed_streams`) → an aware datetime, for `date`
    and `naturaltime`; anything else stays as it is."""
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return value

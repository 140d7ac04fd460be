"""Console filters: stream cuts and durations as people read them."""

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

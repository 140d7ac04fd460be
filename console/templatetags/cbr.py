"""Console filters: stream cuts, durations and delivery times as people read them, and a stream's
retention policy shown field by field from its declaration (`policy_rows`)."""

import re
from datetime import UTC, datetime

from django import template
from django.template.defaultfilters import capfirst

from domain.fields import Flag, Whole
from domain.policy_spec import POLICY_FIELDS
from domain.quantities import rate_text, size_text

register = template.Library()

_UNITS = (("d", 86_400), ("h", 3600), ("min", 60), ("s", 1))


@register.filter
def cut(value) -> str:
    """`{"0": 544, "1": 426}` → `0:544 · 1:426` (segment:offset)."""
    if not isinstance(value, dict) or not value:
        return "—"
    return " · ".join(f"{seg}:{off}" for seg, off in sorted(value.items(), key=lambda kv: (len(kv[0]), kv[0])))


@register.filter
def size(value) -> str:
    """Bytes, 1024-based with IEC labels (`47.7 MiB` for 50 000 000): Django's `filesizeformat`
    labels 1024-based figures KB and MB."""
    return size_text(value)


@register.filter
def per_second(value) -> str:
    """Events per second: `0.03`, `2.5`, `1,234` (`domain.quantities.rate_text`)."""
    return rate_text(value)


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
    return datetime.fromtimestamp(int(value) / 1000, tz=UTC)


@register.filter
def from_iso(value):
    """An ISO 8601 time kept in JSON (a group's `removed_streams`) → an aware datetime, for `date`
    and `naturaltime`; anything else stays as it is."""
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return value


RULES = {
    "size:limit_min": "no subscriber decides: the size limit keeps the newest min bytes",
    "time:limit_min": "no subscriber decides: the time limit keeps the newest min seconds",
    "cbr:case-i:slb": "truncate at the slowest active subscriber's cut, which keeps between min and max",
    "cbr:case-ii:limit_min": "subscribers consumed past the min limit: truncate at the min limit",
    "cbr:case-iii:limit_max": "the slowest subscriber would keep more than max: the max limit wins",
    "cbr:case-iii:slb": "beyond the max, truncating at the subscribers' cut purges as much as the max limit",
    "cbr:case-iii:slb:reject_publish": "at the max, unconsumed data is kept and publishing is refused (reject_publish)",
    "cbr:case-iv:retention_set": "the newest recorded cut at or before the subscribers' cut",
    "cbr:case-v:max_bound": "data older than the max goes, whatever the subscribers",
    "cbr:no-active:limit_max": "no subscriber is active and the max limit is exceeded",
    "cbr:fallback:limit_min": "no subscriber has been active for fallback_after_s: the min limit decides",
    "consumption:slb": "no limits: the slowest active subscriber's cut decides",
    "cbr:compaction:horizon": "held at what the compactor has read (the compacted view's horizon)",
    "none:empty-retention-set": "no retention-set record yet: this cycle records the tail, later ones can truncate",
    "none:size:nothing-old-enough": "nothing lies beyond the min limit yet",
    "none:time:nothing-old-enough": "nothing is older than the min limit yet",
    "none:no-limits": "limit type none without consumption: retention keeps everything",
    "none:no-active-subscriber": "subscribers are registered but none is active: nothing goes until the fallback or the max limit",
    "none:fallback:nothing-old-enough": "falling back to the limits, but nothing lies beyond the min yet",
    "none:no-active:max-reached": "at the max with no active subscriber: publishing is refused (reject_publish)",
    "none:case-iv:no-record-before-slb": "no recorded cut lies at or before the subscribers' cut yet",
    "none:compaction:horizon": "the compactor has not read what the policy would remove",
}


@register.filter
def rule_text(rule: str) -> str:
    """A retention rule (`cbr:case-i:slb`) as a sentence (docs/retention.md has the table)."""
    return RULES.get(rule, "")


@register.filter
def split_first(value: str) -> str:
    """`shop/billing` → `shop`."""
    return value.split("/", 1)[0]


@register.filter
def split_last(value: str) -> str:
    """`shop/billing` → `billing`."""
    return value.split("/", 1)[-1]


@register.filter
def cut_prefix(note: str) -> str:
    """An edited schedule's note (`cbr:edited by ada at …`) as people read it: `edited by ada at …`."""
    return note.removeprefix("cbr:").replace("T", " ", 1) if note else ""


@register.simple_tag
def policy_rows(policy) -> list[tuple[str, str]]:
    """A stream's policy (its row) as (label, value) pairs, one per field of `POLICY_FIELDS` but
    its limit type (which the summary shows): a duration as a duration, bytes as a size, min and
    max in what the limit type measures, a null as what it means ("never")."""
    spec = policy.spec()
    rows = []
    for name, declared in POLICY_FIELDS.items():
        if name == "limit_type":
            continue
        label = capfirst(re.sub(r" \((s|bytes)\)$", "", declared.label))
        rows.append((label, _shown(getattr(spec, name), declared, spec.limit_type)))
    return rows


def _shown(value, declared, limit_type: str) -> str:
    if isinstance(declared, Flag):
        return "yes" if value else "no"
    if value is None:
        return declared.unset if isinstance(declared, Whole) else "—"
    unit = declared.unit if isinstance(declared, Whole) else ""
    if unit == "limit":
        unit = "bytes" if limit_type == "size" else "seconds"
    if unit == "seconds":
        return duration(value)
    if unit == "bytes":
        return size_text(value)
    return str(value)

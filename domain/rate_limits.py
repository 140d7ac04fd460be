"""Rate limits (PDP-47's M4, Pulsar's publish and dispatch rates): what a stream's `publish_rate`
and a reader group's `dispatch_rate` may be. The limit itself is a token bucket in Redis shared by every web process
(`streams.rate_limits`): one second of the rate is the burst, and a batch larger than that passes
when the bucket is full and leaves a debt the next batches wait out, so the rate measured over
any window stays the setting, whatever the batch sizes and the number of processes. A group's
dispatch rate is a bucket of events its reads take from before they hand out (`groups.dispatching`):
a read hands out no more than the bucket holds (fewer deliveries, or none, never an error)."""

from __future__ import annotations

from domain.errors import FieldError

MAX_EVENTS_PER_S = 10_000_000
MAX_BYTES_PER_S = 10 * 1024**3
RATES = {"events_per_s": MAX_EVENTS_PER_S, "bytes_per_s": MAX_BYTES_PER_S}
DISPATCH_RATES = {"events_per_s": MAX_EVENTS_PER_S}


def check_publish_rate(value: object, field: str = "publish_rate") -> dict[str, float]:
    """`{"events_per_s"?: n, "bytes_per_s"?: n}`, each a positive number (a fraction allowed: one
    event every ten seconds is 0.1) up to an upper bound; `{}` or null: no limit."""
    return _check_rates(value, field, RATES, '{"events_per_s": 100, "bytes_per_s": 1048576}')


def check_dispatch_rate(value: object, field: str = "dispatch_rate") -> dict[str, float]:
    """`{"events_per_s": n}`: a positive number up to an upper bound; `{}` or null: no limit."""
    return _check_rates(value, field, DISPATCH_RATES, '{"events_per_s": 100}')


def _check_rates(value: object, field: str, rates: dict[str, int], example: str) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FieldError(field, f"must be an object: {example}")
    for name in value:
        if name not in rates:
            raise FieldError(f"{field}.{name}"[:200], f"is not a rate: {', '.join(rates)}")
    out = {}
    for name, highest in rates.items():
        if name not in value:
            continue
        rate = value[name]
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate != rate:
            raise FieldError(f"{field}.{name}", "must be a number")
        if not 0 < rate <= highest:
            raise FieldError(f"{field}.{name}", f"must be above 0 and at most {highest:,}")
        out[name] = float(rate)
    return out

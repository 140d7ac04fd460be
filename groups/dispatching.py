"""A reader group's dispatch rate (`domain.rate_limits`): one token bucket of events per group in
Redis (`lua/dispatch_bucket.lua`), shared by every web process. A read of a group with a rate
takes what it may hand out before its hand-outs (`take`, on the pass's first pipeline), hands
out no more, and gives back what it took and did not hand out (`give_back`): the rate measured
over any window stays the setting, whatever the number of consumers and processes. A read the
bucket leaves with nothing answers with fewer deliveries or none, never an error; a waiting read
waits until the bucket refills."""

from __future__ import annotations

from importlib.resources import files

from groups.models import ReaderGroup
from store.redis_connection import ScriptPipeline, get_redis, registered, scripted_pipeline
from streams import wait_stats

_BUCKET = (files("groups") / "lua" / "dispatch_bucket.lua").read_text()


def _script():
    return registered(get_redis(), _BUCKET)


def bucket_key(group: ReaderGroup) -> str:
    return f"cbr:rate:{{{group.state_key}}}:dispatch"


def limited(group: ReaderGroup) -> bool:
    return bool(group.dispatch_rate)


def take(group: ReaderGroup, want: int, pipe: ScriptPipeline | None = None, now: float | None = None):
    """Take up to `want` events from the group's bucket: (how many, the seconds until one more
    could be taken when none was). With `pipe`, queued: its answer read by `taken`. `now`: a
    clock of the caller's (tests); Redis's own otherwise, one for every process."""
    args = ["" if now is None else repr(now), group.dispatch_rate["events_per_s"], want]
    if pipe is not None:
        pipe.run_script(_script(), [bucket_key(group)], args)
        return None
    return taken(_script()(keys=[bucket_key(group)], args=args))


def taken(answer: list) -> tuple[int, float]:
    return int(answer[0]), float(answer[1])


def give_back(returns: list[tuple[ReaderGroup, int]], now: float | None = None) -> None:
    """What reads took and did not hand out, back into their groups' buckets (one round trip)."""
    returns = [(group, n) for group, n in returns if n > 0]
    if not returns:
        return
    pipe = scripted_pipeline(get_redis())
    script = _script()
    for group, n in returns:
        args = ["" if now is None else repr(now), group.dispatch_rate["events_per_s"], -n]
        pipe.run_script(script, [bucket_key(group)], args)
    pipe.execute()


def count_limited() -> None:
    """A read handed out less than it would have: `cbr_rate_limited_total{limit="dispatch"}`."""
    wait_stats.counts.add("rate:limited:dispatch")

"""Shared by bench/consume.py and its peers: event payloads, figures, and a crew of consumer
processes started together."""

import multiprocessing as mp
import queue
import time
import traceback
from dataclasses import dataclass, field

PARTS = ("cbr", "redis", "jetstream", "rabbitmq", "tracker")
PUBLISH_BATCH = 10_000
GROUP_TYPES = {"NONE": "none", "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT": "automatic"}
REDIS = "Redis Streams XREADGROUP+XACK pipelined"
JETSTREAM = "JetStream pull fetch + msg.ack()"
JETSTREAM_RAW = "JetStream raw pull request + msg.ack()"
RABBITMQ = "RabbitMQ quorum queue, basic_ack(multiple)"
TRACKER_SHUFFLED = "tracker: out-of-order acks (ack_many)"
TARGET_EVENTS_S = 50_000
TARGET_TRACKER_ACKS_S = 200_000


def payload(i: int) -> str:
    """100 bytes, numbered: events can be told apart when something goes wrong."""
    return f"{i:09d} " + "x" * 90


@dataclass
class Figure:
    name: str
    events: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    bytes_per_pending: float | None = None  # the tracker's memory figure

    @property
    def rate(self) -> float:
        return self.events / self.seconds


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def ms(values: list[float]) -> str:
    return f"p50 {pct(values, 0.5) * 1000:6.1f} ms  p99 {pct(values, 0.99) * 1000:6.1f} ms"


def script_seconds(r) -> float:
    """Seconds Redis has spent running scripts (EVALSHA, every client's) since its stats were reset."""
    stats = r.info("commandstats")
    return sum(v["usec"] for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval")) / 1e6


# -- consumer processes ------------------------------------------------------------------------
# Every peer's consumers are separate processes (spawned, so none inherits a connection or an
# event loop), each with its own connection; the clock starts when all of them are connected.


def _child(target, i: int, args: tuple, events, go) -> None:
    def start() -> None:
        events.put(("ready", i))
        go.wait()

    try:
        events.put(("done", target(i, start, *args)))
    except BaseException:
        events.put(("error", traceback.format_exc()))


def run_crew(target, consumers: int, args: tuple, while_running=None, timeout: float = 600) -> tuple[float, list[dict]]:
    """Start `consumers` processes running `target(i, start, *args)`; answers the start time and
    their results. `while_running(t0)`, when given, runs in this process meanwhile."""
    ctx = mp.get_context("spawn")
    events, go = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_child, args=(target, i, args, events, go), daemon=True) for i in range(consumers)]
    for p in procs:
        p.start()
    try:
        ready = 0
        while ready < consumers:
            kind, value = events.get(timeout=120)
            if kind != "ready":
                raise SystemExit(f"a consumer failed before the start:\n{value}")
            ready += 1
        t0 = time.monotonic()
        go.set()
        if while_running is not None:
            while_running(t0)
        results = []
        while len(results) < consumers:
            try:
                kind, value = events.get(timeout=timeout)
            except queue.Empty:
                raise SystemExit("consumers did not finish in time") from None
            if kind == "error":
                raise SystemExit(f"a consumer failed:\n{value}")
            results.append(value)
        return t0, results
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()


def settle(idle_below: float = 15.0, at_most_s: float = 20.0) -> None:
    """Wait until the machine is quiet (CPU below `idle_below` % over half a second) before a
    figure: each party starts on a machine the previous one has left (JetStream, for one, goes on
    deleting and compacting the acked messages' files after its run; publishing the next figure's
    events is part of the party's own untimed set-up, after which JetStream settles again)."""
    import psutil

    deadline = time.monotonic() + at_most_s
    while psutil.cpu_percent(interval=0.5) >= idle_below:
        if time.monotonic() > deadline:
            print(f"    (the machine did not settle below {idle_below:.0f} % CPU in {at_most_s:.0f} s)", flush=True)
            return

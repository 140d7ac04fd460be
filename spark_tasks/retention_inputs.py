"""`Inputs` and `Decision` as flat rows of JSON strings, so that a Spark job can carry them: one
row per stream, grouped by `stream_id`, decided by the same `decide`. Plain Python."""

from __future__ import annotations

from dataclasses import asdict

import orjson

from domain.retention import Decision, Inputs, Policy, Subscriber, decide
from domain.retention_set import RetentionRecord

INPUT_COLUMNS = ("stream_id", "now", "policy", "retention_set", "subscribers")
DECISION_COLUMNS = ("stream_id", "cut", "rule", "slb", "active", "at_max", "considered")


def encode_inputs(stream_id: int, inputs: Inputs) -> dict:
    return {
        "stream_id": stream_id,
        "now": inputs.now,
        "policy": orjson.dumps(asdict(inputs.policy)).decode(),
        "retention_set": orjson.dumps([[r.time, r.size, dict(r.cut)] for r in inputs.retention_set]).decode(),
        "subscribers": orjson.dumps(
            [
                [
                    s.name,
                    dict(s.cut) if s.cut is not None else None,
                    dict(s.cut_sizes) if s.cut_sizes is not None else None,
                    s.acknowledged_at,
                    s.subscribed_at,
                ]
                for s in inputs.subscribers
            ]
        ).decode(),
    }


def decode_inputs(row) -> Inputs:
    return Inputs(
        now=float(row["now"]),
        policy=Policy(**orjson.loads(row["policy"])),
        retention_set=tuple(RetentionRecord(t, size, cut) for t, size, cut in orjson.loads(row["retention_set"])),
        subscribers=tuple(
            Subscriber(name, cut, sizes, acked, since)
            for name, cut, sizes, acked, since in orjson.loads(row["subscribers"])
        ),
    )


def encode_decision(stream_id: int, decision: Decision, considered: list | None = None) -> dict:
    return {
        "stream_id": stream_id,
        "cut": None if decision.cut is None else orjson.dumps(dict(decision.cut)).decode(),
        "rule": decision.rule,
        "slb": None if decision.slb is None else orjson.dumps(dict(decision.slb)).decode(),
        "active": orjson.dumps(list(decision.active)).decode(),
        "at_max": decision.at_max,
        "considered": orjson.dumps(considered or []).decode(),
    }


def decode_decision(row) -> tuple[Decision, list]:
    """The decision and the subscribers it weighed (name, cut, acknowledged_at)."""
    decision = Decision(
        cut=None if row["cut"] is None else orjson.loads(row["cut"]),
        rule=row["rule"],
        slb=None if row["slb"] is None else orjson.loads(row["slb"]),
        active=tuple(orjson.loads(row["active"])),
        at_max=bool(row["at_max"]),
    )
    return decision, orjson.loads(row["considered"])


def considered(inputs: Inputs, decision: Decision) -> list[dict]:
    """The subscribers a decision weighed, with their cuts, for the truncation record."""
    return [
        {"name": s.name, "cut": dict(s.cut), "acknowledged_at": s.acknowledged_at}
        for s in inputs.subscribers
        if s.name in decision.active and s.cut is not None  # weighed: active, so with a cut
    ]


def decide_row(row) -> dict:
    """What the Spark job applies to each stream's row: decode, decide, encode."""
    inputs = decode_inputs(row)
    decision = decide(inputs)
    return encode_decision(int(row["stream_id"]), decision, considered(inputs, decision))

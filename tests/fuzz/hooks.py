"""Schemathesis hooks for tests/fuzz/test_schemathesis.py (loaded through SCHEMATHESIS_HOOKS).

Generated path parameters rarely name anything that exists, so most cases would stop at a 404.
These hooks swap a well-formed generated name for one of the seeded objects of the right kind
(`CBR_FUZZ_WORLD`, JSON written by the test) most of the time, through a Hypothesis strategy, so
the run stays deterministic. Malformed names (negative cases) are left alone: they must stay a 404.
Deletions keep the generated names: the seeded world has to last the whole run; stateful links
create what they delete.
"""

from __future__ import annotations

import json
import os
import re

import schemathesis
from hypothesis import strategies as st
from hypothesis.internal import lambda_sources

WORLD = json.loads(os.environ.get("CBR_FUZZ_WORLD", "{}"))
NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def _describe_lambda(f, _describe=lambda_sources._lambda_description):
    """Hypothesis names a filter's lambda by parsing its module's source; on CPython 3.11.7 that
    parse, from a worker thread deep in schemathesis's coverage walk, can fail with "AST
    constructor recursion depth mismatch" (a SystemError) and end the operation's run as an
    error. The name is only for display: fall back to a plain one."""
    try:
        return _describe(f)
    except (SystemError, RecursionError):
        return "lambda: <unknown>"


lambda_sources._lambda_description = _describe_lambda


def _kind(path: str) -> str | None:
    if path.startswith("/api/v1/streams/{scope}/{name}/"):
        return "streams"
    if path.startswith("/api/v1/reader-groups/{scope}/{name}/checkpoints/{checkpoint}/"):
        return "checkpoints"
    if path.startswith("/api/v1/reader-groups/{scope}/{name}/"):
        return "reader_groups"
    if path.startswith("/api/v1/retention/cycles/{id}/"):
        return "cycles"
    if path.startswith("/api/v1/api-keys/{prefix}/"):
        return "api_keys"
    return None


def _well_formed(params: dict) -> bool:
    return all(
        isinstance(v, int) if k == "id" else isinstance(v, str) and NAME.fullmatch(v) is not None
        for k, v in params.items()
    )


@schemathesis.hook
def flatmap_path_parameters(context, path_parameters):
    operation = context.operation
    kind = _kind(operation.path) if operation is not None else None
    known = WORLD.get(kind or "", [])
    if not known or not path_parameters or operation.method.lower() == "delete" or not _well_formed(path_parameters):
        return st.just(path_parameters)
    # three in four cases hit a seeded object; the rest keep the generated (unknown) one
    return st.sampled_from([*known, *known, *known, path_parameters] if len(known) == 1 else [*known, path_parameters])


SEEDED_NAMES = {(p["scope"], p["name"]) for kind in ("streams", "reader_groups") for p in WORLD.get(kind, [])}
SEEDED_KEYS = {p["prefix"] for p in WORLD.get("api_keys", [])}


@schemathesis.hook
def before_call(context, case, kwargs):
    """The seeded world has to last the run: a deletion that names a seeded object (the coverage
    phase reuses mapped names across methods; stateful links follow lists) is sent for a name next
    to it, which does not exist: a 404, as for any unknown name."""
    params = case.path_parameters or {}
    if case.method.upper() != "DELETE":
        return
    if (params.get("scope"), params.get("name")) in SEEDED_NAMES:
        case.path_parameters = {**params, "name": params["name"] + "-gone"}
    elif params.get("prefix") in SEEDED_KEYS:
        case.path_parameters = {**params, "prefix": params["prefix"] + "-gone"}

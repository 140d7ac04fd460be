"""A domain error names a field and a code, never an HTTP status; the API gives each code its
status from one table (`api.errors.STATUS_OF_CODE`)."""

import ast
import inspect
from pathlib import Path

from api.errors import STATUS_OF_CODE
from domain.errors import FieldError
from spark_tasks.shipping import PACKAGES  # the project's first-party packages, listed once

ROOT = Path(__file__).resolve().parents[2]


def raised_codes() -> dict[str, list[str]]:
    """Each literal code a `FieldError(...)` in the project's own code is built with, and where."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py")):
        name = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "FieldError"
            ):
                continue
            code = (
                node.args[2] if len(node.args) > 2 else next((k.value for k in node.keywords if k.arg == "code"), None)
            )
            if isinstance(code, ast.Constant):
                found.setdefault(code.value, []).append(f"{name}:{node.lineno}")
    return found


def test_a_field_error_carries_no_http_status():
    assert "status" not in inspect.signature(FieldError).parameters
    assert not hasattr(FieldError("x", "y"), "status")


def test_every_code_raised_has_its_status_and_every_status_listed_is_raised():
    found = raised_codes()
    assert {"stream_full", "duplicate", "stream_not_found", "event_too_large"} <= set(found)  # the scan sees them
    missing = {code: where for code, where in found.items() if code not in STATUS_OF_CODE}
    assert missing == {}
    # "invalid" is the default code, "lease_lost" is chosen at run time (groups/consuming/acking.py)
    unused = set(STATUS_OF_CODE) - set(found) - {"invalid", "lease_lost"}
    assert unused == set()

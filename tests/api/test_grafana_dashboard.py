"""The Grafana dashboard shipped in docs/grafana/ asks only for series /metrics serves, and shows
every family it serves (a renamed or new metric fails here until the dashboard follows)."""

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "cbr-dashboard.json"
DEPRECATED = {"cbr_subscriber_lag_events"}  # served under its former name; the dashboard shows the new one
SUFFIXES = {
    "counter": ("",),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
}  # TYPE names a counter with _total


def served(client) -> dict[str, str]:
    """Every metric family /metrics declares (with or without samples), with its type."""
    text = client.get("/metrics").content.decode()
    return dict(re.findall(r"^# TYPE (cbr_\w+) (\w+)$", text, re.M))


def queries(dashboard: dict) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    return exprs + [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]


def test_every_query_names_a_served_series_and_every_family_is_shown(client):
    dashboard = json.loads(DASHBOARD.read_text())
    families = served(client)
    assert len(families) > 20
    samples = {f + suffix: f for f, kind in families.items() for suffix in SUFFIXES[kind]}
    asked = {name for expr in queries(dashboard) for name in re.findall(r"\bcbr_\w+", expr)}
    assert asked - samples.keys() == set()
    assert set(families) - DEPRECATED - {samples[name] for name in asked} == set()
    assert set(families) >= DEPRECATED


def test_the_dashboard_is_well_formed(client):
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for p in dashboard["panels"]:
        box = p["gridPos"]
        assert box["x"] + box["w"] <= 24, p["title"]
        for target in p.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}", p["title"]
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
    boxes = [(p["gridPos"]["x"], p["gridPos"]["y"]) for p in dashboard["panels"]]
    assert len(boxes) == len(set(boxes))  # no two panels on one spot
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    used = {m for expr in queries(dashboard) for m in re.findall(r"\$(\w+)", expr)} - {"__rate_interval", "__all"}
    assert used <= variables

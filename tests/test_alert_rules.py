"""The alerting rules CBR ships (docs/grafana/alerts.yml): each names only series /metrics serves,
with the labels its messages use, and has its runbook line in docs/monitoring.md; where promtool
(Debian's `prometheus` package; CI installs it) is on the machine, it loads them too."""

import re
import shutil
import subprocess
from pathlib import Path

import factories
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from domain.events import EventIn
from retention.models import RetentionCycle
from streams import services

pytestmark = pytest.mark.django_db

DOCS = Path(__file__).resolve().parents[1] / "docs"
RULES = DOCS / "grafana" / "alerts.yml"


def rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


@pytest.fixture
def served(client, data_dir):
    """/metrics of a world where every family the rules read has samples: a stream at its max, a
    subscriber, a group that dead-letters."""
    stream = factories.make_stream(policy={"limit_type": "size", "min": 0, "consumption_based": True})
    services.do_publish(stream, [EventIn(b"x")])
    factories.make_group(stream, retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")
    RetentionCycle.objects.create(state="failed", trigger="beat")
    body = client.get("/metrics").content.decode()
    return {s.name: s.labels for family in text_string_to_metric_families(body) for s in family.samples}


def test_every_rule_reads_series_metrics_serves_with_the_labels_it_names(served):
    assert len(rules()) >= 8
    for rule in rules():
        names = set(re.findall(r"\bcbr_[a-z_]+\b", rule["expr"]))
        assert names, rule["alert"]
        for name in names:
            assert name in served, (rule["alert"], name)
        text = rule["annotations"]["summary"] + rule["annotations"]["description"]
        used = set(re.findall(r"\$labels\.(\w+)", text)) | set(re.findall(r"(\w+)=~?\"", rule["expr"]))
        for label in used:
            assert any(label in served[name] for name in names), (rule["alert"], label)


def test_every_rule_has_its_runbook_line():
    monitoring = (DOCS / "monitoring.md").read_text()
    for rule in rules():
        assert f"`{rule['alert']}`" in monitoring, rule["alert"]
        assert "docs/monitoring.md#alerts" in rule["annotations"]["description"], rule["alert"]


def test_promtool_loads_the_rules_where_it_is_installed():
    promtool = shutil.which("promtool")
    if promtool is None:  # the two tests above hold the rules to /metrics without it
        return
    done = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules())} rules found" in done.stdout

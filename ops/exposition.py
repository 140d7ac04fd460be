"""The Prometheus text format (0.0.4) for /metrics, written straight from label values: byte for
byte what prometheus_client's `generate_latest` writes for the same gauges and counters
(tests/api/test_metrics_exposition.py compares them), without an object per sample and without
sorting and escaping the labels again for every sample of every family: with 10 000 reader
groups that was most of a scrape. Histograms, a few samples each, stay prometheus_client's. It
only formats; what is measured is ops.metrics'."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString


def label_set(**labels: str) -> str:
    """Labels as a sample line shows them: sorted by name, each value escaped. Made once and
    given to every family that has the same labels."""
    return ",".join(f'{name}="{_escaped(value)}"' for name, value in sorted(labels.items()))


def _escaped(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class Family:
    """One gauge or counter family and its samples, as text. A counter is named with `_total`
    in its HELP and TYPE lines and its samples, as prometheus_client names it."""

    def __init__(self, name: str, documentation: str, kind: str = "gauge"):
        if kind not in ("gauge", "counter"):
            raise ValueError(f"{kind!r}: only gauges and counters are written here")
        self.name = f"{name}_total" if kind == "counter" else name
        doc = documentation.replace("\\", r"\\").replace("\n", r"\n")
        self.lines = [f"# HELP {self.name} {doc}\n# TYPE {self.name} {kind}\n"]

    def add(self, labels: str, value: float) -> None:
        """A sample; `labels` from `label_set`, "" for none."""
        if labels:
            self.lines.append(f"{self.name}{{{labels}}} {_number(value)}\n")
        else:
            self.lines.append(f"{self.name} {_number(value)}\n")


def _number(value: float) -> str:
    """`floatToGoString`, with the common case first: a count below a million is "<n>.0" (from a
    million on Go, and so prometheus_client, writes an exponent)."""
    if type(value) is int and -1_000_000 < value < 1_000_000:
        return f"{value}.0"
    return floatToGoString(value)


class _Only:
    """A collector of one prometheus_client family, for `generate_latest`."""

    def __init__(self, metric: Metric):
        self.metric = metric

    def collect(self) -> list[Metric]:
        return [self.metric]


def exposition(families: Iterable[Family | Metric]) -> bytes:
    """The families in the order given, `Family`s as they are and prometheus_client's as it
    writes them."""
    parts: list[str] = []
    for family in families:
        if isinstance(family, Family):
            parts += family.lines
        else:
            parts.append(generate_latest(_Only(family)).decode())
    return "".join(parts).encode()

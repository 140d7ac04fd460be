"""The window between a scale's commit and its seal in the store: a process that still routes by
the older layout must not append to a sealed-by-the-layout segment after another process has
appended to its successor (readers read a predecessor to its end first: the key's events would
come out of order). An append by a layout seals every segment that layout says is sealed, once,
before it writes (`StreamLog.append`); the stale process's append is then refused and routed again."""

import pytest

from domain.events import EventIn
from domain.segment_layout import Layout
from store.segment import StoreConfig
from store.store import SealedSegments, SegmentStore


def test_an_append_by_a_newer_layout_seals_its_predecessors_first(tmp_path):
    store = SegmentStore(tmp_path / "streams", StoreConfig(chunk_bytes=4096))
    old = Layout.fixed(1)
    new = old.scale(["0"], [[0.0, 0.5], [0.5, 1.0]], ["1", "2"]).layout
    stale, fresh = store.stream("s", old), store.stream("s", new)
    stale.append([EventIn(b"before the scale", routing_key=b"k")])
    # the scale committed its epoch; its process has not sealed segment 0 in the store yet
    first = fresh.append([EventIn(b"416", routing_key=b"k")])[0]
    assert first.segment in ("1", "2")
    with pytest.raises(SealedSegments):  # the stale process's next append of that key
        stale.append([EventIn(b"417", routing_key=b"k")])
    later = store.stream("s", new)
    payloads = [r.record.payload for r in later.read({}, 10)[0]]
    assert payloads == [b"before the scale", b"416"]

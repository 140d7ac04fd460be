"""A round's batch split into FAN_OUT scripts: the scripts run one at a time and a group's read may
come between two of them, so each segment's chunks go in delivery-time order (review)."""

from groups import delayed_release


class Pipe:
    def execute(self):
        return []


class Redis:
    def pipeline(self, transaction=True):
        return Pipe()


class Tracker:
    def __init__(self):
        self.parts = []

    def fan_out(self, part, pipe):
        self.parts.append(part)


def test_a_segments_fan_out_chunks_go_in_delivery_time_order(monkeypatch):
    # given a batch whose offsets are not in time order (queued ones first, then those loaded)
    monkeypatch.setattr(delayed_release, "FAN_OUT_CHUNK", 2)
    monkeypatch.setattr(delayed_release, "get_redis", Redis)
    monkeypatch.setattr(delayed_release, "released_packed", lambda offs, ats: list(zip(ats, offs)))
    released = {0: {10: 9_000, 11: 9_500, 12: 1_000, 13: 2_000, 14: 9_200}}
    tracker = Tracker()
    # when
    delayed_release.fan_out(None, released, [(0, tracker)])
    # then no chunk holds an event due before one of an earlier chunk, and each goes out once
    flat = [item for part in tracker.parts for item in part]
    assert flat == sorted(flat)
    assert sorted(off for _, off in flat) == [10, 11, 12, 13, 14]
    assert all(len(part) <= 2 for part in tracker.parts)

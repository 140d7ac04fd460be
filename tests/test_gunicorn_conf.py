"""cbrweb/gunicorn_conf.py without a server: the setting's parsing and the hook's rule."""

import gc
import importlib
from types import SimpleNamespace

import pytest

import cbrweb.gunicorn_conf as conf


def load(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("CBR_WEB_KEEPALIVE_REQUESTS", raising=False)
    else:
        monkeypatch.setenv("CBR_WEB_KEEPALIVE_REQUESTS", value)
    return importlib.reload(conf)


@pytest.fixture(autouse=True)
def _reload_after(monkeypatch):
    yield
    monkeypatch.undo()
    importlib.reload(conf)


def closes(module, req_number):
    req = SimpleNamespace(req_number=req_number, must_close=False)
    module.pre_request(None, req)
    return req.must_close


def test_the_default_closes_the_tenth_request(monkeypatch):
    module = load(monkeypatch, None)
    assert [n for n in range(1, 31) if closes(module, n)][:1] == [10]


def test_zero_keeps_connections_open(monkeypatch):
    module = load(monkeypatch, "0")
    assert not any(closes(module, n) for n in (1, 100, 10**6))


@pytest.mark.parametrize("bad", ["-1", "ten", "1.5", ""])
def test_a_bad_value_stops_the_server_naming_the_setting(monkeypatch, bad):
    with pytest.raises(SystemExit, match="CBR_WEB_KEEPALIVE_REQUESTS must be a whole number"):
        load(monkeypatch, bad)


def test_a_worker_freezes_what_it_loaded_and_collects_young_objects_less_often(monkeypatch):
    monkeypatch.delenv("CBR_WEB_GC_FREEZE", raising=False)
    module = importlib.reload(conf)
    before = gc.get_threshold()
    try:
        module.post_worker_init(None)
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (module.GC_GEN0, *before[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_the_collector_can_be_left_as_python_sets_it(monkeypatch):
    monkeypatch.setenv("CBR_WEB_GC_FREEZE", "0")
    module = importlib.reload(conf)
    before = gc.get_threshold()
    module.post_worker_init(None)
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before


def test_a_bad_gc_setting_stops_the_server_naming_it(monkeypatch):
    monkeypatch.setenv("CBR_WEB_GC_FREEZE", "yes")
    with pytest.raises(SystemExit, match="CBR_WEB_GC_FREEZE"):
        importlib.reload(conf)

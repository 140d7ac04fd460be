"""cbrweb/gunicorn_conf.py without a server: the setting's parsing and the hook's rule."""

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

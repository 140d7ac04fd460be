"""cbrweb/gunicorn_conf.py without a server: the settings' parsing and the hooks' rules."""

import gc
import importlib
import socket
import sys
from types import SimpleNamespace

import gunicorn.util
import orjson
import pytest
from uvicorn.config import Config

import cbrweb.gunicorn_conf as conf


def load(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("CBR_WEB_KEEPALIVE_REQUESTS", raising=False)
    else:
        monkeypatch.setenv("CBR_WEB_KEEPALIVE_REQUESTS", value)
    return importlib.reload(conf)


@pytest.fixture(autouse=True)
def _reload_after(monkeypatch):
    interval = sys.getswitchinterval()  # a worker's hook sets it for the whole process
    yield
    sys.setswitchinterval(interval)
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


def test_a_worker_hands_the_interpreter_between_its_threads_every_half_millisecond(monkeypatch):
    monkeypatch.delenv("CBR_WEB_SWITCH_INTERVAL_MS", raising=False)
    module = importlib.reload(conf)
    module.post_worker_init(None)
    assert sys.getswitchinterval() == pytest.approx(0.0005)
    monkeypatch.setenv("CBR_WEB_SWITCH_INTERVAL_MS", "5")  # Python's own
    importlib.reload(conf).post_worker_init(None)
    assert sys.getswitchinterval() == pytest.approx(0.005)


@pytest.mark.parametrize("bad", ["0", "-1", "fast", "101"])
def test_a_bad_switch_interval_stops_the_server_naming_it(monkeypatch, bad):
    monkeypatch.setenv("CBR_WEB_SWITCH_INTERVAL_MS", bad)
    with pytest.raises(SystemExit, match="CBR_WEB_SWITCH_INTERVAL_MS"):
        importlib.reload(conf)


def test_the_server_reads_request_lines_as_long_as_gunicorn_can(monkeypatch):
    module = importlib.reload(conf)
    assert module.limit_request_line == 8190  # its largest: every URL up to CBR_MAX_URL_BYTES's largest


def answered(write_error, status: int, reason: str) -> bytes:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        write_error(ours, status, reason, "a request line over 8190 bytes")
        ours.shutdown(socket.SHUT_WR)
        return theirs.makefile("rb").read()


def test_gunicorns_own_414_is_in_the_apis_error_shape_and_its_other_answers_its_own(monkeypatch):
    monkeypatch.setattr(gunicorn.util, "write_error", gunicorn.util.write_error)
    original = gunicorn.util.write_error
    conf.on_starting(None)
    conf.on_starting(None)  # a second start (a reloaded config) wraps it once only

    head, _, body = answered(gunicorn.util.write_error, 414, "URI Too Long").partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 414 URI Too Long\r\n")
    assert b"Content-Type: application/json" in head and f"Content-Length: {len(body)}".encode() in head
    error = orjson.loads(body)
    assert error["code"] == "url_too_long" and error["field"] == "url" and "8190" in error["message"]
    assert answered(gunicorn.util.write_error, 400, "Bad Request") == answered(original, 400, "Bad Request")


def test_a_uvicorn_worker_parses_http_with_cbrs_protocol(monkeypatch):
    monkeypatch.setenv("CBR_WEB_GC_FREEZE", "0")
    module = importlib.reload(conf)
    worker = SimpleNamespace(config=Config(app=None, http="auto"))
    module.post_worker_init(worker)
    assert worker.config.http == "cbrweb.http_protocol:CbrHttpToolsProtocol"

    chosen = SimpleNamespace(config=Config(app=None, http="h11"))  # a protocol chosen on purpose stays
    module.post_worker_init(chosen)
    assert chosen.config.http == "h11"
    module.post_worker_init(SimpleNamespace())  # gunicorn's own workers have no such config

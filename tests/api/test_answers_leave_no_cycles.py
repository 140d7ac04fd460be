"""A read's answer is freed when the web server has sent it, not left to the garbage collector
(`api.middleware.ReleaseViewCycles`): DRF's response and view hold each other, and a read of
1 000 events used to leave its ~3 000 frames and deliveries in that cycle. Through the WSGI
application itself, as a web server calls it (the test client keeps answers of its own)."""

import gc
import io
from wsgiref.util import setup_testing_defaults

import factories
import orjson
import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from cbrweb.wsgi import application
from domain.events import EventIn
from streams import services
from streams.wire import READ_BATCH_MEDIA_TYPE

pytestmark = pytest.mark.django_db

# what a read's answer is made of: none of it may be left for the collector
ANSWER_TYPES = {"Frame", "Record", "Delivery", "ReadBatch", "ReadPart", "ReadResult", "Response", "ReadView"}


def call(method: str, path: str, token: str, body: dict | None = None, accept: str = "application/json"):
    data = b"" if body is None else orjson.dumps(body)
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(data)),
        "HTTP_ACCEPT": accept,
        "HTTP_AUTHORIZATION": f"Token {token}",
        "wsgi.input": io.BytesIO(data),
    }
    setup_testing_defaults(environ)  # the rest of what a WSGI server passes (host 127.0.0.1)
    status = []
    # as Django's test client does: the test's transaction keeps its connection
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        chunks = application(environ, lambda s, headers, exc_info=None: status.append(int(s.split()[0])))
        content = b"".join(chunks)
        chunks.close()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    return status[0], content


@pytest.mark.parametrize("accept", ["application/json", READ_BATCH_MEDIA_TYPE])
def test_a_read_and_its_ack_leave_nothing_of_their_answers_to_the_garbage_collector(admin_user, api, accept):
    stream = factories.make_stream(segment_count=2)
    services.do_publish(stream, [EventIn(f"e{i}".encode()) for i in range(200)])
    factories.create_group_over_api(api, retention_type="NONE")
    token = factories.token_for(admin_user)
    path = "/api/v1/reader-groups/shop/billing/"
    call("POST", path + "read/", token, {"max_events": 1})  # modules loaded, caches filled

    gc.collect()
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        status, content = call("POST", path + "read/", token, {"max_events": 100, "ranges": True}, accept)
        assert status == 200 and len(content) > 100 * 10, content[:200]
        ranges = orjson.loads(content)["delivery_ranges"] if accept == "application/json" else None
        if ranges:  # and an ack, alone
            status, content = call("POST", path + "ack/", token, {"delivery_ids": ranges})
            assert (status, orjson.loads(content)["acked"]) == (200, 100)
        del content
        gc.collect()
        left = sorted({type(o).__name__ for o in gc.garbage} & ANSWER_TYPES)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    assert left == [], f"left to the garbage collector: {left}"

"""uvicorn's HTTP/1.1 protocol (httptools) as CBR's web processes run it (`post_worker_init` in
cbrweb/gunicorn_conf.py sets it): it reads a URL of at most `LONGEST_URL_BYTES`, and answers a
longer one 414 in the API's error shape, naming `url`, as soon as that much of it has arrived.
uvicorn held a URL of any size while it arrived, and answered one over 64 KiB (what httptools
parses) with a plain-text 400. Shorter URLs over `CBR_MAX_URL_BYTES` are the application's to
refuse (cbrweb/url_limit.py), with the same answer."""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from cbrweb.url_limit import LONGEST_URL_BYTES, too_long_body


class UrlTooLong(Exception):
    """Raised from the parser's callback: it stops the parse, and uvicorn answers the request
    with `send_400_response`."""


# After refusing a URL, what the client still sends is read and dropped, for a while and up to a
# size, before the connection closes: closed with its data unread, the connection is reset, and
# a client still sending loses the answer (nginx's lingering close, for the same reason).
LINGER_S = 2.0
LINGER_BYTES = 4 * 1024 * 1024


class CbrHttpToolsProtocol(HttpToolsProtocol):
    _dropped: int | None = None  # bytes dropped since the URL was refused; None before

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > LONGEST_URL_BYTES:
            raise UrlTooLong

    def data_received(self, data: bytes) -> None:
        if self._dropped is None:
            super().data_received(data)
            return
        self._dropped += len(data)
        if self._dropped > LINGER_BYTES:
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        if len(getattr(self, "url", b"")) <= LONGEST_URL_BYTES:
            super().send_400_response(msg)
            return
        body = too_long_body(f"is over {LONGEST_URL_BYTES} bytes, the longest the web server reads")
        head = [b"HTTP/1.1 414 URI Too Long\r\n"]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head.append(b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body))
        self.transport.write(b"".join(head) + body)
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()  # the answer, then the end of ours; the client's end closes it
        self._dropped = 0
        self.loop.call_later(LINGER_S, self.transport.close)

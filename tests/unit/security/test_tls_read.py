"""Listener TLS reads that take every whole record waiting (security/tls_read.py): the same bytes, EOF and
errors as ssl.SSLObject's one record per call, in fewer calls."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from collections.abc import Iterator

import pytest
import uvloop

from epochlog.security.tls_read import DrainingSSLObject, available, drain_records
from tests.pki import Pki, make_pki

pytestmark = pytest.mark.skipif(not available(), reason="security/_native/_tls_drain is not built")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _server_ctx(pki: Pki) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(pki.broker_cert), str(pki.broker_key))
    return drain_records(ctx)


def _client_ctx(pki: Pki) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(pki.ca_cert))


class Pair:
    """A client and a server SSLObject over memory BIOs, handshake done; ``wire`` carries client bytes."""

    def __init__(self, pki: Pki) -> None:
        self.s_in, self.s_out, self.c_in, self.c_out = (ssl.MemoryBIO() for _ in range(4))
        self.server = _server_ctx(pki).wrap_bio(self.s_in, self.s_out, server_side=True)
        self.client = _client_ctx(pki).wrap_bio(self.c_in, self.c_out, server_hostname="localhost")
        for _ in range(10):
            for obj in (self.client, self.server):
                try:
                    obj.do_handshake()
                except ssl.SSLWantReadError:
                    pass
            self.s_in.write(self.c_out.read())
            self.c_in.write(self.s_out.read())
        assert self.server.version() is not None and self.client.version() is not None

    def records(self, pieces: list[bytes]) -> bytes:
        for p in pieces:
            self.client.write(p)  # one TLS record each
        return self.c_out.read()


def test_one_call_reads_every_whole_record(pki: Pki) -> None:
    pair = Pair(pki)
    assert type(pair.server) is DrainingSSLObject
    pieces = [os.urandom(16) for _ in range(500)]
    pair.s_in.write(pair.records(pieces))
    buf = bytearray(65536)
    assert pair.server.read(len(buf), buf) == 16 * 500
    assert bytes(buf[: 16 * 500]) == b"".join(pieces)
    with pytest.raises(ssl.SSLWantReadError):
        pair.server.read(len(buf), buf)


def test_a_partial_record_waits_for_the_rest(pki: Pki) -> None:
    pair = Pair(pki)
    wire = pair.records([b"a" * 100, b"b" * 100, b"c" * 100])
    pair.s_in.write(wire[:-3])
    buf = bytearray(4096)
    assert pair.server.read(len(buf), buf) == 200
    with pytest.raises(ssl.SSLWantReadError):
        pair.server.read(len(buf), buf)
    pair.s_in.write(wire[-3:])
    assert pair.server.read(len(buf), buf) == 100
    assert bytes(buf[:100]) == b"c" * 100


def test_a_buffer_smaller_than_the_records_is_filled_and_the_rest_kept(pki: Pki) -> None:
    pair = Pair(pki)
    data = os.urandom(3000)
    pair.s_in.write(pair.records([data[:1000], data[1000:1017], data[1017:]]))
    got = bytearray()
    buf = bytearray(700)
    while len(got) < len(data):
        n = pair.server.read(len(buf), buf)
        assert 0 < n <= 700
        got += buf[:n]
    assert bytes(got) == data


def test_close_notify_behind_data_is_seen_on_the_next_read(pki: Pki) -> None:
    # The drain takes the close_notify out of the BIO with the data: pending() must send the caller
    # (uvloop reads again only while the BIO or pending() report bytes) back for the EOF.
    pair = Pair(pki)
    pair.client.write(b"last words")
    try:
        pair.client.unwrap()
    except ssl.SSLWantReadError:
        pass
    pair.s_in.write(pair.c_out.read())
    buf = bytearray(4096)
    assert pair.server.read(len(buf), buf) == len(b"last words")
    assert pair.s_in.pending == 0
    assert pair.server.pending() > 0
    assert pair.server.read(len(buf), buf) == 0  # EOF, as ssl.SSLObject.read reports it


def test_a_broken_record_behind_data_raises_on_the_next_read(pki: Pki) -> None:
    pair = Pair(pki)
    good = pair.records([b"fine"])
    bad = bytearray(pair.records([b"tampered with"]))
    bad[-1] ^= 0xFF  # the AEAD tag no longer matches
    pair.s_in.write(good + bytes(bad))
    buf = bytearray(4096)
    assert pair.server.read(len(buf), buf) == 4
    assert pair.server.pending() > 0
    with pytest.raises(ssl.SSLError) as e:
        pair.server.read(len(buf), buf)
    assert not isinstance(e.value, ssl.SSLWantReadError)


def test_reads_without_a_buffer_are_ssl_objects_own(pki: Pki) -> None:
    pair = Pair(pki)
    pair.s_in.write(pair.records([b"x" * 10, b"y" * 10]))
    assert pair.server.read(1024) == b"x" * 10  # one record, as ssl.SSLObject.read returns it


# -- over a socket, through uvloop's TLS transport -----------------------------------------------------


class _Collect(asyncio.BufferedProtocol):
    """Reads into a buffer smaller than what arrives, as a listener connection's does for large frames."""

    def __init__(self) -> None:
        self.buf = memoryview(bytearray(1000))
        self.data = bytearray()
        self.eof = asyncio.get_running_loop().create_future()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buf

    def buffer_updated(self, nbytes: int) -> None:
        self.data += self.buf[:nbytes]

    def eof_received(self) -> None:
        if not self.eof.done():
            self.eof.set_result("eof")

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.eof.done():
            self.eof.set_result(f"lost: {exc!r}")


def _tiny_records_then_close_notify(port: int, pki: Pki, payload: bytes, tail: bytes) -> bytes:
    """A blocking client: every byte of ``payload`` its own TLS record; then every byte of ``tail`` and
    close_notify, sent as one write small enough for one socket read, so that the server drains the
    close_notify together with data. Returns what the server sent back after that (its close_notify),
    read until the server closes the TCP connection."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = _client_ctx(pki).wrap_bio(c_in, c_out, server_hostname="localhost")
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            if c_out.pending:
                sock.sendall(c_out.read())
            c_in.write(sock.recv(65536))
    for i in range(len(payload)):
        obj.write(payload[i : i + 1])
    sock.sendall(c_out.read())
    for i in range(len(tail)):
        obj.write(tail[i : i + 1])
    try:
        obj.unwrap()
    except ssl.SSLWantReadError:
        pass
    sock.sendall(c_out.read())
    back = bytearray()
    while chunk := sock.recv(65536):  # times out (the test fails) if the server never closes
        back += chunk
    sock.close()
    return bytes(back)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = uvloop.new_event_loop()
    yield lp
    lp.close()


def test_uvloop_transport_gets_every_tiny_record_and_the_close_notify_behind_them(
    pki: Pki, loop: asyncio.AbstractEventLoop
) -> None:
    payload, tail = os.urandom(5000), os.urandom(200)

    async def run() -> tuple[_Collect, bytes]:
        protocols: list[_Collect] = []

        def accept() -> _Collect:
            protocols.append(_Collect())
            return protocols[-1]

        server = await loop.create_server(accept, "127.0.0.1", 0, ssl=_server_ctx(pki))
        port = server.sockets[0].getsockname()[1]
        started = time.monotonic()
        back = await loop.run_in_executor(None, _tiny_records_then_close_notify, port, pki, payload, tail)
        assert time.monotonic() - started < 9  # the server answered the close_notify, not the timeout
        outcome = await asyncio.wait_for(protocols[0].eof, 5)
        assert outcome == "eof", outcome
        server.close()
        return protocols[0], back

    proto, back = loop.run_until_complete(run())
    assert bytes(proto.data) == payload + tail
    assert back  # the server's close_notify


def test_tls_listeners_drain_and_plaintext_ones_have_no_context(pki: Pki) -> None:
    from epochlog.security.listeners import Listener
    from epochlog.server.listener_security import listener_security

    for protocol in ("SSL", "SASL_SSL"):
        sec = listener_security(pki.server_props(), Listener(protocol, "127.0.0.1", 0, protocol))
        assert sec.ssl_context is not None
        assert sec.ssl_context.sslobject_class is DrainingSSLObject
    assert listener_security({}, Listener("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT")).ssl_context is None

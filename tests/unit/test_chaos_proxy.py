"""The chaos proxy: it tells a peer's connection from a client's by the first request's client id, cuts the
links of an isolated node (bytes dropped, connection kept open) and never cuts a client's connection."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from epochlog.chaos.proxy import Links, NodeProxy, source_node
from epochlog.client.wire import encode_request

pytestmark = pytest.mark.unit


def _frame(client_id: str) -> bytes:
    return encode_request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 7, client_id)


@pytest.mark.parametrize(
    ("client_id", "node"),
    [
        ("replica-fetcher-2", 2),
        ("controller-101-raft", 101),
        ("broker-3-heartbeat", 3),
        ("txn-1", 1),
        ("rdkafka", None),
        ("epochlog-metadata-quorum", None),
        ("broker-x", None),
    ],
)
def test_source_node_from_the_client_id(client_id: str, node: int | None) -> None:
    assert source_node(_frame(client_id)) == node


def test_source_node_of_a_short_frame_is_none() -> None:
    assert source_node(_frame("txn-1")[:9]) is None


@pytest.fixture
def echo() -> Iterator[int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield srv.getsockname()[1]
    srv.close()


def _roundtrip(sock: socket.socket, payload: bytes, timeout: float) -> bytes:
    sock.settimeout(timeout)
    sock.sendall(payload)
    got = b""
    try:
        while len(got) < len(payload):
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except TimeoutError:
        pass
    return got


def test_an_isolated_node_is_cut_from_its_peers_not_from_clients(echo: int) -> None:
    links = Links()
    proxy = NodeProxy(1, echo, links)
    try:
        peer = socket.create_connection(("127.0.0.1", proxy.port))
        client = socket.create_connection(("127.0.0.1", proxy.port))
        first_peer, first_client = _frame("replica-fetcher-2"), _frame("rdkafka")
        assert _roundtrip(peer, first_peer, 5) == first_peer
        assert _roundtrip(client, first_client, 5) == first_client
        links.isolate(1, [1, 2, 3])
        assert _roundtrip(peer, b"x" * 100, 0.5) == b""  # dropped, and the connection stays open
        assert _roundtrip(client, b"y" * 100, 5) == b"y" * 100
        links.heal()
        proxy.heal()  # the peer's stream lost bytes: it is closed, so both ends start again
        peer.settimeout(5)
        assert peer.recv(10) == b""
        again = socket.create_connection(("127.0.0.1", proxy.port))
        assert _roundtrip(again, first_peer, 5) == first_peer
        for s in (peer, client, again):
            s.close()
    finally:
        proxy.close()


def test_a_new_connection_over_a_cut_link_hangs_until_healed(echo: int) -> None:
    links = Links()
    proxy = NodeProxy(1, echo, links)
    try:
        links.cut(1, 101)
        sock = socket.create_connection(("127.0.0.1", proxy.port))
        first = _frame("controller-101-raft")
        assert _roundtrip(sock, first, 0.5) == b""
        links.heal()
        sock.settimeout(5)
        got = b""
        while len(got) < len(first):
            got += sock.recv(65536)
        assert got == first  # held, then delivered: a late packet, not a lost one
        sock.close()
    finally:
        proxy.close()

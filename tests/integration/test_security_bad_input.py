"""Hostile and mistaken clients on secured listeners: each gets a clean error or a closed connection,
the broker keeps serving everyone else, and no secret reaches the log.

The exchanges are written by hand over raw sockets (the Kafka clients will not send a replayed SCRAM
message or a request before authenticating)."""

from __future__ import annotations

import base64
import importlib
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.index import load_request_schema

from epochlog.client.wire import decode_response, encode_request
from epochlog.protocol.errors import Err
from epochlog.security.scram import ScramClient
from tests.integration.helpers import topic_name
from tests.integration.security_node import ALICE_PASSWORD, SecureNode, start_secure_node

pytestmark = pytest.mark.integration

REAUTH_MS = 3000
_HANDSHAKE = load_request_schema(17, 1)
_AUTH = load_request_schema(36, 2)
_META = load_request_schema(3, 9)
_APIV = load_request_schema(18, 0)
_FETCH = load_request_schema(1, 12)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureNode]:
    # Sessions on the SASL_PLAINTEXT listener last REAUTH_MS (KIP-368); SASL_SSL's never expire.
    n = start_secure_node(
        tmp_path_factory.mktemp("secure-bad"),
        {"listener.name.sasl_plaintext.connections.max.reauth.ms": str(REAUTH_MS)},
    )
    yield n
    n.broker.stop()


class Raw:
    """One hand-driven connection: send a kio request, read its answer, or see the connection closed."""

    def __init__(self, port: int, tls: ssl.SSLContext | None = None) -> None:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock: socket.socket = tls.wrap_socket(s, server_hostname="localhost") if tls is not None else s
        self.cid = 0

    def send(self, body: Any) -> None:
        self.cid += 1
        self.sock.sendall(encode_request(body, self.cid, "raw-test"))

    def recv(self, body: Any) -> Any:
        head = self._exactly(4)
        (size,) = struct.unpack(">i", head)
        frame = self._exactly(size)
        return decode_response(type(body).__api_key__, type(body).__version__, frame, self.cid)

    def call(self, body: Any) -> Any:
        self.send(body)
        return self.recv(body)

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return out

    def closed_by_broker(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionError, ssl.SSLError, OSError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


def _meta() -> Any:
    return _META(
        topics=None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def _tls(node: SecureNode) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(node.pki.ca_cert))


def _scram_login(raw: Raw, user: str, password: str) -> tuple[Any, bytes, bytes]:
    """A SCRAM-SHA-512 exchange; returns (the last answer, client-first, client-final)."""
    hs = raw.call(_HANDSHAKE(mechanism="SCRAM-SHA-512"))
    assert hs.error_code == 0
    client = ScramClient("SCRAM-SHA-512", user, password)
    first = client.first()
    r1 = raw.call(_AUTH(auth_bytes=first))
    if r1.error_code != 0:
        return r1, first, b""
    final = client.final(bytes(r1.auth_bytes))
    return raw.call(_AUTH(auth_bytes=final)), first, final


def _metadata_ok(node: SecureNode) -> bool:
    raw = Raw(node.sasl_ssl_port, _tls(node))
    try:
        last, _, _ = _scram_login(raw, "alice", ALICE_PASSWORD)
        return last.error_code == 0 and len(raw.call(_meta()).brokers) == 1
    finally:
        raw.close()


def test_wrong_password_and_unknown_user_fail_alike_and_close(node: SecureNode) -> None:
    answers = []
    for user, password in (("alice", "wrong-password-1"), ("nobody-such", "wrong-password-1")):
        raw = Raw(node.sasl_ssl_port, _tls(node))
        resp, _, _ = _scram_login(raw, user, password)
        assert resp.error_code == Err.SASL_AUTHENTICATION_FAILED
        assert "wrong-password-1" not in (resp.error_message or "")
        answers.append(resp.error_message)
        assert raw.closed_by_broker()
        raw.close()
    assert answers[0] == answers[1]  # an unknown user is not told apart from a wrong password
    assert _metadata_ok(node)


def test_replayed_scram_final_message_is_refused(node: SecureNode) -> None:
    raw = Raw(node.sasl_ssl_port, _tls(node))
    ok, first, final = _scram_login(raw, "alice", ALICE_PASSWORD)
    assert ok.error_code == 0
    raw.close()
    # A listener on the wire replays alice's messages on a new connection: the server's nonce differs.
    replay = Raw(node.sasl_ssl_port, _tls(node))
    assert replay.call(_HANDSHAKE(mechanism="SCRAM-SHA-512")).error_code == 0
    assert replay.call(_AUTH(auth_bytes=first)).error_code == 0
    resp = replay.call(_AUTH(auth_bytes=final))
    assert resp.error_code == Err.SASL_AUTHENTICATION_FAILED
    assert replay.closed_by_broker()
    replay.close()


def test_altered_scram_proof_is_refused(node: SecureNode) -> None:
    raw = Raw(node.sasl_ssl_port, _tls(node))
    assert raw.call(_HANDSHAKE(mechanism="SCRAM-SHA-512")).error_code == 0
    client = ScramClient("SCRAM-SHA-512", "alice", ALICE_PASSWORD)
    r1 = raw.call(_AUTH(auth_bytes=client.first()))
    head, proof = client.final(bytes(r1.auth_bytes)).rsplit(b",p=", 1)
    # One bit of the proof itself (a base64 character next to the padding may carry padding bits only).
    altered = bytearray(base64.b64decode(proof))
    altered[0] ^= 1
    resp = raw.call(_AUTH(auth_bytes=head + b",p=" + base64.b64encode(bytes(altered))))
    assert resp.error_code == Err.SASL_AUTHENTICATION_FAILED
    assert raw.closed_by_broker()
    raw.close()


def test_oversized_sasl_token_closes_the_connection(node: SecureNode) -> None:
    raw = Raw(node.sasl_plaintext_port)
    assert raw.call(_HANDSHAKE(mechanism="PLAIN")).error_code == 0
    raw.send(_AUTH(auth_bytes=b"\0alice\0" + b"x" * 600_000))  # over sasl.server.max.receive.size
    assert raw.closed_by_broker()
    raw.close()
    assert _metadata_ok(node)


def test_requests_before_authentication_close_the_connection(node: SecureNode) -> None:
    raw = Raw(node.sasl_plaintext_port)
    assert raw.call(_APIV()).error_code == 0  # ApiVersions is allowed before authenticating
    raw.send(_meta())
    assert raw.closed_by_broker()
    raw.close()
    # and between the handshake and a successful SaslAuthenticate
    raw = Raw(node.sasl_plaintext_port)
    assert raw.call(_HANDSHAKE(mechanism="PLAIN")).error_code == 0
    raw.send(_meta())
    assert raw.closed_by_broker()
    raw.close()


def test_unsupported_mechanism_is_named_and_refused(node: SecureNode) -> None:
    raw = Raw(node.sasl_plaintext_port)
    resp = raw.call(_HANDSHAKE(mechanism="GSSAPI"))
    assert resp.error_code == Err.UNSUPPORTED_SASL_MECHANISM
    assert set(resp.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    raw.close()


def test_sasl_on_a_plaintext_listener_is_an_illegal_state(node: SecureNode) -> None:
    raw = Raw(node.broker.port)
    assert raw.call(_HANDSHAKE(mechanism="PLAIN")).error_code == Err.ILLEGAL_SASL_STATE
    raw.close()


def test_certificate_from_another_ca_is_refused(node: SecureNode) -> None:
    ctx = ssl.create_default_context(cafile=str(node.pki.ca_cert))
    ctx.load_cert_chain(str(node.pki.other_client_cert), str(node.pki.other_client_key))
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        raw = Raw(node.ssl_port, ctx)
        raw.call(_APIV())
    # No certificate at all on a listener with ssl.client.auth=required: refused as well.
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        raw = Raw(node.ssl_port, _tls(node))
        raw.call(_APIV())
    # A client that trusts another CA refuses the broker's certificate.
    other = ssl.create_default_context(cafile=str(node.pki.other_ca_cert))
    with pytest.raises(ssl.SSLError):
        Raw(node.sasl_ssl_port, other)
    assert _metadata_ok(node)


def test_plaintext_bytes_on_a_tls_port_close_only_that_connection(node: SecureNode) -> None:
    raw = Raw(node.sasl_ssl_port)  # no TLS
    raw.send(_APIV())
    assert raw.closed_by_broker()
    raw.close()
    assert _metadata_ok(node)


def test_other_clients_are_unaffected_by_a_stream_of_failed_logins(node: SecureNode) -> None:
    topic = topic_name("unaffected")
    stop = threading.Event()

    def attack() -> None:
        while not stop.is_set():
            try:
                raw = Raw(node.sasl_ssl_port, _tls(node))
                _scram_login(raw, "alice", "guess")
                raw.close()
            except OSError:
                pass

    t = threading.Thread(target=attack, daemon=True)
    t.start()
    try:
        acked = [0]
        p = Producer({**node.librdkafka_sasl_ssl("alice", ALICE_PASSWORD), "acks": "all"})
        for i in range(200):
            p.produce(topic, str(i).encode(), on_delivery=lambda e, _m: acked.__setitem__(0, acked[0] + (e is None)))
        assert p.flush(30) == 0
        assert acked[0] == 200
    finally:
        stop.set()
        t.join(10)


def test_expired_session_must_reauthenticate(node: SecureNode) -> None:
    """KIP-368: the session lifetime is announced; once past it, anything but re-authentication closes."""
    raw = Raw(node.sasl_plaintext_port)
    assert raw.call(_HANDSHAKE(mechanism="PLAIN")).error_code == 0
    resp = raw.call(_AUTH(auth_bytes=b"\0alice\0" + ALICE_PASSWORD.encode()))
    assert resp.error_code == 0
    assert 0 < resp.session_lifetime.total_seconds() * 1000 <= REAUTH_MS
    assert raw.call(_meta()).brokers
    # Re-authenticating within the lifetime keeps the connection; the session is renewed.
    assert raw.call(_HANDSHAKE(mechanism="PLAIN")).error_code == 0
    assert raw.call(_AUTH(auth_bytes=b"\0alice\0" + ALICE_PASSWORD.encode())).error_code == 0
    assert raw.call(_meta()).brokers
    time.sleep(REAUTH_MS / 1000 + 0.5)
    raw.send(_meta())
    assert raw.closed_by_broker()
    raw.close()


def test_librdkafka_reauthenticates_and_keeps_producing(node: SecureNode) -> None:
    topic = topic_name("reauth")
    conf = {
        "bootstrap.servers": node.sasl_plaintext,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": ALICE_PASSWORD,
        "acks": "all",
    }
    errors: list[Any] = []
    p = Producer(conf)
    deadline = time.monotonic() + 2.5 * REAUTH_MS / 1000
    sent = 0
    while time.monotonic() < deadline:
        p.produce(topic, b"x", on_delivery=lambda e, _m: errors.append(e) if e else None)
        sent += 1
        p.poll(0.05)
    assert p.flush(30) == 0
    assert not errors and sent > 20


class TinyRecords(Raw):
    """A client that writes every byte as its own TLS record (one SSL_write each): the broker drains
    thousands of 1-byte records per socket read (security/tls_read.py) and must see the same bytes."""

    def send(self, body: Any) -> None:
        self.cid += 1
        for byte in encode_request(body, self.cid, "raw-test"):
            self.sock.sendall(bytes([byte]))


def test_every_byte_its_own_tls_record_is_served(node: SecureNode) -> None:
    raw = TinyRecords(node.sasl_ssl_port, _tls(node))
    try:
        last, _, _ = _scram_login(raw, "alice", ALICE_PASSWORD)
        assert last.error_code == 0
        first = raw.cid + 1
        for _ in range(20):  # pipelined: the broker reads them back to back, answers in order
            raw.send(_meta())
        for cid in range(first, raw.cid + 1):
            (size,) = struct.unpack(">i", raw._exactly(4))
            answer = decode_response(3, 9, raw._exactly(size), cid)
            assert len(answer.brokers) == 1
    finally:
        raw.close()


def test_a_tampered_tls_record_closes_only_that_connection(node: SecureNode) -> None:
    sock = socket.create_connection(("127.0.0.1", node.sasl_ssl_port), timeout=10)
    c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = _tls(node).wrap_bio(c_in, c_out, server_hostname="localhost")
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            if c_out.pending:
                sock.sendall(c_out.read())
            c_in.write(sock.recv(65536))
    sock.sendall(c_out.read())
    tls.write(encode_request(_APIV(), 1, "raw-test"))
    good = c_out.read()
    tls.write(encode_request(_APIV(), 2, "raw-test"))
    bad = bytearray(c_out.read())
    bad[-1] ^= 0xFF  # the record's AEAD tag no longer matches
    sock.sendall(good + bytes(bad))  # one socket read: the broker drains the good record with the bad one
    closed = False
    try:
        while sock.recv(65536):  # the answer to the good request may come first
            pass
        closed = True
    except ConnectionError:
        closed = True
    finally:
        sock.close()
    assert closed
    assert _metadata_ok(node)


def _fetch_from_start(topic: str, max_bytes: int) -> Any:
    mod = importlib.import_module(_FETCH.__module__)
    part = mod.FetchPartition(
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=max_bytes,
    )
    return _FETCH(
        replica_id=-1,
        max_wait=timedelta(0),
        min_bytes=1,
        max_bytes=max_bytes,
        topics=(mod.FetchTopic(topic=topic, partitions=(part,)),),
        forgotten_topics_data=(),
    )


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_client_that_never_reads_its_fetch_answers_cannot_grow_the_broker(node: SecureNode) -> None:
    # 5,000 pipelined Fetch requests of ~100 B fit in the socket buffers; each answer is ~4 MB. Pausing
    # reading alone left every request already read to be answered: +2.9 GB of RSS in 30 s before
    # connection.py held the frames behind MAX_IN_FLIGHT and a full write buffer.
    topic = topic_name("unread")
    p = Producer({**node.librdkafka_sasl_ssl("alice", ALICE_PASSWORD), "linger.ms": 20})
    for _ in range(4000):
        p.produce(topic, b"x" * 1024)
    assert p.flush(30) == 0
    raw = Raw(node.sasl_ssl_port, _tls(node))
    last, _, _ = _scram_login(raw, "alice", ALICE_PASSWORD)
    assert last.error_code == 0
    pid = node.broker.proc.pid  # type: ignore[union-attr]
    before = _rss(pid)
    raw.sock.settimeout(3)
    try:
        for _ in range(5000):
            raw.send(_fetch_from_start(topic, 4 << 20))
    except TimeoutError:
        pass  # the socket buffers are full: the broker stopped reading
    grown = 0
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline and grown < 400 << 20:
        grown = _rss(pid) - before
        time.sleep(0.2)
    raw.close()
    assert grown < 400 << 20, f"the broker grew by {grown >> 20} MB for a client that reads nothing"
    assert _metadata_ok(node)

"""ClientSecurity from Kafka client properties, its TLS context from PEM files, and the wire
Connection's TLS + SASL against a small in-process fake broker on 127.0.0.1 (the real server's
wiring is not used here)."""

from __future__ import annotations

import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from epochlog.client.epochs import connect_first
from epochlog.client.security import ClientSecurity, load_command_config
from epochlog.client.wire import Connection, WireError
from epochlog.protocol.codec import decode_body, encode_response, finish_header, parse_header, request_class
from epochlog.security.sasl import SaslAuthenticator
from epochlog.security.scram_credentials import ScramCredential, credential_from_password
from tests.pki import Pki, make_pki

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="alice \\"quoted\\" secret";'
)


# -- properties ---------------------------------------------------------------------------------


def test_defaults_are_plaintext() -> None:
    sec = ClientSecurity.from_properties({})
    assert sec.protocol == "PLAINTEXT" and not sec.uses_tls and not sec.uses_sasl
    assert sec.ssl_context() is None


def test_librdkafka_names() -> None:
    sec = ClientSecurity.from_properties(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "bob",
            "sasl.password": "pw",
            "ssl.ca.location": "/ca.pem",
            "ssl.certificate.location": "/c.pem",
            "ssl.key.location": "/k.pem",
            "ssl.key.password": "kpw",
        }
    )
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == ("SASL_SSL", "SCRAM-SHA-512", "bob", "pw")
    assert (sec.ca_location, sec.cert_location, sec.key_location, sec.key_password) == (
        "/ca.pem",
        "/c.pem",
        "/k.pem",
        "kpw",
    )
    assert sec.check_hostname and sec.uses_tls and sec.uses_sasl
    assert "pw" not in repr(sec).replace("password", "")


def test_java_names_with_jaas() -> None:
    sec = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": JAAS,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/trust.pem",
            "ssl.keystore.location": "/ks.pem",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert (sec.username, sec.password) == ("alice", 'alice "quoted" secret')
    assert sec.ca_location == "/trust.pem" and sec.cert_location == "/ks.pem" and sec.key_location is None
    assert not sec.check_hostname and not sec.uses_tls


@pytest.mark.parametrize(
    "props, needle",
    [
        ({"security.protocol": "TLS"}, "security.protocol"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.username": "a", "sasl.password": "b"}, "GSSAPI"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "credentials"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "X required a=b"}, "jaas"),
        ({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "PEM"),
        ({"security.protocol": "SSL", "ssl.key.location": "/k.pem"}, "ssl.certificate.location"),
        ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"}, "identification"),
    ],
)
def test_bad_properties(props: dict[str, str], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        ClientSecurity.from_properties(props)


def test_load_command_config(tmp_path: Path) -> None:
    p = tmp_path / "client.properties"
    p.write_text(
        "# tool config\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.username=alice\nsasl.password=alice-secret\n"
    )
    sec = load_command_config(p)
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == (
        "SASL_PLAINTEXT",
        "PLAIN",
        "alice",
        "alice-secret",
    )
    with pytest.raises(ValueError):
        load_command_config(tmp_path / "missing.properties")


# -- certificates: the tests' PKI (tests/pki.py) ------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_ssl_context_from_pem(pki: Pki) -> None:
    sec = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.truststore.location": str(pki.ca_cert)})
    ctx = sec.ssl_context()
    assert ctx is not None and ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    no_check = ClientSecurity.from_properties(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca_cert),
            "ssl.endpoint.identification.algorithm": "",
            "ssl.keystore.location": str(pki.client_keystore),
        }
    ).ssl_context()
    assert no_check is not None and not no_check.check_hostname
    enc = ClientSecurity.from_properties(
        {
            "security.protocol": "SSL",
            "ssl.certificate.location": str(pki.broker_cert),
            "ssl.key.location": str(pki.broker_keystore_encrypted),
            "ssl.key.password": pki.broker_key_password,
        }
    )
    assert enc.ssl_context() is not None
    wrong = ClientSecurity.from_properties(
        {
            "security.protocol": "SSL",
            "ssl.certificate.location": str(pki.broker_cert),
            "ssl.key.location": str(pki.broker_keystore_encrypted),
            "ssl.key.password": "nope",
        }
    )
    with pytest.raises(ValueError, match="TLS"):
        wrong.ssl_context()
    with pytest.raises(ValueError, match="TLS"):
        ClientSecurity(protocol="SSL", ca_location=str(pki.dir / "absent.pem")).ssl_context()


# -- a fake broker: TLS, then SASL via SaslAuthenticator, then ApiVersions -----------------------

USERS = {"alice": "alice-secret"}
CREDS = {("alice", m): credential_from_password(m, "alice-secret") for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}


def _lookup(user: str, mech: str) -> ScramCredential | None:
    return CREDS.get((user, mech))


class FakeBroker:
    def __init__(self, sasl: bool, ssl_ctx: ssl.SSLContext | None = None, reauth_ms: int = 0) -> None:
        self.sasl, self.ssl_ctx, self.reauth_ms = sasl, ssl_ctx, reauth_ms
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.principals: list[str] = []
        self.refused: list[int] = []
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.listener.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            try:
                self._serve(conn)
            except (OSError, ssl.SSLError, ConnectionError):
                pass
            finally:
                conn.close()

    @staticmethod
    def _recv(s: socket.socket, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            part = s.recv(n - len(buf))
            if not part:
                raise ConnectionError("closed")
            buf += part
        return buf

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        if self.ssl_ctx is not None:
            conn = self.ssl_ctx.wrap_socket(conn, server_side=True)
        a = SaslAuthenticator(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], _lookup, USERS, self.reauth_ms)
        while True:
            (size,) = struct.unpack(">i", self._recv(conn, 4))
            frame = memoryview(self._recv(conn, size))
            h = parse_header(frame)
            finish_header(frame, h)
            if self.sasl and not a.admits(h.api_key, 0):
                self.refused.append(h.api_key)
                return  # Kafka closes a connection that skips authentication
            body = decode_body(frame, h)
            if h.api_key == 17:
                conn.sendall(
                    encode_response(17, h.api_version, h.correlation_id, a.handshake(h.api_version, body.mechanism, 0))
                )
                if a.should_close:
                    return
            elif h.api_key == 36:
                step = a.authenticate(h.api_version, body.auth_bytes, 0)
                if step.done:  # before answering, so the client cannot look before it is recorded
                    self.principals.append(a.principal)
                conn.sendall(encode_response(36, h.api_version, h.correlation_id, step.response))
                if step.close:
                    return
            elif h.api_key == 18:
                conn.sendall(encode_response(18, h.api_version, h.correlation_id, {"error_code": 0, "api_keys": []}))


@pytest.fixture
def broker_factory() -> Iterator[Callable[..., FakeBroker]]:
    made: list[FakeBroker] = []

    def make(*args: Any, **kwargs: Any) -> FakeBroker:
        b = FakeBroker(*args, **kwargs)
        made.append(b)
        return b

    yield make
    for b in made:
        b.stop()


def api_versions() -> Any:
    return request_class(18, 0)()


def sasl_props(mech: str, password: str = "alice-secret", protocol: str = "SASL_PLAINTEXT") -> dict[str, str]:
    return {"security.protocol": protocol, "sasl.mechanism": mech, "sasl.username": "alice", "sasl.password": password}


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_connection_authenticates_then_serves(broker_factory: Callable[..., FakeBroker], mech: str) -> None:
    b = broker_factory(sasl=True)
    sec = ClientSecurity.from_properties(sasl_props(mech))
    with connect_first(f"127.0.0.1:{b.port}", 5.0, "test", security=sec) as conn:
        assert int(conn.request(api_versions()).error_code) == 0
        assert int(conn.request(api_versions()).error_code) == 0
    assert b.principals == ["User:alice"] and b.refused == [] and b.connections == 1


def test_connection_without_sasl_is_refused_by_a_sasl_broker(broker_factory: Callable[..., FakeBroker]) -> None:
    b = broker_factory(sasl=True)
    with Connection("127.0.0.1", b.port, timeout=5.0) as conn, pytest.raises(WireError):
        conn.request(request_class(3, 1)(topics=None))
    assert b.refused == [3]


def test_wrong_password_is_a_clear_wire_error(broker_factory: Callable[..., FakeBroker]) -> None:
    b = broker_factory(sasl=True)
    sec = ClientSecurity.from_properties(sasl_props("SCRAM-SHA-256", password="letmein-123"))
    with Connection("127.0.0.1", b.port, timeout=5.0, security=sec) as conn, pytest.raises(WireError) as e:
        conn.request(api_versions())
    msg = str(e.value)
    assert "SASL SCRAM-SHA-256 authentication" in msg and "alice" in msg and "Authentication failed" in msg
    assert "letmein" not in msg
    assert b.principals == []


def test_expired_session_reconnects(broker_factory: Callable[..., FakeBroker]) -> None:
    b = broker_factory(sasl=True, reauth_ms=1)  # lifetime 1 ms: every request needs a new session
    sec = ClientSecurity.from_properties(sasl_props("PLAIN"))
    with Connection("127.0.0.1", b.port, timeout=5.0, security=sec) as conn:
        conn.request(api_versions())
        time.sleep(0.01)
        conn.request(api_versions())
    assert b.principals == ["User:alice", "User:alice"] and b.connections == 2


def _server_ctx(pki: Pki, elsewhere: bool = False, require_client: bool = False) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if elsewhere:
        ctx.load_cert_chain(str(pki.elsewhere_cert), str(pki.elsewhere_key))
    else:
        ctx.load_cert_chain(str(pki.broker_cert), str(pki.broker_key))
    if require_client:
        ctx.load_verify_locations(str(pki.ca_cert))
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def test_sasl_ssl_with_mutual_tls(broker_factory: Callable[..., FakeBroker], pki: Pki) -> None:
    b = broker_factory(sasl=True, ssl_ctx=_server_ctx(pki, require_client=True))
    props = sasl_props("SCRAM-SHA-512", protocol="SASL_SSL") | {
        "ssl.truststore.location": str(pki.ca_cert),
        "ssl.keystore.location": str(pki.client_keystore),
    }
    for host in ("127.0.0.1", "localhost"):
        with Connection(host, b.port, timeout=5.0, security=ClientSecurity.from_properties(props)) as conn:
            assert int(conn.request(api_versions()).error_code) == 0
    assert b.principals == ["User:alice", "User:alice"]


def test_ssl_hostname_mismatch_fails_unless_identification_is_off(
    broker_factory: Callable[..., FakeBroker], pki: Pki
) -> None:
    b = broker_factory(sasl=False, ssl_ctx=_server_ctx(pki, elsewhere=True))
    props = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca_cert)}
    with Connection("127.0.0.1", b.port, timeout=5.0, security=ClientSecurity.from_properties(props)) as conn:
        with pytest.raises(WireError, match="TLS handshake"):
            conn.request(api_versions())
    off = props | {"ssl.endpoint.identification.algorithm": ""}
    with Connection("127.0.0.1", b.port, timeout=5.0, security=ClientSecurity.from_properties(off)) as conn:
        assert int(conn.request(api_versions()).error_code) == 0


def test_ssl_untrusted_ca_fails(broker_factory: Callable[..., FakeBroker], pki: Pki) -> None:
    b = broker_factory(sasl=False, ssl_ctx=_server_ctx(pki))
    sec = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": ""})
    with Connection("127.0.0.1", b.port, timeout=5.0, security=sec) as conn, pytest.raises(WireError, match="TLS"):
        conn.request(api_versions())

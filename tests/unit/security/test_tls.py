"""TLS contexts from Kafka's ssl.* properties, checked with real handshakes over a socketpair, and the
RFC 2253 principal of a client certificate."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID, ObjectIdentifier

from epochlog.config_error import ConfigError
from epochlog.security.tls import (
    client_context,
    normalise_pem,
    openssl_cipher_name,
    principal_from_peer_cert,
    server_context,
    subject_rfc2253,
)
from tests.pki import ALICE_SUBJECT, Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


class Outcome:
    def __init__(self) -> None:
        self.principal: str | None = None
        self.error: BaseException | None = None
        self.version: str | None = None
        self.cipher: str | None = None


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str = "localhost") -> tuple[Outcome, Outcome]:
    """Runs both ends over a socketpair; each side's principal (server) or error."""
    a, b = socket.socketpair()
    a.settimeout(5)
    b.settimeout(5)
    srv, cli = Outcome(), Outcome()

    def serve() -> None:
        try:
            with server.wrap_socket(a, server_side=True) as s:
                srv.principal = principal_from_peer_cert(s)
                srv.version = s.version()
                cipher = s.cipher()
                srv.cipher = cipher[0] if cipher else None
                s.sendall(b"ok")
        except (OSError, ssl.SSLError) as e:
            srv.error = e
            a.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        with client.wrap_socket(b, server_hostname=hostname) as c:
            # Under TLS 1.3 a refused client certificate shows on the client's first read.
            if c.recv(2) != b"ok":
                raise ConnectionError("server closed")
    except (OSError, ssl.SSLError, ConnectionError) as e:
        cli.error = e
        b.close()
    t.join(10)
    assert not t.is_alive()
    return srv, cli


def test_pki_is_cached_per_directory(pki: Pki) -> None:
    assert make_pki(pki.dir) is pki
    for path in (pki.broker_keystore, pki.client_cert, pki.client_key, pki.other_client_keystore, pki.ca_cert):
        assert path.stat().st_size > 0
    assert b"ENCRYPTED PRIVATE KEY" in pki.broker_keystore_encrypted.read_bytes()
    cert = x509.load_pem_x509_certificate(pki.client_cert.read_bytes())
    assert cert.subject.rfc4514_string() == ALICE_SUBJECT


def test_one_way_tls(pki: Pki) -> None:
    srv, cli = handshake(server_context(pki.server_props()), client_context(pki.client_props()))
    assert srv.error is None and cli.error is None
    assert srv.principal == "User:ANONYMOUS"
    assert srv.version in ("TLSv1.2", "TLSv1.3")


def test_required_client_auth_gives_the_dn(pki: Pki) -> None:
    srv, cli = handshake(
        server_context(pki.server_props("required")), client_context(pki.client_props(pki.client_keystore))
    )
    assert srv.error is None and cli.error is None
    assert srv.principal == "User:CN=alice,OU=eng,O=epochlog"


def test_required_refuses_a_certificate_from_another_ca(pki: Pki) -> None:
    srv, cli = handshake(
        server_context(pki.server_props("required")), client_context(pki.client_props(pki.other_client_keystore))
    )
    assert isinstance(srv.error, ssl.SSLError)
    assert srv.principal is None
    assert cli.error is not None


def test_required_refuses_no_certificate(pki: Pki) -> None:
    srv, cli = handshake(server_context(pki.server_props("required")), client_context(pki.client_props()))
    assert isinstance(srv.error, ssl.SSLError)
    assert cli.error is not None


def test_requested_without_certificate_is_anonymous(pki: Pki) -> None:
    srv, cli = handshake(server_context(pki.server_props("requested")), client_context(pki.client_props()))
    assert srv.error is None and cli.error is None
    assert srv.principal == "User:ANONYMOUS"
    srv, _ = handshake(
        server_context(pki.server_props("requested")), client_context(pki.client_props(pki.client_keystore))
    )
    assert srv.principal == "User:CN=alice,OU=eng,O=epochlog"


def test_encrypted_key(pki: Pki) -> None:
    srv, cli = handshake(server_context(pki.server_props(encrypted=True)), client_context(pki.client_props()))
    assert srv.error is None and cli.error is None


def test_encrypted_key_without_or_with_a_wrong_password(pki: Pki) -> None:
    props = pki.server_props(encrypted=True)
    del props["ssl.key.password"]
    with pytest.raises(ConfigError, match=r"encrypted; set ssl\.key\.password"):
        server_context(props)
    props["ssl.key.password"] = "not-the-password"
    with pytest.raises(ConfigError, match=r"wrong ssl\.key\.password") as err:
        server_context(props)
    assert "not-the-password" not in str(err.value)


def test_inline_pem_as_a_properties_file_joins_it(pki: Pki) -> None:
    text = pki.broker_keystore.read_text()
    key = text[: text.index("-----END PRIVATE KEY-----") + len("-----END PRIVATE KEY-----")]
    chain = text[len(key) :]
    # A value continued with trailing backslashes arrives as one line, as parse_properties joins it.
    joined = {
        "ssl.keystore.key": " ".join(key.split("\n")),
        "ssl.keystore.certificate.chain": "".join(chain.split("\n")),
        "ssl.truststore.certificates": pki.ca_cert.read_text().replace("\n", " "),
        "ssl.client.auth": "required",
    }
    before = set(Path(p) for p in Path("/tmp").glob("epochlog-keystore-*"))
    server = server_context(joined)
    assert set(Path("/tmp").glob("epochlog-keystore-*")) == before  # the temp file is gone
    srv, _ = handshake(server, client_context(pki.client_props(pki.client_keystore)))
    assert srv.error is None and srv.principal == "User:CN=alice,OU=eng,O=epochlog"


def test_normalise_pem_refuses_garbage() -> None:
    with pytest.raises(ConfigError, match="no PEM block"):
        normalise_pem("hello", "ssl.keystore.key")
    with pytest.raises(ConfigError, match="not base64"):
        normalise_pem("-----BEGIN PRIVATE KEY-----%%%-----END PRIVATE KEY-----", "ssl.keystore.key")


def test_hostname_verification(pki: Pki) -> None:
    _, cli = handshake(server_context(pki.server_props()), client_context(pki.client_props()), "other.example")
    assert isinstance(cli.error, ssl.SSLCertVerificationError)
    off = client_context({**pki.client_props(), "ssl.endpoint.identification.algorithm": ""})
    assert off.check_hostname is False
    _, cli = handshake(server_context(pki.server_props()), off, "other.example")
    assert cli.error is None
    # The SAN has 127.0.0.1 too.
    _, cli = handshake(server_context(pki.server_props()), client_context(pki.client_props()), "127.0.0.1")
    assert cli.error is None


def test_client_refuses_a_server_from_another_ca(pki: Pki) -> None:
    other_trust = {"ssl.truststore.location": str(pki.other_ca_cert)}
    _, cli = handshake(server_context(pki.server_props()), client_context(other_trust))
    assert isinstance(cli.error, ssl.SSLCertVerificationError)


def test_enabled_protocols(pki: Pki) -> None:
    only13 = server_context({**pki.server_props(), "ssl.enabled.protocols": "TLSv1.3"})
    assert only13.minimum_version == ssl.TLSVersion.TLSv1_3
    c12 = client_context({**pki.client_props(), "ssl.enabled.protocols": "TLSv1.2"})
    assert c12.maximum_version == ssl.TLSVersion.TLSv1_2
    srv, cli = handshake(only13, c12)
    assert srv.error is not None and cli.error is not None
    srv, _ = handshake(server_context(pki.server_props()), c12)
    assert srv.version == "TLSv1.2"
    with pytest.raises(ConfigError, match="SSLv3"):
        server_context({**pki.server_props(), "ssl.enabled.protocols": "SSLv3,TLSv1.2"})
    with pytest.raises(ConfigError, match="contiguous"):
        server_context({**pki.server_props(), "ssl.enabled.protocols": "TLSv1.1,TLSv1.3"})


def test_cipher_suites_java_names(pki: Pki) -> None:
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256") == "ECDHE-ECDSA-AES128-GCM-SHA256"
    props = {
        **pki.server_props(),
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    }
    srv, cli = handshake(server_context(props), client_context(pki.client_props()))
    assert cli.error is None and srv.cipher == "ECDHE-ECDSA-AES256-GCM-SHA384"
    with pytest.raises(ConfigError, match="knows none"):
        server_context({**pki.server_props(), "ssl.cipher.suites": "TLS_NOT_A_SUITE"})
    # Only TLS 1.3 suites: TLS 1.2 has nothing left to offer, so 1.3 becomes the floor.
    only13 = server_context({**pki.server_props(), "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"})
    assert only13.minimum_version == ssl.TLSVersion.TLSv1_3


def test_every_mapped_suite_is_known_to_openssl() -> None:
    from epochlog.security.tls import _IANA_TO_OPENSSL

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    for openssl_name in _IANA_TO_OPENSSL.values():
        ctx.set_ciphers(openssl_name)


@pytest.mark.parametrize("kind", ["JKS", "PKCS12"])
def test_only_pem_stores(pki: Pki, kind: str) -> None:
    with pytest.raises(ConfigError, match="only PEM"):
        server_context({**pki.server_props(), "ssl.keystore.type": kind})
    with pytest.raises(ConfigError, match="only PEM"):
        client_context({**pki.client_props(), "ssl.truststore.type": kind})


def test_missing_files_name_the_property(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location=.*nope\.pem"):
        server_context({**pki.server_props(), "ssl.keystore.location": str(tmp_path / "nope.pem")})
    with pytest.raises(ConfigError, match=r"ssl\.truststore\.location=.*nope\.pem"):
        server_context({**pki.server_props(), "ssl.truststore.location": str(tmp_path / "nope.pem")})
    with pytest.raises(ConfigError, match="needs a keystore"):
        server_context({})
    # A certificate file without a key is not a keystore.
    with pytest.raises(ConfigError, match="no private key"):
        server_context({"ssl.keystore.location": str(pki.client_cert)})


def test_client_auth_values(pki: Pki) -> None:
    assert server_context(pki.server_props()).verify_mode == ssl.CERT_NONE
    assert server_context(pki.server_props("requested")).verify_mode == ssl.CERT_OPTIONAL
    assert server_context(pki.server_props("REQUIRED")).verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ConfigError, match=r"ssl\.client\.auth"):
        server_context(pki.server_props("sometimes"))
    props = pki.server_props("required")
    del props["ssl.truststore.location"]
    with pytest.raises(ConfigError, match="truststore"):
        server_context(props)


def test_no_certificate_is_anonymous() -> None:
    assert principal_from_peer_cert(None) == "User:ANONYMOUS"


def _cert_with(subject: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    import datetime

    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "issuer")]))
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.DER)


def test_rfc2253_order_and_keywords() -> None:
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
            x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "CA"),
            x509.NameAttribute(NameOID.LOCALITY_NAME, "SF"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "acme"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
            x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
        ]
    )
    assert subject_rfc2253(_cert_with(subject)) == "CN=alice,OU=eng,O=acme,L=SF,ST=CA,C=US"


def test_rfc2253_escaping() -> None:
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ' lead,"q"+<x>;#=\\'),
            x509.NameAttribute(NameOID.COMMON_NAME, "trail  "),
        ]
    )
    assert subject_rfc2253(_cert_with(subject)) == 'CN=trail\\ \\ ,O=\\ lead\\,\\"q\\"\\+\\<x\\>\\;\\#\\=\\\\'


def test_rfc2253_unknown_types_as_hex_and_multi_valued_rdns() -> None:
    def rdn(*attrs: tuple[ObjectIdentifier, str]) -> x509.RelativeDistinguishedName:
        return x509.RelativeDistinguishedName([x509.NameAttribute(oid, value) for oid, value in attrs])

    subject = x509.Name(
        [
            rdn((NameOID.ORGANIZATIONAL_UNIT_NAME, "a"), (NameOID.USER_ID, "u1")),
            rdn((NameOID.EMAIL_ADDRESS, "al@x")),
            rdn((NameOID.COMMON_NAME, "éva")),
            rdn((NameOID.DOMAIN_COMPONENT, "org")),
            rdn((ObjectIdentifier("1.2.3.4"), "z")),
        ]
    )
    rdns = subject_rfc2253(_cert_with(subject)).split(",")
    assert rdns[0] == "1.2.3.4=#0c017a"  # an unknown type: its DER value (UTF8String 'z') in hex
    assert rdns[1] == "DC=org"
    assert rdns[2] == "CN=éva"
    assert rdns[3] == "1.2.840.113549.1.9.1=#1604616c4078"  # emailAddress, IA5String 'al@x'
    assert rdns[4] in ("OU=a+UID=u1", "UID=u1+OU=a")  # DER sorts a SET; Java keeps the encoded order

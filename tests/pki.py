"""A throwaway PKI for TLS tests: a CA, a broker certificate for localhost/127.0.0.1, alice's client
certificate, and a second unrelated CA with a client of its own. EC P-256 keys keep it fast; one PKI per
directory per process."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

BROKER_KEY_PASSWORD = "broker-key-secret"
ALICE_SUBJECT = "CN=alice,OU=eng,O=epochlog"


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca_cert: Path  # the CA bundle: ssl.truststore.location / ssl_cafile
    broker_keystore: Path  # PKCS#8 key + broker cert + CA cert, ssl.keystore.location
    broker_keystore_encrypted: Path  # the same with the key encrypted under broker_key_password
    broker_key_password: str
    broker_cert: Path
    broker_key: Path
    client_keystore: Path  # alice: key + cert + CA
    client_cert: Path
    client_key: Path
    other_ca_cert: Path
    other_client_keystore: Path  # "mallory", signed by the other CA
    other_client_cert: Path
    other_client_key: Path
    elsewhere_cert: Path  # a server certificate of the same CA for other.example only: a hostname mismatch
    elsewhere_key: Path

    def server_props(self, client_auth: str = "none", encrypted: bool = False) -> dict[str, str]:
        props = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.broker_keystore_encrypted if encrypted else self.broker_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_cert),
            "ssl.client.auth": client_auth,
        }
        if encrypted:
            props["ssl.key.password"] = self.broker_key_password
        return props

    def client_props(self, keystore: Path | None = None) -> dict[str, str]:
        props = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_cert)}
        if keystore is not None:
            props["ssl.keystore.type"] = "PEM"
            props["ssl.keystore.location"] = str(keystore)
        return props


_CACHE: dict[Path, Pki] = {}


def _name(*parts: tuple[x509.ObjectIdentifier, str]) -> x509.Name:
    # Most general first in the encoding; RFC 2253 strings print it reversed (CN first).
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in parts])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    name = _name((NameOID.ORGANIZATION_NAME, "epochlog-tests"), (NameOID.COMMON_NAME, common_name))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    subject: x509.Name,
    usages: list[x509.ObjectIdentifier],
    san: list[x509.GeneralName] | None = None,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=825))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _write(path: Path, *chunks: bytes) -> Path:
    path.write_bytes(b"".join(chunks))
    path.chmod(0o600)
    return path


def make_pki(dir: Path) -> Pki:
    """Writes the PKI's files into dir (created if absent) once per process and returns their paths."""
    dir = Path(dir).resolve()
    cached = _CACHE.get(dir)
    if cached is not None and cached.broker_keystore.exists():
        return cached
    dir.mkdir(parents=True, exist_ok=True)
    server_client = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]

    ca_key, ca_cert = _ca("epochlog test CA")
    broker_key, broker_cert = _leaf(
        ca_key,
        ca_cert,
        _name((NameOID.ORGANIZATION_NAME, "epochlog"), (NameOID.COMMON_NAME, "localhost")),
        server_client,
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    alice_key, alice_cert = _leaf(
        ca_key,
        ca_cert,
        _name(
            (NameOID.ORGANIZATION_NAME, "epochlog"),
            (NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
            (NameOID.COMMON_NAME, "alice"),
        ),
        [ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    elsewhere_key, elsewhere_cert = _leaf(
        ca_key,
        ca_cert,
        _name((NameOID.ORGANIZATION_NAME, "epochlog"), (NameOID.COMMON_NAME, "other.example")),
        [ExtendedKeyUsageOID.SERVER_AUTH],
        [x509.DNSName("other.example")],
    )
    other_ca_key, other_ca_cert = _ca("unrelated CA")
    mallory_key, mallory_cert = _leaf(
        other_ca_key,
        other_ca_cert,
        _name((NameOID.ORGANIZATION_NAME, "elsewhere"), (NameOID.COMMON_NAME, "mallory")),
        [ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    ca_pem, other_ca_pem = _pem_cert(ca_cert), _pem_cert(other_ca_cert)
    pki = Pki(
        dir=dir,
        ca_cert=_write(dir / "ca.pem", ca_pem),
        broker_keystore=_write(dir / "broker-keystore.pem", _pem_key(broker_key), _pem_cert(broker_cert), ca_pem),
        broker_keystore_encrypted=_write(
            dir / "broker-keystore-encrypted.pem",
            _pem_key(broker_key, BROKER_KEY_PASSWORD),
            _pem_cert(broker_cert),
            ca_pem,
        ),
        broker_key_password=BROKER_KEY_PASSWORD,
        broker_cert=_write(dir / "broker.crt", _pem_cert(broker_cert), ca_pem),
        broker_key=_write(dir / "broker.key", _pem_key(broker_key)),
        client_keystore=_write(dir / "alice-keystore.pem", _pem_key(alice_key), _pem_cert(alice_cert), ca_pem),
        client_cert=_write(dir / "alice.crt", _pem_cert(alice_cert)),
        client_key=_write(dir / "alice.key", _pem_key(alice_key)),
        other_ca_cert=_write(dir / "other-ca.pem", other_ca_pem),
        other_client_keystore=_write(
            dir / "mallory-keystore.pem", _pem_key(mallory_key), _pem_cert(mallory_cert), other_ca_pem
        ),
        other_client_cert=_write(dir / "mallory.crt", _pem_cert(mallory_cert)),
        other_client_key=_write(dir / "mallory.key", _pem_key(mallory_key)),
        elsewhere_cert=_write(dir / "elsewhere.crt", _pem_cert(elsewhere_cert)),
        elsewhere_key=_write(dir / "elsewhere.key", _pem_key(elsewhere_key)),
    )
    _CACHE[dir] = pki
    return pki

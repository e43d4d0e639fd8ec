"""TLS for SSL and SASL_SSL listeners from Kafka's ``ssl.*`` properties (PEM stores only), and the
principal Kafka's DefaultKafkaPrincipalBuilder gives a client certificate."""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from epochlog.config_error import ConfigError

_PROTOCOL_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_VERSION_ORDER = ["TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"]
DEFAULT_ENABLED_PROTOCOLS = "TLSv1.2,TLSv1.3"

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

# Java (IANA) suite names -> OpenSSL's, for the TLS 1.2 suites a JDK enables or an operator may list.
_IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
}
TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"})

_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)
_BASE64 = re.compile(r"[A-Za-z0-9+/=]*")


def _store_type(cfg: dict[str, str], key: str) -> None:
    # Kafka's default store type is JKS; epochlog reads PEM only, so an unset type means PEM.
    kind = cfg.get(key, "").strip().upper() or "PEM"
    if kind != "PEM":
        raise ConfigError(
            f"{key}={kind}: only PEM stores are supported (convert with keytool/openssl to a PEM file holding "
            "the PKCS#8 key and the certificate chain)"
        )


def normalise_pem(text: str, key: str) -> str:
    """PEM text given inline in a property, re-wrapped: a .properties value joined with trailing backslashes
    (as Kafka's docs show it) arrives as one line with the base64 run together or spaced."""
    blocks = _PEM_BLOCK.findall(text)
    if not blocks:
        raise ConfigError(f"{key}: no PEM block (-----BEGIN ...-----) in the value")
    out = []
    for label, body in blocks:
        data = re.sub(r"\s+|\\n", "", body)
        if not _BASE64.fullmatch(data):
            raise ConfigError(f"{key}: the {label} block is not base64 (PKCS#8 keys only, no PEM headers)")
        lines = [data[i : i + 64] for i in range(0, len(data), 64)]
        out.append(f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n")
    return "".join(out)


@contextlib.contextmanager
def _private_file(text: str) -> Iterator[str]:
    # The ssl module loads a key only from a path; mkstemp's file is 0600 and is removed at once.
    fd, path = tempfile.mkstemp(prefix="epochlog-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _read(key: str, location: str) -> str:
    try:
        return Path(location).read_text()
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or "not a text PEM file"
        raise ConfigError(f"{key}={location}: cannot read it ({reason})") from None


def _password_callback(cfg: dict[str, str]) -> Callable[[], bytes]:
    # Always a callable: with none, OpenSSL would prompt on the terminal for an encrypted key.
    password = cfg.get("ssl.key.password", "")
    return lambda: password.encode()


def _load_keystore(ctx: ssl.SSLContext, cfg: dict[str, str], required: bool) -> bool:
    """Loads the key and chain into ctx; False when there is none and none is required."""
    _store_type(cfg, "ssl.keystore.type")
    location = cfg.get("ssl.keystore.location", "").strip()
    inline_key = cfg.get("ssl.keystore.key", "").strip()
    inline_chain = cfg.get("ssl.keystore.certificate.chain", "").strip()
    if location and (inline_key or inline_chain):
        raise ConfigError("ssl.keystore.location and ssl.keystore.key/certificate.chain are both set; set one")
    if location:
        text = _read("ssl.keystore.location", location)
        where = f"ssl.keystore.location={location}"
    elif inline_key or inline_chain:
        if not (inline_key and inline_chain):
            raise ConfigError("ssl.keystore.key and ssl.keystore.certificate.chain must be set together")
        text = normalise_pem(inline_key, "ssl.keystore.key") + normalise_pem(
            inline_chain, "ssl.keystore.certificate.chain"
        )
        where = "ssl.keystore.key"
    else:
        if required:
            raise ConfigError("a TLS listener needs a keystore: set ssl.keystore.location (PEM)")
        return False
    if "PRIVATE KEY-----" not in text:
        raise ConfigError(f"{where}: no private key in it (PEM keystores hold the PKCS#8 key and the chain)")
    if "CERTIFICATE-----" not in text:
        raise ConfigError(f"{where}: no certificate in it")
    encrypted = "BEGIN ENCRYPTED PRIVATE KEY" in text
    if encrypted and not cfg.get("ssl.key.password"):
        raise ConfigError(f"{where}: the private key is encrypted; set ssl.key.password")
    try:
        with _private_file(text) as path:
            ctx.load_cert_chain(path, password=_password_callback(cfg))
    except ssl.SSLError as e:
        hint = "wrong ssl.key.password, or " if encrypted else ""
        raise ConfigError(f"{where}: cannot load the key and certificate ({hint}{e.reason or e})") from None
    return True


def _load_truststore(ctx: ssl.SSLContext, cfg: dict[str, str]) -> bool:
    _store_type(cfg, "ssl.truststore.type")
    location = cfg.get("ssl.truststore.location", "").strip()
    inline = cfg.get("ssl.truststore.certificates", "").strip()
    if location and inline:
        raise ConfigError("ssl.truststore.location and ssl.truststore.certificates are both set; set one")
    try:
        if location:
            _read("ssl.truststore.location", location)
            ctx.load_verify_locations(cafile=location)
        elif inline:
            ctx.load_verify_locations(cadata=normalise_pem(inline, "ssl.truststore.certificates"))
        else:
            return False
    except ssl.SSLError as e:
        where = f"ssl.truststore.location={location}" if location else "ssl.truststore.certificates"
        raise ConfigError(f"{where}: no usable CA certificate ({e.reason or e})") from None
    return True


def _protocols(ctx: ssl.SSLContext, cfg: dict[str, str]) -> list[str]:
    raw = cfg.get("ssl.enabled.protocols", "").strip() or DEFAULT_ENABLED_PROTOCOLS
    names = [p.strip() for p in raw.split(",") if p.strip()]
    unknown = [p for p in names if p not in _PROTOCOL_VERSIONS]
    if unknown or not names:
        raise ConfigError(
            f"ssl.enabled.protocols={raw!r}: {', '.join(unknown) or 'none given'}; known: {', '.join(_VERSION_ORDER)}"
        )
    indexes = sorted({_VERSION_ORDER.index(p) for p in names})
    # OpenSSL takes a version range, not a set: a gap would silently enable the version in between.
    if indexes != list(range(indexes[0], indexes[-1] + 1)):
        raise ConfigError(f"ssl.enabled.protocols={raw!r}: give a contiguous range of versions")
    ctx.minimum_version = _PROTOCOL_VERSIONS[_VERSION_ORDER[indexes[0]]]
    ctx.maximum_version = _PROTOCOL_VERSIONS[_VERSION_ORDER[indexes[-1]]]
    return [_VERSION_ORDER[i] for i in indexes]


def openssl_cipher_name(name: str) -> str:
    """A Java/IANA suite name in OpenSSL's spelling; other names pass as they are (OpenSSL's own)."""
    return _IANA_TO_OPENSSL.get(name.upper(), name)


def _ciphers(ctx: ssl.SSLContext, cfg: dict[str, str], versions: list[str]) -> None:
    raw = cfg.get("ssl.cipher.suites", "").strip()
    if not raw:
        return
    names = [c.strip() for c in raw.split(",") if c.strip()]
    # TLS 1.3 suites are chosen with OpenSSL's SSL_CTX_set_ciphersuites, which Python's ssl module does not
    # expose; set_ciphers governs TLS 1.2 and below only. So TLS 1.3 suites in the list are accepted but
    # cannot narrow TLS 1.3, which keeps OpenSSL's default (all AEAD) suites.
    legacy = [openssl_cipher_name(n) for n in names if n.upper() not in TLS13_SUITES]
    if not legacy:
        if "TLSv1.3" not in versions:
            raise ConfigError(f"ssl.cipher.suites={raw!r}: only TLS 1.3 suites, but TLSv1.3 is not enabled")
        # Java with only TLS 1.3 suites can negotiate nothing older; the equivalent is a TLS 1.3 floor.
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        return
    try:
        ctx.set_ciphers(":".join(legacy))
    except ssl.SSLError:
        raise ConfigError(f"ssl.cipher.suites={raw!r}: OpenSSL knows none of these suites") from None


def _common(ctx: ssl.SSLContext, cfg: dict[str, str]) -> None:
    versions = _protocols(ctx, cfg)
    _ciphers(ctx, cfg, versions)


def server_context(cfg: dict[str, str]) -> ssl.SSLContext:
    """The context a TLS listener accepts with, from its effective properties (see listener_config)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(ctx, cfg)
    _load_keystore(ctx, cfg, required=True)
    auth = cfg.get("ssl.client.auth", "").strip().lower() or "none"
    if auth not in _CLIENT_AUTH:
        raise ConfigError(f"ssl.client.auth={auth!r} is not none, requested or required")
    has_trust = _load_truststore(ctx, cfg)
    if auth != "none" and not has_trust:
        # Java would fall back to the JVM's CA list; a broker checking client certificates against every
        # public CA is rarely meant, so the truststore is asked for.
        raise ConfigError(
            f"ssl.client.auth={auth} needs the CA that signs client certificates: set ssl.truststore.location"
        )
    ctx.verify_mode = _CLIENT_AUTH[auth]
    return ctx


def client_context(cfg: dict[str, str]) -> ssl.SSLContext:
    """The context for this broker's own connections to a TLS listener (replica fetchers, the controller)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _common(ctx, cfg)
    if not _load_truststore(ctx, cfg):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    _load_keystore(ctx, cfg, required=False)
    algorithm = cfg.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", ""):
        raise ConfigError(f"ssl.endpoint.identification.algorithm={algorithm!r} is https or empty")
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


# --- principal ----------------------------------------------------------------------------------------

# The only keywords X500Principal.getName() (RFC 2253) prints; every other type is printed as its OID.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string tags Java prints as text (UTF8, Printable, T61, IA5, General, BMP); others go out as #hex.
_STRING_TAGS = {12: "utf-8", 19: "ascii", 20: "latin-1", 22: "ascii", 27: "latin-1", 30: "utf-16-be"}
_ESCAPED = set(',=+<>#;"\\')


class _Der:
    """Just enough DER to walk a certificate to its subject."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, pos: int) -> tuple[int, int, int, int]:
        """(tag, start of content, end of content, end of the whole element)."""
        tag = self.data[pos]
        length = self.data[pos + 1]
        pos += 2
        if length & 0x80:
            n = length & 0x7F
            length = int.from_bytes(self.data[pos : pos + n], "big")
            pos += n
        end = pos + length
        if end > len(self.data):
            raise ValueError("truncated DER")
        return tag, pos, end, end

    def children(self, start: int, end: int) -> list[tuple[int, int, int, int]]:
        out = []
        pos = start
        while pos < end:
            tag, cstart, cend, nxt = self.read(pos)
            out.append((tag, pos, cstart, cend))
            pos = nxt
        return out


def _oid(data: bytes) -> str:
    parts: list[int] = []
    value = 0
    for b in data:
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            parts.append(value)
            value = 0
    first = parts[0]
    head = [0, first] if first < 40 else [1, first - 40] if first < 80 else [2, first - 80]
    return ".".join(str(p) for p in head + parts[1:])


def _escape(value: str) -> str:
    out = []
    for ch in value:
        if ch in _ESCAPED:
            out.append("\\" + ch)
        elif ch == "\x00":
            out.append("\\00")
        else:
            out.append(ch)
    text = "".join(out)
    # Leading and trailing spaces (and CRs) are escaped, as Java does.
    stripped = text.lstrip(" \r")
    core = stripped.rstrip(" \r")
    lead, trail = text[: len(text) - len(stripped)], stripped[len(core) :]
    return "".join("\\" + c for c in lead) + core + "".join("\\" + c for c in trail)


def subject_rfc2253(der_cert: bytes) -> str:
    """The subject of a DER certificate as Java's X500Principal.getName() prints it: last RDN first, commas
    without spaces, multi-valued RDNs joined by + in encoded order, unknown types as OID=#hex."""
    der = _Der(der_cert)
    _, cstart, cend, _ = der.read(0)
    tbs = der.children(cstart, cend)[0]
    fields = der.children(tbs[2], tbs[3])
    if fields and fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    subject = fields[4]
    rdns = []
    for _set_tag, _, sstart, send in der.children(subject[2], subject[3]):
        avas = []
        for _seq_tag, _, astart, aend in der.children(sstart, send):
            (_, _, ostart, oend), (vtag, vpos, vstart, vend) = der.children(astart, aend)[:2]
            oid = _oid(der_cert[ostart:oend])
            keyword = _RFC2253_KEYWORDS.get(oid)
            encoding = _STRING_TAGS.get(vtag)
            if keyword is None or encoding is None:
                avas.append(f"{keyword or oid}=#{der_cert[vpos:vend].hex()}")
            else:
                text = der_cert[vstart:vend].decode(encoding, errors="replace")
                avas.append(f"{keyword}={_escape(text)}")
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


def principal_from_peer_cert(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str:
    """Kafka's principal for a TLS peer under the DEFAULT ssl.principal.mapping.rules: User:ANONYMOUS with no
    client certificate, else User:<subject in RFC 2253 form>, e.g. User:CN=alice,OU=eng,O=acme,C=US."""
    if ssl_object is None:
        return "User:ANONYMOUS"
    # The binary form is there whatever the verify mode; the dict form is empty unless the cert was verified.
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return "User:ANONYMOUS"
    return "User:" + subject_rfc2253(der)

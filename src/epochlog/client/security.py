"""How our own wire client secures a connection, from Kafka client properties (a tool's
``--command-config`` file): TLS from PEM files and SASL PLAIN/SCRAM credentials.

Both the Java client's names (``sasl.jaas.config``, ``ssl.truststore.location``, ``ssl.keystore.location``)
and librdkafka's (``sasl.username``/``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``
+ ``ssl.key.location``) are read, since users bring one or the other.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from epochlog.properties import load_properties
from epochlog.security.plain import parse_jaas
from epochlog.security.sasl_client import CLIENT_MECHANISMS

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_location: str | None = None  # PEM CA bundle; None = the system's trust store
    ca_pem: str | None = field(default=None, repr=False)  # ssl.truststore.certificates (inline PEM)
    cert_location: str | None = None  # PEM certificate chain, with the key too when key_location is None
    key_location: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """Raises ValueError naming the property that is wrong or missing."""

        def get(*names: str) -> str | None:
            for n in names:
                v = props.get(n)
                if v is not None and v.strip() != "":
                    return v.strip()
            return None

        protocol = (get("security.protocol") or "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise ValueError(f"security.protocol={protocol!r} is not one of {', '.join(PROTOCOLS)}")
        mechanism = username = password = None
        if protocol.startswith("SASL_"):
            # Kafka's default sasl.mechanism is GSSAPI, which epochlog does not speak: say so.
            mechanism = (get("sasl.mechanism", "sasl.mechanisms") or "GSSAPI").upper()
            if mechanism not in CLIENT_MECHANISMS:
                raise ValueError(
                    f"sasl.mechanism={mechanism} is not supported; set one of {', '.join(CLIENT_MECHANISMS)}"
                )
            username, password = get("sasl.username"), props.get("sasl.password")
            jaas = get("sasl.jaas.config")
            if jaas is not None and username is None:
                try:
                    options = parse_jaas(jaas).options
                except ValueError as e:
                    raise ValueError(f"sasl.jaas.config: {e}") from None
                username, password = options.get("username"), options.get("password")
            if not username or password is None:
                raise ValueError(
                    f"security.protocol={protocol} needs credentials: sasl.username and sasl.password, "
                    'or sasl.jaas.config with username="..." password="..."'
                )
        for kind_key in ("ssl.truststore.type", "ssl.keystore.type"):
            kind = get(kind_key)
            if kind is not None and kind.upper() != "PEM":
                raise ValueError(f"{kind_key}={kind}: only PEM files are supported")
        cert = get("ssl.keystore.location", "ssl.certificate.location")
        key = get("ssl.key.location")
        if key is not None and cert is None:
            raise ValueError("ssl.key.location is set without ssl.certificate.location")
        algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
        if algorithm not in ("https", ""):
            raise ValueError(f"ssl.endpoint.identification.algorithm={algorithm!r}: use https or leave it empty")
        return cls(
            protocol=protocol,
            mechanism=mechanism,
            username=username,
            password=password,
            ca_location=get("ssl.truststore.location", "ssl.ca.location"),
            ca_pem=get("ssl.truststore.certificates"),
            cert_location=cert,
            key_location=key,
            key_password=props.get("ssl.key.password") or props.get("ssl.keystore.password") or None,
            check_hostname=algorithm == "https",
        )

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for SSL / SASL_SSL, None otherwise. Raises ValueError on unreadable files."""
        if not self.uses_tls:
            return None
        try:
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ca_location, cadata=self.ca_pem)
            if self.cert_location is not None:
                ctx.load_cert_chain(self.cert_location, self.key_location, self.key_password)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"cannot set up TLS from the ssl.* properties: {e}") from e
        ctx.check_hostname = self.check_hostname
        ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx


def librdkafka_config(security: ClientSecurity) -> dict[str, str]:
    """The same settings in librdkafka's property names, for confluent-kafka clients."""
    out = {"security.protocol": security.protocol}
    if security.uses_sasl:
        out["sasl.mechanism"] = str(security.mechanism)
        out["sasl.username"] = str(security.username)
        out["sasl.password"] = str(security.password)
    if security.uses_tls:
        if security.ca_location is not None:
            out["ssl.ca.location"] = security.ca_location
        if security.ca_pem is not None:
            out["ssl.ca.pem"] = security.ca_pem
        if security.cert_location is not None:
            out["ssl.certificate.location"] = security.cert_location
            # A PEM chain may hold its key too (Kafka's PEM keystore does); librdkafka wants it named.
            out["ssl.key.location"] = security.key_location or security.cert_location
        if security.key_password is not None:
            out["ssl.key.password"] = security.key_password
        out["ssl.endpoint.identification.algorithm"] = "https" if security.check_hostname else "none"
    return out


def load_command_config(path: str | Path) -> ClientSecurity:
    """A tool's ``--command-config`` properties file. Raises ValueError (ConfigError) with the reason."""
    return ClientSecurity.from_properties(load_properties(Path(path)))

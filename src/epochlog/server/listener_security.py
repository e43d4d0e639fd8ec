"""What one listener asks of its connections: TLS, SASL mechanisms and their credentials, and the
principal each connection starts with. Built once per listener from the node's properties with Kafka's
names (``listener.name.<name>.`` prefixes included); the connections only carry it out."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from epochlog.security.scram_credentials import ScramCredential
from epochlog.security.session import ANONYMOUS, Session

SASL_PROTOCOLS = {"SASL_PLAINTEXT", "SASL_SSL"}
TLS_PROTOCOLS = {"SSL", "SASL_SSL"}
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# BrokerRegistration's security_protocol codes (Kafka's SecurityProtocol ids).
PROTOCOL_CODES = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

ScramLookup = Callable[[str, str], ScramCredential | None]


@dataclass
class ListenerSecurity:
    name: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanisms: list[str] = field(default_factory=list)
    plain_users: dict[str, str] = field(default_factory=dict)
    reauth_ms: int = 0  # connections.max.reauth.ms (KIP-368); 0 = sessions never expire
    failed_auth_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    max_receive_size: int = 524_288  # sasl.server.max.receive.size: frames before authentication

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    def new_session(self, client_host: str) -> Session:
        return Session(
            principal=ANONYMOUS,
            listener=self.name,
            protocol=self.protocol,
            client_host=client_host,
            authenticated=not self.sasl,
        )

    def new_authenticator(self, scram_lookup: ScramLookup) -> Any:
        if not self.sasl:
            return None
        from epochlog.security.sasl import SaslAuthenticator

        return SaslAuthenticator(
            enabled_mechanisms=list(self.sasl_mechanisms),
            scram_lookup=scram_lookup,
            plain_users=dict(self.plain_users),
            reauth_ms=self.reauth_ms,
            max_receive_size=self.max_receive_size,
        )


PLAINTEXT = ListenerSecurity()


def listener_security(
    props: dict[str, str], listener: Any, ssl_context: ssl.SSLContext | None = None
) -> ListenerSecurity:
    """One listener's security from the node's properties (``listener`` a security.listeners.Listener).
    ``ssl_context``: the server context already built while the configuration was checked, if it was."""
    from epochlog.security.listeners import jaas_for, listener_config
    from epochlog.security.plain import parse_jaas
    from epochlog.security.tls import server_context
    from epochlog.security.tls_read import drain_records
    from epochlog.server.config import _int

    cfg = listener_config(props, listener.name)
    sec = ListenerSecurity(name=listener.name, protocol=listener.protocol)
    if listener.protocol in TLS_PROTOCOLS:
        sec.ssl_context = drain_records(ssl_context or server_context(cfg))
    if listener.protocol in SASL_PROTOCOLS:
        enabled = cfg.get("sasl.enabled.mechanisms", "")
        sec.sasl_mechanisms = [m.strip().upper() for m in enabled.split(",") if m.strip()]
        if "PLAIN" in sec.sasl_mechanisms:
            jaas = jaas_for(props, listener.name, "PLAIN")
            if jaas:
                sec.plain_users = parse_jaas(jaas).plain_users()
        sec.reauth_ms = _int(cfg, "connections.max.reauth.ms", 0)
        sec.max_receive_size = _int(cfg, "sasl.server.max.receive.size", 524_288)
    sec.failed_auth_delay_ms = _int(cfg, "connection.failed.authentication.delay.ms", 100)
    return sec

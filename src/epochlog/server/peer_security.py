"""How this node authenticates to its peers: the inter-broker listener's security for replica fetchers
and transaction markers, the controller listener's for the controller channel and the quorum.

Kafka's names: the listener's protocol from listener.security.protocol.map, the mechanism from
sasl.mechanism.inter.broker.protocol (or sasl.mechanism.controller.protocol), the username and password
from the listener's ``<mechanism>.sasl.jaas.config`` (or sasl.jaas.config)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from epochlog.server.listener_security import SASL_PROTOCOLS, TLS_PROTOCOLS


@dataclass
class PeerSecurity:
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""

    def sasl_client(self) -> Any:
        from epochlog.security.sasl_client import SaslClientSession

        assert self.sasl_mechanism is not None
        return SaslClientSession(self.sasl_mechanism, self.username, self.password)

    def __repr__(self) -> str:  # never the password
        return f"PeerSecurity({self.protocol}, mechanism={self.sasl_mechanism}, user={self.username!r})"


def peer_security(props: dict[str, str], listener_name: str, protocol: str, mechanism_key: str) -> PeerSecurity | None:
    """None for a PLAINTEXT listener: the connection stays as it always was."""
    from epochlog.config_error import ConfigError

    if protocol == "PLAINTEXT":
        return None
    from epochlog.security.listeners import jaas_for, listener_config
    from epochlog.security.plain import parse_jaas
    from epochlog.security.tls import client_context

    cfg = listener_config(props, listener_name)
    sec = PeerSecurity(protocol)
    if protocol in TLS_PROTOCOLS:
        sec.ssl_context = client_context(cfg)
    if protocol in SASL_PROTOCOLS:
        mechanism = props.get(mechanism_key, "").strip().upper()
        if not mechanism:
            raise ConfigError(f"{mechanism_key} is required: listener {listener_name} uses {protocol}")
        jaas = jaas_for(props, listener_name, mechanism)
        if not jaas:
            raise ConfigError(
                f"listener.name.{listener_name.lower()}.{mechanism.lower()}.sasl.jaas.config is required: this node "
                f"authenticates to its peers on {listener_name} with {mechanism}"
            )
        options = parse_jaas(jaas).options
        if "username" not in options or "password" not in options:
            raise ConfigError(
                f"the {mechanism} sasl.jaas.config of listener {listener_name} needs username and password options"
            )
        sec.sasl_mechanism = mechanism
        sec.username, sec.password = options["username"], options["password"]
    return sec


def inter_broker_security(config: Any) -> PeerSecurity | None:
    """A broker's security toward the other brokers' inter-broker listener (a BrokerConfig)."""
    name = config.inter_broker_listener_name
    protocol = next((lst.protocol for lst in config.listeners if lst.name == name), "PLAINTEXT")
    return peer_security(config.raw, name, protocol, "sasl.mechanism.inter.broker.protocol")


def controller_security(props: dict[str, str]) -> PeerSecurity | None:
    """Security toward the controllers' listener: the first of controller.listener.names, its protocol
    from listener.security.protocol.map, the mechanism from sasl.mechanism.controller.protocol."""
    from epochlog.security.listeners import controller_listener_names, security_protocol_map

    names = controller_listener_names(props)
    if not names:
        return None
    protocol = security_protocol_map(props)[0].get(names[0], "PLAINTEXT")
    return peer_security(props, names[0], protocol, "sasl.mechanism.controller.protocol")

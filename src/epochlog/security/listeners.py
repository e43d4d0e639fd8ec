"""Listeners with Kafka's names: ``listeners``, ``advertised.listeners``, ``listener.security.protocol.map``,
``inter.broker.listener.name`` / ``security.inter.broker.protocol``, ``controller.listener.names`` and the
per-listener ``listener.name.<name>.`` property prefix."""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.config_error import ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})

# Kafka's listener.security.protocol.map default: each protocol is a listener name of its own.
DEFAULT_PROTOCOL_MAP = {p: p for p in PROTOCOLS}
# epochlog accepted these names as plaintext before it had a protocol map; without a map they still are.
LEGACY_PLAINTEXT_NAMES = ("BROKER", "INTERNAL", "EXTERNAL", "CLIENT", "CONTROLLER")


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    protocol: str

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


def split_listeners(value: str, key: str = "listeners") -> list[tuple[str, str, int]]:
    """'PLAINTEXT://h:9092,CONTROLLER://h:9093' -> [(name, host, port), ...], names upper-cased."""
    out: list[tuple[str, str, int]] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, rest = item.partition("://")
        if not sep:
            name, rest = "PLAINTEXT", item
        host, sep, port = rest.rpartition(":")
        if not sep:
            raise ConfigError(f"{key}={value!r}: {item!r} has no port")
        try:
            p = int(port)
        except ValueError:
            raise ConfigError(f"{key}={value!r}: port {port!r} is not a number") from None
        if not 0 <= p <= 65535:
            raise ConfigError(f"{key}={value!r}: port out of range")
        out.append((name.upper(), host or "0.0.0.0", p))
    return out


def controller_listener_names(props: dict[str, str]) -> list[str]:
    raw = props.get("controller.listener.names", "")
    return [n.strip().upper() for n in raw.split(",") if n.strip()]


def security_protocol_map(props: dict[str, str]) -> tuple[dict[str, str], bool]:
    """The name -> protocol map and whether it was given explicitly."""
    raw = props.get("listener.security.protocol.map", "").strip()
    if not raw:
        implicit = dict(DEFAULT_PROTOCOL_MAP)
        # KRaft: controller listener names outside the default map are PLAINTEXT while no map is set.
        for name in (*controller_listener_names(props), *LEGACY_PLAINTEXT_NAMES):
            implicit.setdefault(name, "PLAINTEXT")
        return implicit, False
    out: dict[str, str] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
        if protocol not in PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map: {item!r}: the protocol is one of {', '.join(PROTOCOLS)}"
            )
        if name in out:
            raise ConfigError(f"listener.security.protocol.map names {name} twice")
        out[name] = protocol
    return out, True


def _explicit_meta_address(value: str) -> bool:
    # split_listeners turns an empty host into 0.0.0.0; only a written 0.0.0.0 is refused when advertised.
    for item in value.split(","):
        rest = item.strip().partition("://")[2] or item.strip()
        if rest.rpartition(":")[0] == "0.0.0.0":
            return True
    return False


def parse_listeners(props: dict[str, str], key: str = "listeners") -> list[Listener]:
    """``NAME://host:port,...`` under ``key`` (empty host -> 0.0.0.0; bare host:port -> PLAINTEXT), each with
    its protocol from the map. Names must be distinct; for ``listeners`` ports too (port 0 is ephemeral, so
    never a clash). An absent or empty property gives no listeners."""
    value = props.get(key, "")
    protocols, explicit = security_protocol_map(props)
    out: list[Listener] = []
    names: set[str] = set()
    ports: set[int] = set()
    for name, host, port in split_listeners(value, key):
        if name in names:
            raise ConfigError(f"{key}={value!r} names the listener {name} twice")
        names.add(name)
        if key == "listeners":
            if port and port in ports:
                raise ConfigError(f"{key}={value!r} uses port {port} twice")
            ports.add(port)
        protocol = protocols.get(name)
        if protocol is None:
            if explicit:
                raise ConfigError(
                    f"{key}: listener {name} is not in listener.security.protocol.map "
                    f"({props['listener.security.protocol.map']!r})"
                )
            raise ConfigError(
                f"{key}: listener {name} has no security protocol; name it PLAINTEXT, SSL, SASL_PLAINTEXT "
                "or SASL_SSL, or map it in listener.security.protocol.map"
            )
        out.append(Listener(name, host, port, protocol))
    return out


def advertised_listeners(props: dict[str, str], listeners: list[Listener]) -> list[Listener]:
    """What Metadata hands clients: ``advertised.listeners``, else the listeners with a wildcard host given
    as 127.0.0.1. Controller listeners are left out, as Kafka's broker does (clients never dial them)."""
    controllers = set(controller_listener_names(props))
    raw = props.get("advertised.listeners", "").strip()
    if not raw:
        return [
            Listener(lst.name, "127.0.0.1" if lst.host in ("", "0.0.0.0") else lst.host, lst.port, lst.protocol)
            for lst in listeners
            if lst.name not in controllers
        ]
    if _explicit_meta_address(raw):
        raise ConfigError(
            f"advertised.listeners={raw!r}: 0.0.0.0 cannot be dialled; advertise a host clients can reach"
        )
    known = {lst.name for lst in listeners}
    out: list[Listener] = []
    for adv in parse_listeners(props, "advertised.listeners"):
        if adv.name in controllers:
            continue
        if adv.name not in known:
            raise ConfigError(f"advertised.listeners: {adv.name} is not one of listeners ({', '.join(known)})")
        host = "127.0.0.1" if adv.host in ("", "0.0.0.0") else adv.host
        out.append(Listener(adv.name, host, adv.port, adv.protocol))
    return out


def inter_broker_listener(props: dict[str, str], listeners: list[Listener]) -> Listener:
    """The listener replication and the broker's own requests use.

    ``inter.broker.listener.name`` names it; else ``security.inter.broker.protocol`` (default PLAINTEXT) names
    the listener called after that protocol; both set is an error, as in Kafka. When neither is set and no
    listener is called PLAINTEXT, the first non-controller listener is taken, which is what epochlog did
    before it knew listener names (Kafka would refuse such a config)."""
    name_prop = props.get("inter.broker.listener.name", "").strip().upper()
    proto_prop = props.get("security.inter.broker.protocol", "").strip().upper()
    if name_prop and proto_prop:
        raise ConfigError("inter.broker.listener.name and security.inter.broker.protocol are both set; set one")
    if proto_prop and proto_prop not in PROTOCOLS:
        raise ConfigError(f"security.inter.broker.protocol={proto_prop!r} is not one of {', '.join(PROTOCOLS)}")
    controllers = set(controller_listener_names(props))
    by_name = {lst.name: lst for lst in listeners}
    key = "inter.broker.listener.name" if name_prop else "security.inter.broker.protocol"
    wanted = name_prop or proto_prop or "PLAINTEXT"
    if wanted in controllers:
        raise ConfigError(f"{key}: {wanted} is in controller.listener.names; brokers must not replicate over it")
    found = by_name.get(wanted)
    if found is not None:
        return found
    if not name_prop and not proto_prop:
        for lst in listeners:
            if lst.name not in controllers:
                return lst
    raise ConfigError(f"{key}={wanted}: no listener of that name in listeners ({', '.join(by_name) or 'none'})")


def _prefix(listener_name: str) -> str:
    return f"listener.name.{listener_name.lower()}."


def listener_config(props: dict[str, str], listener_name: str) -> dict[str, str]:
    """The properties as one listener sees them: ``listener.name.<name>.<key>`` wins over ``<key>``.

    Mechanism-prefixed keys (``listener.name.<l>.<mechanism>.sasl.jaas.config``) come out as
    ``<mechanism>.sasl.jaas.config``; ``jaas_for`` is the way to read them."""
    prefix = _prefix(listener_name)
    out = {k: v for k, v in props.items() if not k.lower().startswith("listener.name.")}
    for key, value in props.items():
        if key.lower().startswith(prefix) and len(key) > len(prefix):
            out[key[len(prefix) :]] = value
    return out


def jaas_for(props: dict[str, str], listener_name: str, mechanism: str) -> str | None:
    """The JAAS line for one mechanism on one listener: ``listener.name.<l>.<mechanism>.sasl.jaas.config``,
    else ``listener.name.<l>.sasl.jaas.config``, else ``sasl.jaas.config``."""
    prefix = _prefix(listener_name)
    lowered = {k.lower(): v for k, v in props.items()}
    for key in (f"{prefix}{mechanism.lower()}.sasl.jaas.config", f"{prefix}sasl.jaas.config", "sasl.jaas.config"):
        value = lowered.get(key)
        if value is not None and value.strip():
            return value
    return None


# Kafka's PASSWORD-type properties among those epochlog reads: DescribeConfigs must answer them as
# sensitive (no value), whether given bare, per listener, or per listener and mechanism.
SENSITIVE_CONFIGS = frozenset(
    {
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "sasl.jaas.config",
    }
)


def is_sensitive(name: str) -> bool:
    lowered = name.lower()
    return any(lowered == key or lowered.endswith("." + key) for key in SENSITIVE_CONFIGS)

"""Dynamic configs over the wire: IncrementalAlterConfigs and DescribeConfigs, for `epochlog configs`.

confluent-kafka's AdminClient cannot name the cluster-wide broker default (a BROKER resource with an empty
name), which kafka-configs.sh's --entity-default needs, so these two requests go through client/wire.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kio.static.primitive import i8

from epochlog.client.epochs import connect_first, metadata_request
from epochlog.client.wire import Connection, WireError
from epochlog.codes import Err
from epochlog.config_defs import RESOURCE_BROKER, RESOURCE_TOPIC, ConfigSource

TOPIC, BROKER = RESOURCE_TOPIC, RESOURCE_BROKER
SET, DELETE = 0, 1


class ConfigsError(Exception):
    """The broker refused the request; ``code`` is Kafka's error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class DescribedConfig:
    name: str
    value: str | None
    source: str
    read_only: bool
    synonyms: tuple[tuple[str, str | None, str], ...]


def _source(code: int) -> str:
    try:
        return ConfigSource(code).name
    except ValueError:
        return str(code)


def _connect(bootstrap: str, timeout: float) -> Connection:
    return connect_first(bootstrap, timeout, "epochlog-configs")  # any broker answers these requests


def _check(row: Any) -> None:
    code = int(row.error_code)
    if code:
        name = str(getattr(row.error_code, "name", code)).upper()
        raise ConfigsError(code, f"{name}: {row.error_message or 'refused'}")


def alter(
    bootstrap: str,
    resource_type: int,
    name: str,
    set_: dict[str, str],
    delete: list[str],
    validate_only: bool = False,
    timeout: float = 15.0,
) -> None:
    """Set and delete dynamic configs of one resource (IncrementalAlterConfigs); raises ConfigsError."""
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )

    ops = [AlterableConfig(name=k, config_operation=i8(SET), value=v) for k, v in set_.items()]
    ops += [AlterableConfig(name=k, config_operation=i8(DELETE), value=None) for k in delete]
    req = IncrementalAlterConfigsRequest(
        resources=(AlterConfigsResource(resource_type=i8(resource_type), resource_name=name, configs=tuple(ops)),),
        validate_only=validate_only,
    )
    with _connect(bootstrap, timeout) as conn:
        resp = _send(conn, req, resource_type, name, timeout)
    for row in resp.responses:
        _check(row)


def _send(conn: Connection, req: Any, resource_type: int, name: str, timeout: float) -> Any:
    """Send ``req`` where Kafka wants it: a broker's own configs to that broker, the rest to any."""
    if resource_type != BROKER or not name:
        return conn.request(req)
    try:
        target = _broker_address(conn, int(name))
    except ValueError:
        raise ConfigsError(Err.INVALID_REQUEST, f"broker {name!r} is not a broker id") from None
    if target is None:
        raise ConfigsError(Err.INVALID_REQUEST, f"no broker {name} in the cluster")
    with Connection(*target, timeout=timeout, client_id="epochlog-configs") as direct:
        return direct.request(req)


def _broker_address(conn: Connection, broker_id: int) -> tuple[str, int] | None:
    md = conn.request(metadata_request((), version=12))
    for b in md.brokers:
        if int(b.node_id) == broker_id:
            return str(b.host), int(b.port)
    return None


def describe(bootstrap: str, resource_type: int, name: str, timeout: float = 15.0) -> list[DescribedConfig]:
    """Every config of one resource with its source and synonyms. A broker by id is asked directly (Kafka
    answers DescribeConfigs for a broker only on that broker)."""
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource

    req = DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(resource_type=i8(resource_type), resource_name=name, configuration_keys=None),
        ),
        include_synonyms=True,
        include_documentation=False,
    )
    with _connect(bootstrap, timeout) as conn:
        resp = _send(conn, req, resource_type, name, timeout)
    rows = []
    for result in resp.results:
        _check(result)
        for c in result.configs:
            rows.append(
                DescribedConfig(
                    c.name,
                    c.value,
                    _source(int(c.config_source)),
                    bool(c.read_only),
                    tuple((s.name, s.value, _source(int(s.source))) for s in c.synonyms),
                )
            )
    return rows


__all__ = ["BROKER", "TOPIC", "ConfigsError", "DescribedConfig", "WireError", "alter", "describe"]

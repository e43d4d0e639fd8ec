"""`epochlog up --cores N`: one host's N cores as N full brokers (each its own process, node id, port and log
directory) beside a controller quorum of one, all on the rack named for the host. A broker is one Python
process on one core, and Kafka clients already send each partition's requests to its leader, so brokers
side by side use a host's cores with no protocol change (docs/architecture.md, "A host's every core")."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from epochlog.server.cluster.local import LocalCluster

# Properties each broker process has its own value of; a --config or --set naming them is a mistake.
PER_PROCESS = ("node.id", "process.roles", "listeners", "advertised.listeners", "log.dirs", "log.dir", "broker.rack")


def host_cluster(
    cores: int,
    config: Path | None,
    data_dir: Path | None,
    port: int | None,
    host: str | None,
    overrides: list[str],
) -> LocalCluster:
    """The LocalCluster `epochlog up --cores N` runs; raises ConfigError on what it cannot honour."""
    from epochlog.config_error import ConfigError
    from epochlog.properties import load_properties
    from epochlog.server.cluster.local import LocalCluster

    if host not in (None, "127.0.0.1"):
        raise ConfigError("--cores runs its brokers on 127.0.0.1; --host is for a single process")
    props = load_properties(config) if config else {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        props[key.strip()] = value.strip()
    named = sorted(k for k in props if k in PER_PROCESS or k.startswith("controller.quorum."))
    if named:
        raise ConfigError(f"with --cores each broker has its own {', '.join(named)}: leave them out")
    where = Path(data_dir or "epochlog-data")
    if (where / "meta.properties").exists():
        raise ConfigError(f"{where} holds a single-process node's data; give --cores a data directory of its own")
    # One host holds one copy of each partition: the single-node defaults, as `epochlog up` has them.
    for key in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "share.coordinator.state.topic.replication.factor",
    ):
        props.setdefault(key, "1")
    props.setdefault("transaction.state.log.min.isr", "1")
    props.setdefault("share.coordinator.state.topic.min.isr", "1")
    props.setdefault("default.replication.factor", "1")
    return LocalCluster(
        where,
        cores,
        9092 if port is None else port,
        broker_settings=props,
        controllers=1,
        cores=cores,
        host_names=(socket.gethostname(),),
    )

"""Combined mode (``process.roles=broker,controller``): the controller and a broker in one process.

This is what `epochlog up` runs. It is not a second broker: the broker is the cluster's ClusterBroker,
talking to the controller over its CONTROLLER listener exactly as a broker on another host would, so
the single node runs the code the cluster tests and the simulator check (a quorum of one).

The controller's metadata log lives in the first log directory as ``__cluster_metadata-0`` (Kafka's
default ``metadata.log.dir``); the broker's log manager leaves that directory alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from epochlog.server.cluster.broker import ClusterBroker
from epochlog.server.cluster.controller_config import ControllerConfig
from epochlog.server.cluster.controller_server import ControllerServer
from epochlog.server.config import BrokerConfig
from epochlog.server.single_node_import import import_single_node_dir


class CombinedServer:
    def __init__(self, broker_config: BrokerConfig, controller_config: ControllerConfig) -> None:
        self.broker_config = broker_config
        self.controller_config = controller_config
        self.controller = ControllerServer(controller_config)
        self.broker: ClusterBroker | None = None

    async def start(self) -> None:
        import_single_node_dir(Path(self.controller_config.log_dir), self.broker_config.node_id)
        self.controller_config.metrics_port = 0  # the node's one endpoint is the broker's (see below)
        await self.controller.start()
        # With no fixed CONTROLLER port the listener took an ephemeral one; the broker dials what it got.
        self.broker_config.controller_address = (self.controller_config.host, self.controller.bound_port())
        self.broker_config.controllers = [(self.controller_config.node_id, *self.broker_config.controller_address)]
        self.broker = ClusterBroker(self.broker_config)
        if self.controller_config.listener.protocol == "PLAINTEXT":
            self.broker.controller.security = None  # the ephemeral listener, or a plaintext one
        # One endpoint for the node: the controller's metrics join the broker's registry.
        for collector in self.controller.metrics.collectors():
            self.broker.metrics.registry.register(collector)
        try:
            await self.broker.start()
        except BaseException:
            await self.controller.stop()
            raise

    async def stop(self) -> None:
        if self.broker is not None:
            await self.broker.stop()
        await self.controller.stop()

    @property
    def must_stop(self) -> asyncio.Event | None:
        return self.broker.must_stop if self.broker is not None else None

    @property
    def exit_code(self) -> int:
        return self.broker.exit_code if self.broker is not None else 0

    # `epochlog up --roundtrip` and the tests' on_ready hooks read these from the server they started.
    @property
    def config(self) -> BrokerConfig:
        return self.broker_config


def run_combined(
    broker_config: BrokerConfig,
    controller_config: ControllerConfig,
    on_ready: Callable[[CombinedServer], None] | None = None,
) -> None:
    from epochlog.server.lifecycle import run_until_signal

    run_until_signal(lambda: CombinedServer(broker_config, controller_config), on_ready)


COMBINED_ROLES = {"broker", "controller"}


def combined_configs(props: dict[str, str]) -> tuple[BrokerConfig, ControllerConfig]:
    """Split one server.properties into the broker's and the controller's configuration.

    The listener named by ``controller.listener.names`` (default CONTROLLER) is the controller's; when
    there is none the controller listens on an ephemeral port of the broker's host, since in a quorum of
    one only this process dials it."""
    from epochlog.config_error import ConfigError
    from epochlog.security.listeners import split_listeners

    roles = {r.strip() for r in props.get("process.roles", "broker,controller").split(",") if r.strip()}
    if roles != COMBINED_ROLES:
        raise ConfigError(
            f"process.roles={props['process.roles']!r}: `epochlog up` runs broker,controller in one process; "
            "use `epochlog broker` or `epochlog controller` for a single role"
        )
    props = {"node.id": "1", **props}
    names = {n.strip().upper() for n in props.get("controller.listener.names", "CONTROLLER").split(",") if n.strip()}
    listeners = split_listeners(props.get("listeners", "PLAINTEXT://127.0.0.1:9092"))
    controller = [(n, h, p) for n, h, p in listeners if n in names]
    broker = [(n, h, p) for n, h, p in listeners if n not in names]
    if not broker:
        raise ConfigError(f"listeners={props.get('listeners')!r} has no listener for clients")
    if len(controller) > 1:
        raise ConfigError("listeners: a combined node has one controller listener")
    broker_props = {**props, "listeners": ",".join(f"{n}://{h}:{p}" for n, h, p in broker)}
    broker_props.pop("controller.quorum.voters", None)
    broker_props.pop("controller.quorum.bootstrap.servers", None)
    bcfg = BrokerConfig.from_properties(broker_props)
    # No controller listener: an ephemeral plaintext one on the broker's host, dialled only by this process.
    cname, chost, cport = controller[0] if controller else ("PLAINTEXT", bcfg.host, 0)
    ccfg = ControllerConfig.from_properties({**props, "listeners": f"{cname}://{chost}:{cport}"})
    ccfg.log_dir = Path(props.get("metadata.log.dir") or bcfg.log_dir)
    ccfg.colocated_broker = True
    return bcfg, ccfg

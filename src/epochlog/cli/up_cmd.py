"""`epochlog up`: a single-node cluster, combined mode (process.roles=broker,controller: the controller
and the cluster's broker in one process, a quorum of one)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from epochlog.server.cluster.controller_config import ControllerConfig
    from epochlog.server.config import BrokerConfig

from epochlog.cli.host_cluster import host_cluster
from epochlog.cli.local_run import run_until_signal
from epochlog.cli.logging_setup import setup_logging


def _build_config(
    config: Path | None, data_dir: Path | None, port: int | None, host: str | None, overrides: list[str]
) -> tuple[BrokerConfig, ControllerConfig]:
    from epochlog.config_error import ConfigError
    from epochlog.properties import load_properties
    from epochlog.server.combined import combined_configs

    props = load_properties(config) if config else {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        props[key.strip()] = value.strip()
    if data_dir is not None:
        props["log.dirs"] = str(data_dir)
    if port is not None or host is not None:
        # --port is the PLAINTEXT listener's; the others (CONTROLLER, SSL, SASL_SSL, ...) stay as configured.
        others = [
            x.strip()
            for x in props.get("listeners", "").split(",")
            if x.strip() and not x.strip().upper().startswith("PLAINTEXT://") and "://" in x
        ]
        props["listeners"] = ",".join(
            [f"PLAINTEXT://{host or '127.0.0.1'}:{port if port is not None else 9092}", *others]
        )
        props.pop("advertised.listeners", None)
    props.setdefault("log.dirs", "epochlog-data")
    props.setdefault("listeners", "PLAINTEXT://127.0.0.1:9092")
    # One node can hold one copy: the single-node defaults of Kafka's shipped KRaft server.properties.
    props.setdefault("offsets.topic.replication.factor", "1")
    props.setdefault("transaction.state.log.replication.factor", "1")
    props.setdefault("transaction.state.log.min.isr", "1")
    props.setdefault("share.coordinator.state.topic.replication.factor", "1")
    props.setdefault("share.coordinator.state.topic.min.isr", "1")
    return combined_configs(props)


def register(app: typer.Typer) -> None:
    @app.command()
    def up(
        config: Annotated[Path | None, typer.Option("--config", "-c", help="server.properties file")] = None,
        data_dir: Annotated[Path | None, typer.Option("--data-dir", help="log directory (log.dirs)")] = None,
        port: Annotated[int | None, typer.Option("--port", help="listener port on 127.0.0.1")] = None,
        host: Annotated[str | None, typer.Option("--host", help="listener address")] = None,
        set_: Annotated[list[str], typer.Option("--set", help="override a property: key=value")] = [],  # noqa: B006
        roundtrip: Annotated[
            bool, typer.Option("--roundtrip", help="produce and consume a few messages once up")
        ] = False,
        log_level: Annotated[str, typer.Option("--log-level")] = "INFO",
        cores: Annotated[
            int,
            typer.Option(
                "--cores",
                min=1,
                max=64,
                help="use N cores: N broker processes on this host (ports --port.."
                "--port+N-1) and a controller, every broker on the rack named for this host",
            ),
        ] = 1,
    ) -> None:
        """Run a single-node epochlog cluster in the foreground until Ctrl-C or SIGTERM."""
        from epochlog.config_error import ConfigError
        from epochlog.server.combined import run_combined
        from epochlog.storage.errors import StorageError

        setup_logging(log_level)
        if cores > 1:
            try:
                lc = host_cluster(cores, config, data_dir, port, host, set_)
            except ConfigError as e:
                typer.echo(f"epochlog up: bad configuration: {e}", err=True)
                raise typer.Exit(2) from None
            run_until_signal(lc, "epochlog up", f"epochlog is up on {cores} cores")
            return
        try:
            cfg, controller_cfg = _build_config(config, data_dir, port, host, set_)
        except ConfigError as e:
            typer.echo(f"epochlog up: bad configuration: {e}", err=True)
            raise typer.Exit(2) from None

        def on_ready(broker: object) -> None:
            bootstrap = f"{cfg.advertised_host}:{cfg.advertised_port}"
            typer.echo(f"epochlog is up: bootstrap.servers={bootstrap} data={cfg.log_dir}", err=True)
            if roundtrip:
                from epochlog.cli.roundtrip import run_roundtrip

                threading.Thread(target=run_roundtrip, args=(bootstrap,), daemon=True).start()

        try:
            run_combined(cfg, controller_cfg, on_ready)
        except (ConfigError, RuntimeError, OSError, StorageError) as e:
            typer.echo(f"epochlog up: {e}", err=True)
            raise typer.Exit(1) from None

"""`epochlog controller`, `epochlog broker`, `epochlog cluster up` and `epochlog elect-leaders`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from epochlog.cli.local_run import run_until_signal
from epochlog.cli.logging_setup import setup_logging


def _props(config: Path, overrides: list[str]) -> dict[str, str]:
    from epochlog.config_error import ConfigError
    from epochlog.properties import load_properties

    props = load_properties(config)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        props[key.strip()] = value.strip()
    return props


def register(app: typer.Typer) -> None:
    @app.command()
    def controller(
        config: Annotated[Path, typer.Option("--config", "-c", help="controller.properties file")],
        set_: Annotated[list[str], typer.Option("--set", help="override a property: key=value")] = [],  # noqa: B006
        log_level: Annotated[str, typer.Option("--log-level")] = "INFO",
    ) -> None:
        """Run the controller (cluster metadata, elections, ISR changes) until Ctrl-C or SIGTERM."""
        from epochlog.config_error import ConfigError
        from epochlog.server.cluster.controller_config import ControllerConfig
        from epochlog.server.cluster.controller_server import run_controller
        from epochlog.storage.errors import StorageError

        setup_logging(log_level)
        try:
            cfg = ControllerConfig.from_properties(_props(config, set_))
        except ConfigError as e:
            typer.echo(f"epochlog controller: bad configuration: {e}", err=True)
            raise typer.Exit(2) from None
        try:
            run_controller(cfg)
        except (OSError, StorageError) as e:
            typer.echo(f"epochlog controller: {e}", err=True)
            raise typer.Exit(1) from None

    @app.command()
    def broker(
        config: Annotated[Path, typer.Option("--config", "-c", help="server.properties file")],
        set_: Annotated[list[str], typer.Option("--set", help="override a property: key=value")] = [],  # noqa: B006
        log_level: Annotated[str, typer.Option("--log-level")] = "INFO",
    ) -> None:
        """Run one broker of a multi-broker cluster (needs controller.quorum.bootstrap.servers)."""
        from epochlog.config_error import ConfigError
        from epochlog.server.cluster.broker import run_broker
        from epochlog.server.config import BrokerConfig
        from epochlog.storage.errors import StorageError

        setup_logging(log_level)
        try:
            cfg = BrokerConfig.from_properties(_props(config, set_))
            if not cfg.controller_address[1]:
                raise ConfigError("controller.quorum.bootstrap.servers is required for `epochlog broker`")
        except ConfigError as e:
            typer.echo(f"epochlog broker: bad configuration: {e}", err=True)
            raise typer.Exit(2) from None
        try:
            run_broker(cfg)
        except ConfigError as e:  # a property checked where it is used (e.g. quota.window.num)
            typer.echo(f"epochlog broker: bad configuration: {e}", err=True)
            raise typer.Exit(2) from None
        except (RuntimeError, OSError, StorageError) as e:
            typer.echo(f"epochlog broker: {e}", err=True)
            raise typer.Exit(1) from None

    cluster = typer.Typer(help="A local multi-broker cluster", no_args_is_help=True)
    app.add_typer(cluster, name="cluster")

    @cluster.command("up")
    def cluster_up(
        hosts: Annotated[int, typer.Option("--brokers", "-n", min=1, max=9, help="brokers (hosts, with --cores)")] = 3,
        controllers: Annotated[
            int, typer.Option("--controllers", min=0, max=9, help="controller quorum size; default 3 with 3+ brokers")
        ] = 0,
        data_dir: Annotated[Path, typer.Option("--data-dir")] = Path("epochlog-cluster"),
        base_port: Annotated[
            int, typer.Option("--base-port", help="broker 1's port; the controllers' start at +100")
        ] = 9092,
        set_: Annotated[list[str], typer.Option("--set", help="broker property: key=value")] = [],  # noqa: B006
        racks: Annotated[
            int,
            typer.Option(
                "--racks",
                min=0,
                max=9,
                help="deal brokers round-robin to rack-1..rack-N (broker.rack), and let "
                "consumers with client.rack read from their rack (replica.selector.class)",
            ),
        ] = 0,
        cores: Annotated[
            int,
            typer.Option(
                "--cores",
                min=0,
                max=64,
                help="broker processes per host: --brokers hosts of N brokers each, a "
                "host's brokers on the rack named for it (host-1...), so no two copies of a partition share a host",
            ),
        ] = 0,
    ) -> None:
        """Run a controller quorum and N brokers on 127.0.0.1 in the foreground; Ctrl-C/SIGTERM stops them all."""
        from epochlog.replication.read_replica import RACK_AWARE_SELECTOR
        from epochlog.server.cluster.local import CONTROLLER_PORT_OFFSET, LocalCluster

        if cores and racks:
            typer.echo("--racks and --cores are exclusive: with --cores, each host is its brokers' rack", err=True)
            raise typer.Exit(2)
        if hosts * max(cores, 1) >= CONTROLLER_PORT_OFFSET:
            typer.echo(f"at most {CONTROLLER_PORT_OFFSET - 1} brokers: the controllers listen from +100", err=True)
            raise typer.Exit(2)
        settings = dict(item.split("=", 1) for item in set_ if "=" in item)
        if racks:
            settings.setdefault("replica.selector.class", RACK_AWARE_SELECTOR)
        quorum = controllers or (3 if hosts >= 3 else 1)
        lc = LocalCluster(
            data_dir,
            hosts * max(cores, 1),
            base_port,
            broker_settings=settings,
            controllers=quorum,
            racks=racks,
            cores=cores,
        )
        run_until_signal(lc, "epochlog cluster", "epochlog cluster is up")

    @app.command("elect-leaders")
    def elect_leaders(
        bootstrap_server: Annotated[str, typer.Option("--bootstrap-server")] = "127.0.0.1:9092",
        election_type: Annotated[str, typer.Option("--election-type", help="preferred or unclean")] = "preferred",
        topic: Annotated[str | None, typer.Option("--topic")] = None,
        partition: Annotated[int | None, typer.Option("--partition")] = None,
        all_topic_partitions: Annotated[bool, typer.Option("--all-topic-partitions")] = False,
    ) -> None:
        """Ask for preferred (or unclean) leader election, as kafka-leader-election.sh does."""
        from datetime import timedelta

        from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions
        from kio.schema.types import TopicName
        from kio.static.primitive import i8, i32, i32Timedelta

        from epochlog.client.wire import Connection, WireError
        from epochlog.protocol.errors import Err

        if election_type not in ("preferred", "unclean"):
            typer.echo("--election-type must be preferred or unclean", err=True)
            raise typer.Exit(2)
        if not all_topic_partitions and topic is None:
            typer.echo("give --topic [--partition] or --all-topic-partitions", err=True)
            raise typer.Exit(2)
        tps = None
        if topic is not None:
            parts = (partition,) if partition is not None else tuple(range(_partition_count(bootstrap_server, topic)))
            tps = (TopicPartitions(topic=TopicName(topic), partitions=tuple(i32(p) for p in parts)),)
        req = ElectLeadersRequest(
            election_type=i8(0 if election_type == "preferred" else 1),
            topic_partitions=tps,
            timeout=i32Timedelta.parse(timedelta(seconds=30)),
        )
        host, _, port = bootstrap_server.split(",")[0].rpartition(":")
        try:
            with Connection(host, int(port), client_id="epochlog-elect-leaders") as conn:
                resp = conn.request(req)
        except WireError as e:
            typer.echo(f"elect-leaders: {e}", err=True)
            raise typer.Exit(1) from None
        failed = 0
        for r in resp.replica_election_results:
            for p in r.partition_result:
                code = int(p.error_code)
                if code == 0:
                    typer.echo(f"{r.topic}-{p.partition_id}: elected")
                elif code == Err.ELECTION_NOT_NEEDED:
                    typer.echo(f"{r.topic}-{p.partition_id}: election not needed")
                else:
                    failed += 1
                    typer.echo(f"{r.topic}-{p.partition_id}: {Err(code).name}: {p.error_message}")
        raise typer.Exit(1 if failed else 0)


def _partition_count(bootstrap: str, topic: str) -> int:
    from epochlog.client.admin import admin_client, topic_partitions

    parts = topic_partitions(admin_client({"bootstrap.servers": bootstrap})).get(topic)
    if not parts:
        typer.echo(f"topic {topic!r} does not exist", err=True)
        raise typer.Exit(1)
    return len(parts)

"""`epochlog console`: serve the web console for a running cluster."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command("console")
    def console(
        bootstrap: Annotated[
            str, typer.Option("--bootstrap-server", "-b", help="host:port[,host:port...] of the cluster's brokers")
        ] = "127.0.0.1:9092",
        port: Annotated[int, typer.Option("--port", help="HTTP port to serve the console on")] = 8080,
        host: Annotated[
            str, typer.Option("--host", help="address to listen on; loopback by default, the console has no login")
        ] = "127.0.0.1",
        refresh: Annotated[float, typer.Option("--refresh", help="seconds between live updates")] = 1.0,
        bootstrap_controller: Annotated[
            str | None,
            typer.Option("--bootstrap-controller", help="host:port[,...] of the controllers, for the quorum's status"),
        ] = None,
        metrics_port: Annotated[
            int | None,
            typer.Option(
                "--metrics-port",
                help="every broker's metrics.port (on its advertised host): per-broker throughput, and each "
                "replica's leader-epoch lineage from epochlog brokers",
            ),
        ] = None,
        metrics_port_map: Annotated[
            str | None,
            typer.Option(
                "--metrics-port-map",
                help="ID=PORT or ID=HOST:PORT per broker, comma-separated, where brokers differ"
                " (overrides --metrics-port)",
            ),
        ] = None,
    ) -> None:
        """Serve a web console (cluster, topics, consumer groups, messages) for any Kafka-protocol cluster."""
        from epochlog.console.app import serve
        from epochlog.console.broker_metrics import MetricsEndpoints, parse_port_map

        try:
            endpoints = MetricsEndpoints(metrics_port, parse_port_map(metrics_port_map))
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--metrics-port-map") from None
        typer.echo(f"epochlog console for {bootstrap} on http://{host}:{port}/")
        serve(
            bootstrap, host=host, port=port, refresh=refresh, bootstrap_controllers=bootstrap_controller,
            endpoints=endpoints,
        )  # fmt: skip

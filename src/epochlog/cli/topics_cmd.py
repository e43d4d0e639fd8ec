"""`epochlog topics create|list|describe|delete`, through the Kafka admin API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

topics_app = typer.Typer(no_args_is_help=True, help="Manage topics on a running cluster")
Bootstrap = Annotated[str, typer.Option("--bootstrap-server", "-b", help="host:port of any broker")]
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _admin(bootstrap: str) -> AdminClient:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def _fail(msg: str) -> NoReturn:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(1)


@topics_app.command("create")
def create(
    name: str,
    partitions: Annotated[int, typer.Option("--partitions", "-p")] = 1,
    replication_factor: Annotated[int, typer.Option("--replication-factor", "-r")] = 1,
    config: Annotated[list[str], typer.Option("--config", help="topic config key=value")] = [],  # noqa: B006
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Create a topic."""
    # confluent_kafka.admin re-exports NewTopic without __all__ or an `as` alias, so its stubs do not export it.
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    configs = dict(c.split("=", 1) for c in config)
    admin = _admin(bootstrap)  # the client must outlive its futures
    fut = admin.create_topics([NewTopic(name, partitions, replication_factor, config=configs)])[name]
    try:
        fut.result(15)
    except Exception as e:
        _fail(f"cannot create {name}: {e}")
    typer.echo(f"created topic {name} with {partitions} partition(s)")


@topics_app.command("list")
def list_(bootstrap: Bootstrap = DEFAULT_BOOTSTRAP) -> None:
    """List topic names."""
    md = _admin(bootstrap).list_topics(timeout=10)
    for name in sorted(md.topics):
        typer.echo(name)


@topics_app.command("describe")
def describe(name: str, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP) -> None:
    """Show partitions, leaders, leader epochs and replicas of a topic."""
    admin = _admin(bootstrap)
    md = admin.list_topics(topic=name, timeout=10)
    t = md.topics.get(name)
    if t is None or t.error is not None:
        _fail(f"topic {name}: {t.error if t else 'not found'}")
    table = Table(title=f"{name}")
    for col in ("partition", "leader", "replicas", "isr"):
        table.add_column(col)
    for p in sorted(t.partitions.values(), key=lambda p: p.id):
        table.add_row(str(p.id), str(p.leader), ",".join(map(str, p.replicas)), ",".join(map(str, p.isrs)))
    Console().print(table)


@topics_app.command("delete")
def delete(name: str, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP) -> None:
    """Delete a topic."""
    admin = _admin(bootstrap)
    fut = admin.delete_topics([name])[name]
    try:
        fut.result(15)
    except Exception as e:
        _fail(f"cannot delete {name}: {e}")
    typer.echo(f"deleted topic {name}")


def register(app: typer.Typer) -> None:
    app.add_typer(topics_app, name="topics")

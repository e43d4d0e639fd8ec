"""`epochlog topics create|list|describe|delete`, through the Kafka admin API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

    from epochlog.client import topic_partitions as tp_rows

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
def describe(
    name: Annotated[str | None, typer.Argument(help="the topic (every topic when left out)")] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Show partitions, leaders, replicas, ISR and (KIP-966) ELR of a topic, as kafka-topics.sh --describe
    prints them. Through DescribeTopicPartitions (API 75) when the broker offers it, else Metadata."""
    from epochlog.client import topic_partitions as tp
    from epochlog.client.wire import WireError

    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    if not host or not port.isdigit():
        _fail(f"--bootstrap-server {bootstrap!r} is not host:port")
    try:
        rows = tp.describe(host, int(port), [name] if name else None)
    except WireError as e:
        _fail(f"cannot describe: {e}")
    admin = _admin(bootstrap)
    if rows is None:
        rows = _metadata_rows(admin, name)
    for row in rows:
        if row.error_code:
            _fail(f"topic {row.name}: error {row.error_code}")
        typer.echo(tp.topic_line(row, _set_configs(admin, row.name)))
        for p in row.partitions:
            typer.echo(tp.partition_line(row.name, p))


def _metadata_rows(admin: AdminClient, name: str | None) -> list[tp_rows.TopicRow]:
    """The describe rows from Metadata (a broker without API 75): no ELR to show."""
    from epochlog.client.topic_partitions import PartitionRow, TopicRow

    md = admin.list_topics(topic=name, timeout=10) if name else admin.list_topics(timeout=10)
    out = []
    for t in sorted(md.topics.values(), key=lambda t: str(t.topic)):
        if t.error is not None:
            _fail(f"topic {t.topic}: {t.error}")
        parts = [
            PartitionRow(p.id, p.leader, -1, list(p.replicas), list(p.isrs), None, None)
            for p in sorted(t.partitions.values(), key=lambda p: p.id)
        ]
        out.append(TopicRow(str(t.topic), "", 0, parts))
    return out


def _set_configs(admin: AdminClient, name: str) -> dict[str, str]:
    """The topic's configs that are not defaults (kafka-topics.sh prints only those); none if it cannot ask."""
    from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

    try:
        fut = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)])
        entries = next(iter(fut.values())).result(10)
    except Exception:
        return {}
    return {k: str(v.value) for k, v in entries.items() if not v.is_default and v.value is not None}


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

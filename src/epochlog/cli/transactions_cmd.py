"""`epochlog transactions list|describe|describe-producers|find-hanging|abort`, like kafka-transactions.sh:
the same subcommands, options and column names, so its runbooks apply."""

from __future__ import annotations

import time
from typing import Annotated

import typer

transactions_app = typer.Typer(
    no_args_is_help=True, help="Inspect transactions and abort hanging ones, like kafka-transactions.sh"
)
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
Bootstrap = Annotated[str, typer.Option("--bootstrap-server", "-b", help="host:port of any broker")]


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Columns padded to their widest cell, as Kafka's tools print them (whitespace-separated)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = [headers, *rows]
    return "\n".join(" ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(1)


def _run(bootstrap: str, work):  # type: ignore[no-untyped-def]
    """Run ``work(cluster)``, turning the broker's refusals into one line on stderr and exit status 1."""
    from epochlog.client.transactions import TxnAdminError, WireError, cluster

    try:
        with cluster(bootstrap) as c:
            return work(c)
    except TxnAdminError as e:
        _fail(str(e))
    except WireError as e:
        _fail(f"cannot reach {bootstrap}: {e}")


@transactions_app.command("list")
def list_(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    duration_filter: Annotated[
        int | None, typer.Option("--duration-filter", help="only transactions running longer than this (ms)")
    ] = None,
    state: Annotated[list[str], typer.Option("--state", help="only these states (repeat), e.g. Ongoing")] = [],  # noqa: B006
    producer_id: Annotated[list[int], typer.Option("--producer-id", help="only these producer ids (repeat)")] = [],  # noqa: B006
) -> None:
    """List the transactional ids of every coordinator."""
    from epochlog.client.transactions import list_transactions

    rows = _run(bootstrap, lambda c: list_transactions(c, state, producer_id, duration_filter))
    headers = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    typer.echo(table(headers, [[r.transactional_id, str(r.coordinator), str(r.producer_id), r.state] for r in rows]))


@transactions_app.command("describe")
def describe(
    transactional_id: Annotated[str, typer.Option("--transactional-id", help="transactional id")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Describe the state of a transactional id at its coordinator."""
    from epochlog.client.transactions import describe_transaction

    d = _run(bootstrap, lambda c: describe_transaction(c, transactional_id))
    started = str(d.start_ms) if d.start_ms >= 0 else "None"
    duration = str(int(time.time() * 1000) - d.start_ms) if d.start_ms >= 0 else "None"
    headers = [
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
        "TransactionTimeoutMs",
        "CurrentTransactionStartTimeMs",
        "TransactionDurationMs",
        "TopicPartitions",
    ]
    tps = ",".join(f"{t}-{p}" for t, p in sorted(d.partitions))
    row = [str(d.coordinator), transactional_id, str(d.producer_id), str(d.producer_epoch), d.state]
    typer.echo(table(headers, [[*row, str(d.timeout_ms), started, duration, tps]]))


@transactions_app.command("describe-producers")
def describe_producers(
    topic: Annotated[str, typer.Option("--topic", help="topic name")],
    partition: Annotated[int, typer.Option("--partition", help="partition number")],
    broker_id: Annotated[int | None, typer.Option("--broker-id", help="ask this replica, not the leader")] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Describe the active producers of a partition."""
    from epochlog.client.transactions import describe_producers as describe

    tp = (topic, partition)
    states = _run(bootstrap, lambda c: describe(c, [tp], broker_id)).get(tp, [])
    headers = [
        "ProducerId",
        "ProducerEpoch",
        "LatestCoordinatorEpoch",
        "LastSequence",
        "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]
    rows = [
        [
            str(s.producer_id),
            str(s.producer_epoch),
            str(s.coordinator_epoch),
            str(s.last_sequence),
            str(s.last_timestamp),
            str(s.txn_start_offset) if s.txn_start_offset >= 0 else "None",
        ]
        for s in states
    ]
    typer.echo(table(headers, rows))


@transactions_app.command("find-hanging")
def find_hanging(
    broker_id: Annotated[
        int | None, typer.Option("--broker-id", help="search the partitions this broker hosts")
    ] = None,
    topic: Annotated[str | None, typer.Option("--topic", help="limit the search to this topic")] = None,
    partition: Annotated[int | None, typer.Option("--partition", help="with --topic: only this partition")] = None,
    max_transaction_timeout: Annotated[
        int, typer.Option("--max-transaction-timeout", help="longest transaction timeout, in minutes")
    ] = 15,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Find open transactions on partitions that no coordinator will complete."""
    from epochlog.client.transactions import find_hanging as find

    if topic is None and broker_id is None:
        _fail("find-hanging needs --topic or --broker-id to limit the search")
    if partition is not None and topic is None:
        _fail("--partition needs --topic")
    now = int(time.time() * 1000)
    found = _run(bootstrap, lambda c: find(c, broker_id, topic, partition, max_transaction_timeout * 60_000, now))
    headers = [
        "Topic",
        "Partition",
        "ProducerId",
        "ProducerEpoch",
        "CoordinatorEpoch",
        "StartOffset",
        "LastTimestamp",
        "Duration(min)",
    ]
    rows = [
        [
            t.partition[0],
            str(t.partition[1]),
            str(t.producer.producer_id),
            str(t.producer.producer_epoch),
            str(t.producer.coordinator_epoch),
            str(t.producer.txn_start_offset),
            str(t.producer.last_timestamp),
            str((now - t.producer.last_timestamp) // 60_000),
        ]
        for t in found
    ]
    typer.echo(table(headers, rows))


@transactions_app.command("abort")
def abort(
    topic: Annotated[str, typer.Option("--topic", help="topic name")],
    partition: Annotated[int, typer.Option("--partition", help="partition number")],
    start_offset: Annotated[int, typer.Option("--start-offset", help="start offset of the transaction to abort")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Abort a hanging transaction: an ABORT marker for its producer on the partition's leader."""
    from epochlog.client.transactions import abort as do_abort

    spec = _run(bootstrap, lambda c: do_abort(c, (topic, partition), start_offset))
    typer.echo(
        f"Aborted the transaction of producer {spec.producer_id} (epoch {spec.producer_epoch}, coordinator epoch "
        f"{spec.coordinator_epoch}) starting at offset {start_offset} on {topic}-{partition}."
    )


def register(app: typer.Typer) -> None:
    app.add_typer(transactions_app, name="transactions")

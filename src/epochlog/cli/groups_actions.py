"""What `epochlog groups` and `epochlog share-groups` do alike, as kafka-consumer-groups.sh and
kafka-share-groups.sh do: the usage and error lines, which groups an action names, the --describe loop (a
table per group, or the notice that stands in for it) and the report of a --delete. Each command keeps
what differs: its options, its clients, and how a group's offsets are gathered."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NoReturn

import typer

if TYPE_CHECKING:
    from epochlog.client.groups import GroupDescription
    from epochlog.client.security import ClientSecurity

# The --describe --offsets rows of one group: how many, and the table.
OffsetsOf = Callable[["GroupDescription"], tuple[int, str]]


def usage(p: argparse.ArgumentParser, msg: str) -> NoReturn:
    p.error(msg)  # exits with status 2, as a usage error


def err(msg: str) -> None:
    typer.echo(f"Error: {msg}", err=True)


def group_ids(opts: argparse.Namespace, listed: Callable[[], Iterable[str]]) -> list[str]:
    """The groups an action is for: every listed one with --all-groups, else the --group ones in order."""
    return list(listed()) if opts.all_groups else list(dict.fromkeys(opts.group))


def describe(
    p: argparse.ArgumentParser,
    opts: argparse.Namespace,
    ids: list[str],
    describe_one: Callable[[str], GroupDescription],
    offsets: OffsetsOf,
) -> int:
    """--describe with --members, --state or --offsets (the default): one table per group, or the
    notice Kafka's tools print instead (no such group, no active members). 1 if a group could not be
    described."""
    from epochlog.cli import groups_format as fmt

    if sum(map(bool, (opts.members, opts.offsets, opts.state is not None))) > 1:
        usage(p, "--describe takes one of --members, --offsets and --state")
    failed = False
    for gid in sorted(ids):
        d = describe_one(gid)
        if opts.members:
            rows, text = len(d.members), fmt.members_table(d, opts.verbose)
        elif opts.state is not None:
            rows, text = 1, fmt.state_table(d, opts.verbose)
        else:
            rows, text = offsets(d)
        message, is_error, show = fmt.notice(d, rows if d.exists else None)
        if message:
            typer.echo("", err=True)
            if is_error:
                err(message)
                failed = True
            else:
                typer.echo(message, err=True)
        if show:
            typer.echo("")
            typer.echo(text)
    return 1 if failed else 0


def report_deletion(results: dict[str, str | None], kind: str) -> int:
    """The lines Kafka's tools print for a --delete (``kind``: "consumer group" or "share group"): 0 when
    every group was deleted."""
    ok = [g for g, e in results.items() if e is None]
    failed = {g: e for g, e in results.items() if e is not None}
    if not failed:
        typer.echo(f"Deletion of requested {kind}s ('{', '.join(ok)}') was successful.")
        return 0
    err(f"Deletion of some {kind}s failed:")
    label = "Group" if kind == "consumer group" else kind[:1].upper() + kind[1:]
    for g, e in failed.items():
        typer.echo(f"* {label} '{g}' could not be deleted due to: {e}", err=True)
    if ok:
        typer.echo(f"\nThese {kind}s were deleted successfully: '{', '.join(ok)}'")
    return 1


def named_partitions(
    topic_args: list[str], partitions_of: Callable[[list[str]], list[tuple[str, int]]]
) -> list[tuple[str, int]]:
    """The partitions ``--topic`` arguments name: ``topic`` for all of a topic's, ``topic:0,1`` for some.
    Raises groups_reset.ResetError on a malformed argument."""
    from epochlog.cli.groups_reset import parse_topic

    out: list[tuple[str, int]] = []
    for arg in topic_args:
        topic, parts = parse_topic(arg)
        out += partitions_of([topic]) if parts is None else [(topic, n) for n in parts]
    return out


def report_offsets_deletion(
    top: str | None, failed_rows: bool, success: str, messages: dict[str, str], table: str
) -> int:
    """The lines Kafka's tools print for --delete-offsets: ``success`` when neither the group (``top``) nor a
    row failed, else the group's error (from ``messages``) or the partition-level notice; then the table."""
    if top is None and not failed_rows:
        typer.echo(success)
    elif top is None:
        err("Encounter some partition level error, see the follow-up details:")
    else:
        err(messages.get(top) or f"Encounter some unknown error: {top}")
    typer.echo("")
    typer.echo(table)
    return 0 if top is None and not failed_rows else 1


def add_command_config(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties (security.protocol, sasl.*, ssl.*) for the connections, as Kafka's tools take",
    )


def security(p: argparse.ArgumentParser, opts: argparse.Namespace) -> ClientSecurity | None:
    """The --command-config file's settings (None without one); a bad file is a usage error naming it."""
    from epochlog.client.security import load_command_config

    if opts.command_config is None:
        return None
    try:
        return load_command_config(opts.command_config)
    except (OSError, ValueError) as e:
        usage(p, f"--command-config {opts.command_config}: {e}")

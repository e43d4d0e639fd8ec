"""`epochlog share-groups`, like kafka-share-groups.sh (KIP-932): one action among --list, --describe,
--delete, --reset-offsets and --delete-offsets. The layouts and the reset planning are `epochlog groups`'s
(cli/groups_format.py, cli/groups_reset.py): a share group's start offsets take the place of a consumer
group's committed offsets. Changing offsets needs a group with no active members, as Kafka's tool says."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import typer

from epochlog.cli import groups_actions as actions

if TYPE_CHECKING:
    from epochlog.client.groups import GroupDescription
    from epochlog.client.share_groups import ShareGroupsClient

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
SCENARIOS = ("to-earliest", "to-latest", "to-datetime")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="epochlog share-groups",
        description="List, describe, delete share groups, reset or delete their offsets, like kafka-share-groups.sh.",
    )
    p.add_argument("--bootstrap-server", "-b", default=DEFAULT_BOOTSTRAP, help="host:port of any broker")
    a = p.add_argument_group("actions (exactly one)")
    a.add_argument("--list", action="store_true", help="list all share groups")
    a.add_argument("--describe", action="store_true", help="describe share groups: offsets (default), members, state")
    a.add_argument("--delete", action="store_true", help="delete share groups (only groups with no members)")
    a.add_argument("--reset-offsets", action="store_true", help="reset the start offsets of an inactive share group")
    a.add_argument("--delete-offsets", action="store_true", help="delete a share group's offsets of topics")
    p.add_argument("--group", action="append", default=[], help="a share group (repeat for several)")
    p.add_argument("--all-groups", action="store_true", help="with --describe or --delete: every share group")
    p.add_argument("--topic", action="append", default=[], help="a topic, or topic:0,1 for some partitions")
    p.add_argument("--all-topics", action="store_true", help="with --reset-offsets: every partition with an offset")
    p.add_argument("--state", nargs="?", const="", help="with --list: show states; with --describe: the group state")
    p.add_argument("--members", action="store_true", help="with --describe: the members")
    p.add_argument("--offsets", action="store_true", help="with --describe: partitions and start offsets (default)")
    p.add_argument("--verbose", action="store_true", help="with --members or --state: assignments and epochs")
    p.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")
    p.add_argument("--execute", action="store_true", help="set the new offsets")
    p.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss")
    p.add_argument("--to-earliest", action="store_true")
    p.add_argument("--to-latest", action="store_true")
    p.add_argument("--timeout", type=int, default=10_000, help="ms to wait for the cluster (default 10000)")
    actions.add_command_config(p)
    return p



def run(argv: list[str]) -> int:
    """The command's work; its exit status (0, or 1 when something was refused or failed)."""
    from epochlog.client.groups import GroupsClient, GroupsError
    from epochlog.client.share_groups import ShareGroupsClient

    p = parser()
    opts = p.parse_args(argv)
    chosen = [a for a in ACTIONS if getattr(opts, a)]
    if len(chosen) != 1:
        actions.usage(
            p,
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets",
        )
    action = chosen[0]
    if (opts.members or opts.offsets) and action != "describe":
        actions.usage(p, "--members and --offsets can only be used with --describe")
    if action in ("describe", "delete") and not opts.group and not opts.all_groups:
        actions.usage(p, f"--{action} needs --group or --all-groups")
    if action in ("reset_offsets", "delete_offsets") and len(opts.group) != 1:
        actions.usage(p, f"--{action.replace('_', '-')} takes one --group: it supports one share group at a time")
    with GroupsClient(opts.bootstrap_server, opts.timeout / 1000, security=actions.security(p, opts)) as groups:
        client = ShareGroupsClient(groups)
        try:
            return {
                "list": _list,
                "describe": _describe,
                "delete": _delete,
                "reset_offsets": _reset,
                "delete_offsets": _delete_offsets,
            }[action](p, opts, client)
        except GroupsError as e:
            actions.err(f"Executing share group command failed due to {e}")
            return 1


def _group_ids(opts: argparse.Namespace, client: ShareGroupsClient) -> list[str]:
    return actions.group_ids(opts, lambda: (g.group_id for g in client.list_groups()))


def _list(p: argparse.ArgumentParser, opts: argparse.Namespace, client: ShareGroupsClient) -> int:
    from epochlog.cli.groups_format import list_output

    wanted = {s.strip().lower() for s in (opts.state or "").split(",") if s.strip()}
    groups = [g for g in client.list_groups() if not wanted or g.state.lower() in wanted]
    out = list_output(groups, False, opts.state is not None)
    if out:
        typer.echo(out)
    return 0


def _describe(p: argparse.ArgumentParser, opts: argparse.Namespace, client: ShareGroupsClient) -> int:
    return actions.describe(p, opts, _group_ids(opts, client), client.describe, lambda d: _offsets(client, d))


def _offsets(client: ShareGroupsClient, d: GroupDescription) -> tuple[int, str]:
    """The share-partitions with a start offset, and those a member is assigned that have none yet."""
    from epochlog.cli.groups_format import share_offsets_table

    if not d.exists:
        return 0, ""
    rows: dict[tuple[str, int], tuple[int | None, int | None, int | None]] = {
        tp: (None, None, None) for m in d.members for tp in m.assignment
    }
    for tp, s in client.start_offsets(d.group_id).items():
        rows[tp] = (s.leader_epoch, s.start_offset, s.lag)
    return len(rows), share_offsets_table(d.group_id, rows)


def _delete(p: argparse.ArgumentParser, opts: argparse.Namespace, client: ShareGroupsClient) -> int:
    ids = _group_ids(opts, client)
    if not ids:
        return 0
    results = client.groups.delete_groups(ids)
    return actions.report_deletion(results, "share group")


def _reset(p: argparse.ArgumentParser, opts: argparse.Namespace, client: ShareGroupsClient) -> int:
    from epochlog.cli.groups_format import reset_table
    from epochlog.cli.groups_reset import ResetError, Scenario, plan

    if opts.dry_run and opts.execute:
        actions.usage(p, "--reset-offsets only accepts one of --execute and --dry-run")
    if bool(opts.topic) == bool(opts.all_topics):
        actions.usage(p, "One of the reset scopes should be defined: --all-topics, --topic.")
    chosen = [s for s in SCENARIOS if getattr(opts, s.replace("-", "_")) not in (None, False)]
    if len(chosen) != 1:
        actions.usage(p, f"--reset-offsets needs exactly one of: {', '.join('--' + s for s in SCENARIOS)}")
    scenario = Scenario(chosen[0], opts.to_datetime if chosen[0] == "to-datetime" else None)
    if not opts.dry_run and not opts.execute:
        typer.echo(
            "WARN: No action will be performed as the --execute option is missing. "
            "Add --dry-run to keep this behaviour without the warning.",
            err=True,
        )
    gid = opts.group[0]
    d = client.describe(gid)
    if not d.exists:
        actions.err(f"Share group '{gid}' does not exist.")
        return 1
    if d.members:
        actions.err(f"Share group '{gid}' is not empty.")
        return 1
    current = {tp: s.start_offset for tp, s in client.start_offsets(gid).items() if s.start_offset >= 0}
    try:
        if opts.all_topics:
            partitions = list(current)
        else:
            partitions = actions.named_partitions(opts.topic, client.groups.partitions)
        new = plan(client.groups, partitions, scenario, current)
    except ResetError as e:
        actions.usage(p, str(e))
    if opts.execute and new:
        client.alter_offsets(gid, new)
    if new:
        typer.echo("")
        typer.echo(reset_table({gid: new}))
    return 0


def _delete_offsets(p: argparse.ArgumentParser, opts: argparse.Namespace, client: ShareGroupsClient) -> int:
    from epochlog.cli.groups_format import delete_share_offsets_table

    if not opts.topic:
        actions.usage(p, "--delete-offsets takes one --group and at least one --topic")
    gid = opts.group[0]
    topics = [t.partition(":")[0] for t in opts.topic]
    top, rows = client.delete_offsets(gid, topics)
    messages = {
        "GROUP_ID_NOT_FOUND": f"Share group '{gid}' does not exist.",
        "GROUP_AUTHORIZATION_FAILED": f"Access to '{gid}' is not authorized.",
        "NON_EMPTY_GROUP": f"Deleting offsets of a share group '{gid}' is forbidden if the group is not empty.",
    }
    return actions.report_offsets_deletion(
        top,
        any(rows.values()),
        f"Request succeed for deleting offsets from group {gid}.",
        messages,
        delete_share_offsets_table(rows or dict.fromkeys(topics, top)),
    )


def register(app: typer.Typer) -> None:
    @app.command(
        "share-groups",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
        add_help_option=False,
    )
    def share_groups(ctx: typer.Context) -> None:
        """Share groups (KIP-932), like kafka-share-groups.sh: --list, --describe, --delete, --reset-offsets,
        --delete-offsets (see epochlog share-groups --help)."""
        raise typer.Exit(run(list(ctx.args)))

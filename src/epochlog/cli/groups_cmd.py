"""`epochlog groups`, like kafka-consumer-groups.sh: one action among --list, --describe, --delete,
--reset-offsets and --delete-offsets, with its options, columns and messages, so its runbooks apply. Each
group is shown with its type (classic, or consumer for a KIP-848 group, which is described through
ConsumerGroupDescribe). Kafka's tool parses its options with joptsimple, where --state takes an optional
value (--list --state, --list --state Stable, --describe --state); argparse does the same here."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import typer

from epochlog.cli import groups_actions as actions

if TYPE_CHECKING:
    from epochlog.cli.groups_reset import Scenario
    from epochlog.client.groups import GroupDescription, GroupsClient

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
_INACTIVE = ("Empty", "Dead")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="epochlog groups",
        description="List, describe, delete consumer groups and reset or delete their offsets, "
        "like kafka-consumer-groups.sh.",
    )
    p.add_argument("--bootstrap-server", "-b", default=DEFAULT_BOOTSTRAP, help="host:port of any broker")
    a = p.add_argument_group("actions (exactly one)")
    a.add_argument("--list", action="store_true", help="list the groups")
    a.add_argument("--describe", action="store_true", help="describe groups: offsets and lag (default), members, state")
    a.add_argument("--delete", action="store_true", help="delete groups (only groups with no members)")
    a.add_argument("--reset-offsets", action="store_true", help="reset committed offsets of inactive groups")
    a.add_argument("--delete-offsets", action="store_true", help="delete a group's committed offsets of topics")
    p.add_argument("--group", action="append", default=[], help="a group (repeat for several)")
    p.add_argument("--all-groups", action="store_true", help="every group")
    p.add_argument("--topic", action="append", default=[], help="a topic, or topic:0,1 for some partitions")
    p.add_argument("--all-topics", action="store_true", help="with --reset-offsets: every partition with an offset")
    p.add_argument("--type", nargs="?", const="", help="with --list: show types, or list only these (classic,consumer)")
    p.add_argument(
        "--state",
        nargs="?",
        const="",
        help="with --list: show states or list only these; with --describe: the group state",
    )
    p.add_argument("--members", action="store_true", help="with --describe: the members")
    p.add_argument("--offsets", action="store_true", help="with --describe: partitions, offsets and lag (the default)")
    p.add_argument("--verbose", action="store_true", help="with --members or --state: assignments and epochs")
    p.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.add_argument("--export", action="store_true", help="print the new offsets as CSV")
    for name, meta in (("to-offset", "N"), ("shift-by", "N"), ("to-datetime", "YYYY-MM-DDTHH:mm:SS.sss"),
                       ("by-duration", "PnDTnHnMnS")):  # fmt: skip
        p.add_argument(f"--{name}", metavar=meta)
    for name in ("to-earliest", "to-latest", "to-current"):
        p.add_argument(f"--{name}", action="store_true")
    p.add_argument("--timeout", type=int, default=10_000, help="ms to wait for the cluster (default 10000)")
    actions.add_command_config(p)
    return p



def run(argv: list[str]) -> int:
    """The command's work; its exit status (0, or 1 when something was refused or failed)."""
    from epochlog.client.groups import GroupsClient, GroupsError

    p = parser()
    opts = p.parse_args(argv)
    chosen = [a for a in ACTIONS if getattr(opts, a)]
    if len(chosen) != 1:
        actions.usage(
            p,
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets",
        )
    action = chosen[0]
    if opts.type is not None and action != "list":
        actions.usage(p, "--type can only be used with --list")
    if (opts.members or opts.offsets) and action != "describe":
        actions.usage(p, "--members and --offsets can only be used with --describe")
    if action in ("describe", "delete", "reset_offsets") and not opts.group and not opts.all_groups:
        actions.usage(p, f"--{action.replace('_', '-')} needs --group or --all-groups")
    with GroupsClient(opts.bootstrap_server, opts.timeout / 1000, security=actions.security(p, opts)) as client:
        try:
            return {
                "list": _list,
                "describe": _describe,
                "delete": _delete,
                "reset_offsets": _reset,
                "delete_offsets": _delete_offsets,
            }[action](p, opts, client)
        except GroupsError as e:
            actions.err(f"Executing consumer group command failed due to {e}")
            return 1


def _group_ids(opts: argparse.Namespace, client: GroupsClient) -> list[str]:
    return actions.group_ids(opts, lambda: (g.group_id for g in client.list_groups()))


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _list(p: argparse.ArgumentParser, opts: argparse.Namespace, client: GroupsClient) -> int:
    from epochlog.cli.groups_format import list_output
    from epochlog.client.groups import GROUP_TYPES, STATES

    types, states = _split(opts.type), _split(opts.state)
    if bad := [t for t in types if t.lower() not in GROUP_TYPES]:
        actions.usage(p, f"Invalid types list '{','.join(bad)}'. Valid types are: {', '.join(GROUP_TYPES)}")
    if bad := [s for s in states if s.lower() not in {x.lower() for x in STATES}]:
        actions.usage(p, f"Invalid state list '{','.join(bad)}'. Valid states are: {', '.join(STATES)}")
    groups = client.list_groups(types, states)
    out = list_output(groups, opts.type is not None, opts.state is not None)
    if out:
        typer.echo(out)
    return 0


def _describe(p: argparse.ArgumentParser, opts: argparse.Namespace, client: GroupsClient) -> int:
    types: dict[str, str] = {}

    def one(gid: str) -> GroupDescription:
        if not types:  # listed once, after the options were checked: a KIP-848 group is described its own way
            types.update({g.group_id: g.type for g in client.list_groups()})
        return client.describe(gid, types.get(gid, ""))

    return actions.describe(p, opts, _group_ids(opts, client), one, lambda d: _offsets(client, d))


def _offsets(client: GroupsClient, d: GroupDescription) -> tuple[int, str]:
    """The --describe --offsets rows of a group: how many, and the table."""
    from epochlog.cli import groups_format as fmt

    if not d.exists:
        return 0, ""
    committed = client.committed(d.group_id)
    owned = {tp for m in d.members for tp in m.assignment}
    ends = client.log_offsets(set(committed) | owned, "latest")
    rows = fmt.offset_rows(d, committed, ends)
    return len(rows), fmt.offsets_table(rows)


def _delete(p: argparse.ArgumentParser, opts: argparse.Namespace, client: GroupsClient) -> int:
    ids = _group_ids(opts, client)
    if not ids:
        return 0
    results = client.delete_groups(ids)
    return actions.report_deletion(results, "consumer group")


def _scenario(p: argparse.ArgumentParser, opts: argparse.Namespace) -> Scenario:
    from epochlog.cli.groups_reset import SCENARIOS, Scenario

    chosen = [s for s in SCENARIOS if getattr(opts, s.replace("-", "_")) not in (None, False)]
    if len(chosen) != 1:
        actions.usage(p, f"--reset-offsets needs exactly one of: {', '.join('--' + s for s in SCENARIOS)}")
    value = getattr(opts, chosen[0].replace("-", "_"))
    return Scenario(chosen[0], value if isinstance(value, str) else None)


def _reset(p: argparse.ArgumentParser, opts: argparse.Namespace, client: GroupsClient) -> int:
    from epochlog.cli.groups_format import reset_table
    from epochlog.cli.groups_reset import ResetError, plan

    if opts.dry_run and opts.execute:
        actions.usage(p, "--reset-offsets only accepts one of --execute and --dry-run")
    if bool(opts.topic) == bool(opts.all_topics):
        actions.usage(p, "One of the reset scopes should be defined: --all-topics, --topic.")
    scenario = _scenario(p, opts)
    if not opts.dry_run and not opts.execute:
        typer.echo(
            "WARN: No action will be performed as the --execute option is missing. "
            "Add --dry-run to keep this behaviour without the warning.",
            err=True,
        )
    failed = False
    plans: dict[str, dict[tuple[str, int], int]] = {}
    for gid in _group_ids(opts, client):
        d = client.describe(gid)
        if d.state not in _INACTIVE:
            actions.err(
                f"Assignments can only be reset if the group '{gid}' is inactive, but the current state is {d.state}."
            )
            failed = True
            continue
        committed = client.committed(gid)
        try:
            partitions = list(committed) if opts.all_topics else actions.named_partitions(opts.topic, client.partitions)
            new = plan(client, partitions, scenario, committed)
        except ResetError as e:
            actions.usage(p, str(e))
        if opts.execute and new:
            client.alter_offsets(gid, new)
        plans[gid] = new
    if opts.export:
        single = len(plans) == 1 and not opts.all_groups
        for gid, new in plans.items():
            for (t, n), o in sorted(new.items()):
                typer.echo(f"{t},{n},{o}" if single else f"{gid},{t},{n},{o}")
    elif any(plans.values()):
        typer.echo("")
        typer.echo(reset_table(plans))
    return 1 if failed else 0


def _delete_offsets(p: argparse.ArgumentParser, opts: argparse.Namespace, client: GroupsClient) -> int:
    from epochlog.cli.groups_format import delete_offsets_table
    from epochlog.cli.groups_reset import ResetError

    if len(opts.group) != 1 or not opts.topic:
        actions.usage(p, "--delete-offsets takes one --group and at least one --topic")
    gid = opts.group[0]
    try:
        partitions = actions.named_partitions(opts.topic, client.partitions)
    except ResetError as e:
        actions.usage(p, str(e))
    top, rows = client.delete_offsets(gid, partitions)
    messages = {
        "INVALID_GROUP_ID": f"'{gid}' is not valid.",
        "GROUP_ID_NOT_FOUND": f"'{gid}' does not exist.",
        "GROUP_AUTHORIZATION_FAILED": f"Access to '{gid}' is not authorized.",
        "NON_EMPTY_GROUP": f"Deleting offsets of a consumer group '{gid}' is forbidden if the group is not empty.",
    }
    return actions.report_offsets_deletion(
        top,
        any(rows.values()),
        f"Request succeed for deleting offsets with topic {', '.join(opts.topic)} group {gid}",
        messages,
        delete_offsets_table(rows or dict.fromkeys(partitions, top)),
    )


def register(app: typer.Typer) -> None:
    @app.command(
        "groups",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
        add_help_option=False,
    )
    def groups(ctx: typer.Context) -> None:
        """Consumer groups, like kafka-consumer-groups.sh: --list, --describe, --delete, --reset-offsets,
        --delete-offsets (see epochlog groups --help)."""
        raise typer.Exit(run(list(ctx.args)))

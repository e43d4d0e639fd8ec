"""`epochlog groups`, like kafka-consumer-groups.sh: one action among --list, --describe, --delete,
--reset-offsets and --delete-offsets, with its options, columns and messages, so its runbooks apply. Each
group is shown with its type (classic, or consumer for a KIP-848 group, which is described through
ConsumerGroupDescribe). Kafka's tool parses its options with joptsimple, where --state takes an optional
value (--list --state, --list --state Stable, --describe --state); argparse does the same here."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, NoReturn

import typer

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
    return p


def _usage(p: argparse.ArgumentParser, msg: str) -> NoReturn:
    p.error(msg)  # exits with status 2, as a usage error


def _err(msg: str) -> None:
    typer.echo(f"Error: {msg}", err=True)


def run(argv: list[str]) -> int:
    """The command's work; its exit status (0, or 1 when something was refused or failed)."""
    from epochlog.client.groups import GroupsClient, GroupsError

    p = parser()
    opts = p.parse_args(argv)
    chosen = [a for a in ACTIONS if getattr(opts, a)]
    if len(chosen) != 1:
        _usage(
            p,
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets",
        )
    action = chosen[0]
    if opts.type is not None and action != "list":
        _usage(p, "--type can only be used with --list")
    if (opts.members or opts.offsets) and action != "describe":
        _usage(p, "--members and --offsets can only be used with --describe")
    if action in ("describe", "delete", "reset_offsets") and not opts.group and not opts.all_groups:
        _usage(p, f"--{action.replace('_', '-')} needs --group or --all-groups")
    with GroupsClient(opts.bootstrap_server, opts.timeout / 1000) as client:
        try:
            return {
                "list": _list,
                "describe": _describe,
                "delete": _delete,
                "reset_offsets": _reset,
                "delete_offsets": _delete_offsets,
            }[action](p, opts, client)
        except GroupsError as e:
            _err(f"Executing consumer group command failed due to {e}")
            return 1


def _group_ids(opts: argparse.Namespace, client: GroupsClient) -> list[str]:
    return [g.group_id for g in client.list_groups()] if opts.all_groups else list(dict.fromkeys(opts.group))


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _list(p: argparse.ArgumentParser, opts: argparse.Namespace, client: GroupsClient) -> int:
    from epochlog.cli.groups_format import list_output
    from epochlog.client.groups import GROUP_TYPES, STATES

    types, states = _split(opts.type), _split(opts.state)
    if bad := [t for t in types if t.lower() not in GROUP_TYPES]:
        _usage(p, f"Invalid types list '{','.join(bad)}'. Valid types are: {', '.join(GROUP_TYPES)}")
    if bad := [s for s in states if s.lower() not in {x.lower() for x in STATES}]:
        _usage(p, f"Invalid state list '{','.join(bad)}'. Valid states are: {', '.join(STATES)}")
    groups = client.list_groups(types, states)
    out = list_output(groups, opts.type is not None, opts.state is not None)
    if out:
        typer.echo(out)
    return 0


def _describe(p: argparse.ArgumentParser, opts: argparse.Namespace, client: GroupsClient) -> int:
    from epochlog.cli import groups_format as fmt

    if sum(map(bool, (opts.members, opts.offsets, opts.state is not None))) > 1:
        _usage(p, "--describe takes one of --members, --offsets and --state")
    failed = False
    types = {g.group_id: g.type for g in client.list_groups()}
    for gid in sorted(_group_ids(opts, client)):
        d = client.describe(gid, types.get(gid, ""))
        if opts.members:
            rows, text = len(d.members), fmt.members_table(d, opts.verbose)
        elif opts.state is not None:
            rows, text = 1, fmt.state_table(d, opts.verbose)
        else:
            rows, text = _offsets(client, d)
        message, is_error, show = fmt.notice(d, rows if d.exists else None)
        if message:
            typer.echo("", err=True)
            if is_error:
                _err(message)
                failed = True
            else:
                typer.echo(message, err=True)
        if show:
            typer.echo("")
            typer.echo(text)
    return 1 if failed else 0


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
    ok = [g for g, e in results.items() if e is None]
    failed = {g: e for g, e in results.items() if e is not None}
    if not failed:
        typer.echo(f"Deletion of requested consumer groups ('{', '.join(ok)}') was successful.")
        return 0
    _err("Deletion of some consumer groups failed:")
    for g, e in failed.items():
        typer.echo(f"* Group '{g}' could not be deleted due to: {e}", err=True)
    if ok:
        typer.echo(f"\nThese consumer groups were deleted successfully: '{', '.join(ok)}'")
    return 1


def _scenario(p: argparse.ArgumentParser, opts: argparse.Namespace) -> Scenario:
    from epochlog.cli.groups_reset import SCENARIOS, Scenario

    chosen = [s for s in SCENARIOS if getattr(opts, s.replace("-", "_")) not in (None, False)]
    if len(chosen) != 1:
        _usage(p, f"--reset-offsets needs exactly one of: {', '.join('--' + s for s in SCENARIOS)}")
    value = getattr(opts, chosen[0].replace("-", "_"))
    return Scenario(chosen[0], value if isinstance(value, str) else None)


def _reset(p: argparse.ArgumentParser, opts: argparse.Namespace, client: GroupsClient) -> int:
    from epochlog.cli.groups_format import reset_table
    from epochlog.cli.groups_reset import ResetError, parse_topic, plan

    if opts.dry_run and opts.execute:
        _usage(p, "--reset-offsets only accepts one of --execute and --dry-run")
    if bool(opts.topic) == bool(opts.all_topics):
        _usage(p, "One of the reset scopes should be defined: --all-topics, --topic.")
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
            _err(f"Assignments can only be reset if the group '{gid}' is inactive, but the current state is {d.state}.")
            failed = True
            continue
        committed = client.committed(gid)
        try:
            if opts.all_topics:
                partitions = list(committed)
            else:
                partitions = []
                for arg in opts.topic:
                    topic, parts = parse_topic(arg)
                    partitions += client.partitions([topic]) if parts is None else [(topic, n) for n in parts]
            new = plan(client, partitions, scenario, committed)
        except ResetError as e:
            _usage(p, str(e))
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
    from epochlog.cli.groups_reset import ResetError, parse_topic

    if len(opts.group) != 1 or not opts.topic:
        _usage(p, "--delete-offsets takes one --group and at least one --topic")
    gid = opts.group[0]
    partitions: list[tuple[str, int]] = []
    try:
        for arg in opts.topic:
            topic, parts = parse_topic(arg)
            partitions += client.partitions([topic]) if parts is None else [(topic, n) for n in parts]
    except ResetError as e:
        _usage(p, str(e))
    top, rows = client.delete_offsets(gid, partitions)
    messages = {
        None: None,
        "INVALID_GROUP_ID": f"'{gid}' is not valid.",
        "GROUP_ID_NOT_FOUND": f"'{gid}' does not exist.",
        "GROUP_AUTHORIZATION_FAILED": f"Access to '{gid}' is not authorized.",
        "NON_EMPTY_GROUP": f"Deleting offsets of a consumer group '{gid}' is forbidden if the group is not empty.",
    }
    if top is None and not any(rows.values()):
        typer.echo(f"Request succeed for deleting offsets with topic {', '.join(opts.topic)} group {gid}")
    elif top is None:
        _err("Encounter some partition level error, see the follow-up details:")
    else:
        _err(messages.get(top) or f"Encounter some unknown error: {top}")
    typer.echo("")
    typer.echo(delete_offsets_table(rows or dict.fromkeys(partitions, top)))
    return 0 if top is None and not any(rows.values()) else 1


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

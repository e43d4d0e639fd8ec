"""`epochlog configs`: describe and alter dynamic configs of topics, brokers, the cluster-wide broker
default and groups (share.auto.offset.reset, ...), and client quotas of users and client ids
(cli/quotas_cmd.py), with kafka-configs.sh's options."""

from __future__ import annotations

from typing import Annotated

import typer

from epochlog.cli.quotas_cmd import QUOTA_TYPES
from epochlog.codes import Err
from epochlog.config_defs import (
    DYNAMIC_BROKER_CONFIGS,
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    TOPIC_CONFIGS,
    group_value_problem,
    validate_value,
)

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
ENTITY_TYPES = {"topics": RESOURCE_TOPIC, "brokers": RESOURCE_BROKER, "groups": RESOURCE_GROUP}


def split_outside_brackets(text: str) -> list[str]:
    """The comma-separated parts of ``text``, commas inside [...] kept (kafka-configs.sh's list values)."""
    depth, start = 0, 0
    parts = []
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def split_configs(text: str) -> dict[str, str]:
    """k=v[,k=v]; a list value goes in brackets as in kafka-configs.sh: cleanup.policy=[compact,delete]."""
    out: dict[str, str] = {}
    for part in split_outside_brackets(text):
        if "=" not in part:
            raise ValueError(f"{part!r} is not key=value")
        k, v = part.split("=", 1)
        v = v.strip()
        if v.startswith("[") and v.endswith("]"):
            v = v[1:-1]
        out[k.strip()] = v
    return out


def refused(resource_type: int, to_set: dict[str, str]) -> str | None:
    """Why the controller would refuse these values, checked here with the same table before anything is
    sent; None if they pass. A broker config the table does not list (read-only, or unknown) is the
    broker's to refuse. The codes are the controller's: a bad broker value is INVALID_REQUEST (KAFKA-13609)."""
    for name, value in to_set.items():
        if resource_type == RESOURCE_GROUP:
            # The bounds the broker's group.share.min/max.* settings put are the controller's to check.
            problem = group_value_problem(name, value)
            if problem:
                return f"{Err.INVALID_CONFIG.name}: {problem}"
            continue
        if resource_type == RESOURCE_TOPIC:
            d = TOPIC_CONFIGS.get(name)
            if d is None:
                return f"{Err.INVALID_CONFIG.name}: Unknown topic config name: {name}"
            code = Err.INVALID_CONFIG
        else:
            d = DYNAMIC_BROKER_CONFIGS.get(name)
            if d is None:
                continue
            code = Err.INVALID_REQUEST
        problem = validate_value(d, value, name)
        if problem:
            return f"{code.name}: {problem}"
    return None


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(1)


def configs(
    entity_types: Annotated[
        list[str],
        typer.Option("--entity-type", help="topics, brokers, groups, users or clients (users and clients together)"),
    ],
    entity_names: Annotated[
        list[str], typer.Option("--entity-name", help="topic name, broker id, group id, user or client id")
    ] = [],  # noqa: B006
    entity_defaults: Annotated[
        int, typer.Option("--entity-default", count=True, help="the default broker, user or client")
    ] = 0,
    alter: Annotated[bool, typer.Option("--alter", help="change configs")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="show dynamic configs and their synonyms")] = False,
    all_: Annotated[bool, typer.Option("--all", help="with --describe: every config, not only dynamic ones")] = False,
    add_config: Annotated[str, typer.Option("--add-config", help="k=v[,k=v]; lists as k=[a,b]")] = "",
    delete_config: Annotated[
        list[str], typer.Option("--delete-config", help="config name(s) to remove (repeat or k1,k2)")
    ] = [],  # noqa: B006
    bootstrap: Annotated[str, typer.Option("--bootstrap-server", "-b", help="host:port of any broker")] = (
        DEFAULT_BOOTSTRAP
    ),
) -> None:
    """Describe or alter dynamic configs, like kafka-configs.sh."""
    from epochlog.client.configs import ConfigsError, WireError
    from epochlog.client.configs import alter as alter_configs
    from epochlog.client.configs import describe as describe_configs

    if alter == describe:
        _fail("exactly one of --alter or --describe")
    if set(entity_types) <= set(QUOTA_TYPES) and entity_types:
        _quotas(bootstrap, entity_types, entity_names, entity_defaults, alter, add_config, delete_config)
        return
    if len(entity_types) != 1 or len(entity_names) > 1 or entity_defaults > 1:
        _fail("one --entity-type and one --entity-name or --entity-default (only users and clients combine)")
    entity_type = entity_types[0]
    entity_name = entity_names[0] if entity_names else None
    entity_default = entity_defaults > 0
    rtype = ENTITY_TYPES.get(entity_type)
    if rtype is None:
        _fail(f"--entity-type must be one of {', '.join([*ENTITY_TYPES, *QUOTA_TYPES])}")
    if entity_default and (entity_name is not None or entity_type != "brokers"):
        _fail("--entity-default names the cluster-wide broker default: use it with --entity-type brokers only")
    if not entity_default and entity_name is None:
        _fail("--entity-name or --entity-default is required")
    name = "" if entity_default else str(entity_name)
    shown = "default broker" if entity_default else f"{entity_type[:-1]} {name}"
    try:
        if alter:
            try:
                to_set = split_configs(add_config)
            except ValueError as e:
                _fail(str(e))
            to_delete = [k.strip() for item in delete_config for k in item.split(",") if k.strip()]
            if not to_set and not to_delete:
                _fail("--alter needs --add-config or --delete-config")
            problem = refused(rtype or 0, to_set)
            if problem:
                _fail(problem)
            alter_configs(bootstrap, rtype or 0, name, to_set, to_delete)
            typer.echo(f"Completed updating config for {shown}.")
            return
        rows = describe_configs(bootstrap, rtype or 0, name)
    except ConfigsError as e:
        _fail(str(e))
    except WireError as e:
        _fail(f"cannot reach {bootstrap}: {e}")
    dynamic = [r for r in rows if r.source.startswith("DYNAMIC")]
    typer.echo(f"Dynamic configs for {shown} are:")
    for r in dynamic:
        syn = ", ".join(f"{s}:{n}={v}" for n, v, s in r.synonyms)
        typer.echo(f"  {r.name}={r.value} sensitive=false synonyms={{{syn}}}")
    others = [r for r in rows if not r.source.startswith("DYNAMIC")]
    if others and all_:
        typer.echo(f"All other configs for {shown} are:")
        for r in others:
            flag = " (read-only)" if r.read_only else ""
            typer.echo(f"  {r.name}={r.value} ({r.source}){flag}")


def _quotas(
    bootstrap: str, types: list[str], names: list[str], defaults: int, alter: bool, add: str, delete: list[str]
) -> None:
    from epochlog.cli.quotas_cmd import Usage, alter_quotas, describe_lines, pair
    from epochlog.client.configs import ConfigsError, WireError

    try:
        paired = pair(types, names, defaults)
        if alter:
            to_set = split_configs(add)
            to_delete = [k.strip() for item in delete for k in item.split(",") if k.strip()]
            if not to_set and not to_delete:
                _fail("--alter needs --add-config or --delete-config")
            typer.echo(alter_quotas(bootstrap, types, paired, to_set, to_delete))
        else:
            for line in describe_lines(bootstrap, paired):
                typer.echo(line)
    except (Usage, ValueError, ConfigsError) as e:
        _fail(str(e))
    except WireError as e:
        _fail(f"cannot reach {bootstrap}: {e}")


def register(app: typer.Typer) -> None:
    app.command("configs")(configs)

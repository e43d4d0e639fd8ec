"""`epochlog acls`: add, list and remove ACLs with kafka-acls.sh's options (CreateAcls, DescribeAcls,
DeleteAcls over the Kafka protocol)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

if TYPE_CHECKING:
    from epochlog.security.acl import AclBinding
    from epochlog.security.acl_filters import AclFilter

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
TIMEOUT_S = 30.0


def connect(bootstrap: str, command_config: Path | None, client_id: str) -> Any:
    """A connection to the first bootstrap broker; with --command-config, secured as that file says."""
    from epochlog.client.epochs import connect_first
    from epochlog.client.security import load_command_config

    if command_config is None:
        return connect_first(bootstrap, TIMEOUT_S, client_id)
    try:
        security = load_command_config(command_config)
    except (OSError, ValueError) as e:
        fail(f"--command-config {command_config}: {e}")
    return connect_first(bootstrap, TIMEOUT_S, client_id, security=security)


def fail(msg: str) -> NoReturn:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(1)


def error_name(code: int) -> str:
    from epochlog.protocol.errors import Err

    extra = {
        33: "UNSUPPORTED_SASL_MECHANISM",
        54: "SECURITY_DISABLED",
        91: "RESOURCE_NOT_FOUND",
        92: "DUPLICATE_RESOURCE",
        93: "UNACCEPTABLE_CREDENTIAL",
    }
    try:
        return Err(code).name
    except ValueError:
        return extra.get(code, str(code))


def operation_of(text: str) -> Any:
    from epochlog.security.acl import Operation

    key = text.replace("_", "").replace("-", "").lower()
    for op in Operation:
        if op.name.replace("_", "").lower() == key and op not in (Operation.UNKNOWN, Operation.ANY):
            return op
    names = ", ".join(_camel(o.name) for o in Operation if o not in (Operation.UNKNOWN, Operation.ANY))
    fail(f"unknown operation {text!r}; one of {names}")


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


def describe_binding(b: AclBinding) -> str:
    return f"(principal={b.principal}, host={b.host}, operation={b.operation.name}, permissionType={b.permission.name})"


def describe_pattern(rtype: Any, name: str, ptype: Any) -> str:
    return f"ResourcePattern(resourceType={rtype.name}, name={name}, patternType={ptype.name})"


def acls(
    bootstrap: Annotated[str, typer.Option("--bootstrap-server", "-b", help="host:port of any broker")] = (
        DEFAULT_BOOTSTRAP
    ),
    command_config: Annotated[
        Path | None, typer.Option("--command-config", help="client properties (security) file")
    ] = None,
    add: Annotated[bool, typer.Option("--add", help="add ACLs")] = False,
    remove: Annotated[bool, typer.Option("--remove", help="remove ACLs")] = False,
    list_: Annotated[bool, typer.Option("--list", help="list ACLs")] = False,
    allow_principal: Annotated[list[str], typer.Option("--allow-principal", help="e.g. User:alice")] = [],  # noqa: B006
    deny_principal: Annotated[list[str], typer.Option("--deny-principal")] = [],  # noqa: B006
    allow_host: Annotated[list[str], typer.Option("--allow-host", help="default * with --allow-principal")] = [],  # noqa: B006
    deny_host: Annotated[list[str], typer.Option("--deny-host", help="default * with --deny-principal")] = [],  # noqa: B006
    principal: Annotated[list[str], typer.Option("--principal", help="with --list: only these principals")] = [],  # noqa: B006
    operation: Annotated[list[str], typer.Option("--operation", help="Read, Write, ..., All (default All)")] = [],  # noqa: B006
    topic: Annotated[list[str], typer.Option("--topic")] = [],  # noqa: B006
    group: Annotated[list[str], typer.Option("--group")] = [],  # noqa: B006
    cluster: Annotated[bool, typer.Option("--cluster", help="the cluster resource")] = False,
    transactional_id: Annotated[list[str], typer.Option("--transactional-id")] = [],  # noqa: B006
    pattern_type: Annotated[
        str, typer.Option("--resource-pattern-type", help="literal, prefixed, match (list/remove), any (list/remove)")
    ] = "literal",
    producer: Annotated[bool, typer.Option("--producer", help="the ACLs a producer needs (with --topic)")] = False,
    consumer: Annotated[
        bool, typer.Option("--consumer", help="the ACLs a consumer needs (with --topic and --group)")
    ] = False,
    idempotent: Annotated[bool, typer.Option("--idempotent", help="with --producer: IdempotentWrite")] = False,
    force: Annotated[bool, typer.Option("--force", help="remove without asking")] = False,
) -> None:
    """Add, list or remove ACLs, like kafka-acls.sh."""
    from epochlog.security.acl import CLUSTER_NAME, WILDCARD, Operation, PatternType, Permission, ResourceType
    from epochlog.security.acl_filters import AclFilter

    if sum((add, remove, list_)) != 1:
        fail("exactly one of --add, --remove or --list")
    try:
        ptype = PatternType[pattern_type.strip().upper()]
    except KeyError:
        fail("--resource-pattern-type must be literal, prefixed, match or any")
        return
    if add and ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        fail("--add takes --resource-pattern-type literal or prefixed")
    if ptype == PatternType.UNKNOWN:
        fail("--resource-pattern-type must be literal, prefixed, match or any")
    if (producer or consumer) and not add and not remove:
        fail("--producer and --consumer go with --add or --remove")
    if producer and not (topic or transactional_id):
        fail("--producer needs --topic (or --transactional-id)")
    if consumer and not (topic and group):
        fail("--consumer needs --topic and --group")

    # resource -> operations asked on it
    resources: list[tuple[ResourceType, str]] = (
        [(ResourceType.TOPIC, t) for t in topic]
        + [(ResourceType.GROUP, g) for g in group]
        + [(ResourceType.TRANSACTIONAL_ID, x) for x in transactional_id]
        + ([(ResourceType.CLUSTER, CLUSTER_NAME)] if cluster else [])
    )
    ops_by_resource: dict[tuple[ResourceType, str], list[Operation]] = {}
    if producer or consumer:
        for r in resources:
            ops: list[Operation] = []
            if r[0] == ResourceType.TOPIC:
                if producer:
                    ops += [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE]
                if consumer:
                    ops += [Operation.READ, Operation.DESCRIBE]
            elif r[0] == ResourceType.GROUP and consumer:
                ops = [Operation.READ]
            elif r[0] == ResourceType.TRANSACTIONAL_ID and producer:
                ops = [Operation.WRITE, Operation.DESCRIBE]
            if ops:
                ops_by_resource[r] = list(dict.fromkeys(ops))
        if producer and idempotent:
            ops_by_resource[(ResourceType.CLUSTER, CLUSTER_NAME)] = [Operation.IDEMPOTENT_WRITE]
    else:
        asked = [operation_of(o) for o in operation] or [Operation.ALL]
        for r in resources:
            ops_by_resource[r] = asked

    entries: list[tuple[str, str, Permission]] = []
    for p in allow_principal:
        entries += [(p, h, Permission.ALLOW) for h in (allow_host or [WILDCARD])]
    for p in deny_principal:
        entries += [(p, h, Permission.DENY) for h in (deny_host or [WILDCARD])]
    for p, _h, _perm in entries:
        if ":" not in p:
            fail(f"principal {p!r} must be Type:name, e.g. User:alice")

    if add:
        if not resources:
            fail("--add needs a resource: --topic, --group, --cluster or --transactional-id")
        if not entries:
            fail("--add needs --allow-principal or --deny-principal")
        _add(bootstrap, command_config, ops_by_resource, entries, ptype)
    elif remove:
        if not resources:
            fail("--remove needs a resource: --topic, --group, --cluster or --transactional-id")
        filters: list[AclFilter] = []
        for (rtype, name), ops in ops_by_resource.items():
            if not entries:
                # No principal named: every ACL of the resource, as kafka-acls.sh removes them.
                filters.append(AclFilter(rtype, name, ptype))
                continue
            for p, h, perm in entries:
                for op in ops:
                    filters.append(AclFilter(rtype, name, ptype, p, h, op, perm))
        if not force and not typer.confirm(
            "Are you sure you want to remove ACLs matching "
            + ", ".join(describe_pattern(t, n, ptype) for t, n in ops_by_resource)
            + "?"
        ):
            raise typer.Exit(0)
        _remove(bootstrap, command_config, filters)
    else:
        if ptype == PatternType.LITERAL and not resources:
            ptype = PatternType.ANY  # listing everything: every pattern type
        wanted: list[str | None] = list(principal) or [None]
        where: list[tuple[ResourceType, str | None]] = list(resources) or [(ResourceType.ANY, None)]
        filters = [AclFilter(rtype, name, ptype, p) for rtype, name in where for p in wanted]
        _list(bootstrap, command_config, filters)


def _add(
    bootstrap: str,
    command_config: Path | None,
    ops_by_resource: dict[Any, list[Any]],
    entries: list[tuple[str, str, Any]],
    ptype: Any,
) -> None:
    from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
    from kio.static.primitive import i8

    from epochlog.security.acl import AclBinding

    bindings = [
        AclBinding(rtype, name, ptype, p, h, op, perm)
        for (rtype, name), ops in ops_by_resource.items()
        for p, h, perm in entries
        for op in ops
    ]
    req = CreateAclsRequest(
        creations=tuple(
            AclCreation(
                resource_type=i8(int(b.resource_type)),
                resource_name=b.resource_name,
                resource_pattern_type=i8(int(b.pattern_type)),
                principal=b.principal,
                host=b.host,
                operation=i8(int(b.operation)),
                permission_type=i8(int(b.permission)),
            )
            for b in bindings
        )
    )
    resp = _send(bootstrap, command_config, req)
    failed = False
    for b, r in zip(bindings, resp.results, strict=False):
        if int(r.error_code):
            failed = True
            why = f"{error_name(int(r.error_code))}: {r.error_message}"
            typer.echo(f"Error adding {describe_binding(b)}: {why}", err=True)
    shown: set[tuple[Any, str]] = set()
    for (rtype, name), _ops in ops_by_resource.items():
        if (rtype, name) in shown:
            continue
        shown.add((rtype, name))
        typer.echo(f"Adding ACLs for resource `{describe_pattern(rtype, name, ptype)}`: ")
        for b in bindings:
            if (b.resource_type, b.resource_name) == (rtype, name):
                typer.echo(f" \t{describe_binding(b)} ")
        typer.echo("")
    if failed:
        raise typer.Exit(1)


def _remove(bootstrap: str, command_config: Path | None, filters: list[AclFilter]) -> None:
    from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest

    req = DeleteAclsRequest(filters=tuple(DeleteAclsFilter(**_filter_fields(f)) for f in filters))
    resp = _send(bootstrap, command_config, req)
    failed = False
    for r in resp.filter_results:
        if int(r.error_code):
            failed = True
            typer.echo(f"Error removing ACLs: {error_name(int(r.error_code))}: {r.error_message}", err=True)
            continue
        for m in r.matching_acls:
            typer.echo(
                f"Removed ACL (principal={m.principal}, host={m.host}, operation={_op_name(m.operation)}, "
                f"permissionType={_perm_name(m.permission_type)}) from resource "
                f"`{_pattern_text(m.resource_type, m.resource_name, m.pattern_type)}`"
            )
    if failed:
        raise typer.Exit(1)


def _list(bootstrap: str, command_config: Path | None, filters: list[AclFilter]) -> None:
    from kio.schema.describe_acls.v3.request import DescribeAclsRequest

    seen: set[tuple[Any, ...]] = set()
    for f in filters:
        resp = _send(bootstrap, command_config, DescribeAclsRequest(**_filter_fields(f)))
        if int(resp.error_code):
            fail(f"{error_name(int(resp.error_code))}: {resp.error_message}")
        for res in resp.resources:
            key = (int(res.resource_type), res.resource_name, int(res.pattern_type))
            rows = [
                a for a in res.acls if (key, a.principal, a.host, int(a.operation), int(a.permission_type)) not in seen
            ]
            if not rows:
                continue
            typer.echo(f"Current ACLs for resource `{_pattern_text(*key)}`: ")
            for a in rows:
                seen.add((key, a.principal, a.host, int(a.operation), int(a.permission_type)))
                typer.echo(
                    f" \t(principal={a.principal}, host={a.host}, operation={_op_name(a.operation)}, "
                    f"permissionType={_perm_name(a.permission_type)}) "
                )
            typer.echo("")


def _filter_fields(f: AclFilter) -> dict[str, Any]:
    from kio.static.primitive import i8

    return {
        "resource_type_filter": i8(f.resource_type),
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": i8(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": i8(f.operation),
        "permission_type": i8(f.permission),
    }


def _op_name(code: Any) -> str:
    from epochlog.security.acl import Operation

    try:
        return Operation(int(code)).name
    except ValueError:
        return str(int(code))


def _perm_name(code: Any) -> str:
    from epochlog.security.acl import Permission

    try:
        return Permission(int(code)).name
    except ValueError:
        return str(int(code))


def _pattern_text(rtype: Any, name: str, ptype: Any) -> str:
    from epochlog.security.acl import PatternType, ResourceType

    return describe_pattern(ResourceType(int(rtype)), name, PatternType(int(ptype)))


def _send(bootstrap: str, command_config: Path | None, req: Any) -> Any:
    from epochlog.client.wire import WireError

    try:
        with connect(bootstrap, command_config, "epochlog-acls") as conn:
            return conn.request(req)
    except WireError as e:
        fail(f"cannot reach {bootstrap}: {e}")


def register(app: typer.Typer) -> None:
    app.command("acls")(acls)

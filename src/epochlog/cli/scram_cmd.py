"""`epochlog scram`: SCRAM credentials of users, as kafka-configs.sh --entity-type users does it
(AlterUserScramCredentials and DescribeUserScramCredentials over the Kafka protocol).

The password is salted here, as Kafka's tools do: only the salt and the salted password travel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from epochlog.cli.acls_cmd import DEFAULT_BOOTSTRAP, connect, error_name, fail
from epochlog.cli.configs_cmd import split_outside_brackets


def split_mechanisms(text: str) -> dict[str, str]:
    """'SCRAM-SHA-256=[iterations=8192,password=p],SCRAM-SHA-512=[password=p]' -> mechanism -> inside."""
    out: dict[str, str] = {}
    for part in split_outside_brackets(text):
        mech, eq, value = part.partition("=")
        value = value.strip()
        if not eq or not (value.startswith("[") and value.endswith("]")):
            raise ValueError("expected MECHANISM=[iterations=N,password=P]")
        out[mech.strip().upper()] = value[1:-1]
    return out


def upsertions(user: str, text: str) -> list[Any]:
    """The AlterUserScramCredentials upsertions of one --add-config, salted here."""
    import os

    from kio.schema.alter_user_scram_credentials.v0.request import ScramCredentialUpsertion
    from kio.static.primitive import i8, i32

    from epochlog.security.scram_credentials import MECHANISMS, MIN_ITERATIONS, salted_password
    from epochlog.server.cluster.bootstrap import split_fields

    out = []
    for mech, inside in split_mechanisms(text).items():
        if mech not in MECHANISMS:
            raise ValueError(f"unknown mechanism {mech!r}; one of {', '.join(MECHANISMS)}")
        fields = split_fields(inside)
        unknown = set(fields) - {"iterations", "password"}
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))} for {mech}")
        if not fields.get("password"):
            raise ValueError(f"{mech} needs password=...")
        try:
            iterations = int(fields.get("iterations", str(MIN_ITERATIONS)))
        except ValueError:
            raise ValueError("iterations must be a number") from None
        salt = os.urandom(32)
        # The broker judges the iterations (UNACCEPTABLE_CREDENTIAL); PBKDF2 needs at least one.
        salted = salted_password(mech, fields["password"], salt, max(iterations, 1))
        out.append(
            ScramCredentialUpsertion(
                name=user,
                mechanism=i8(MECHANISMS[mech][1]),
                iterations=i32(iterations),
                salt=salt,
                salted_password=salted,
            )
        )
    return out


def scram(
    bootstrap: Annotated[str, typer.Option("--bootstrap-server", "-b", help="host:port of any broker")] = (
        DEFAULT_BOOTSTRAP
    ),
    command_config: Annotated[
        Path | None, typer.Option("--command-config", help="client properties (security) file")
    ] = None,
    entity_type: Annotated[str, typer.Option("--entity-type", help="users (the only kind here)")] = "users",
    entity_name: Annotated[list[str], typer.Option("--entity-name", help="user name")] = [],  # noqa: B006
    alter: Annotated[bool, typer.Option("--alter", help="add or delete credentials")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="show mechanisms and iterations")] = False,
    add_config: Annotated[
        str, typer.Option("--add-config", help="'SCRAM-SHA-512=[iterations=8192,password=secret]'")
    ] = "",
    delete_config: Annotated[
        list[str], typer.Option("--delete-config", help="mechanism(s) to delete: SCRAM-SHA-512")
    ] = [],  # noqa: B006
) -> None:
    """Alter or describe users' SCRAM credentials, like kafka-configs.sh --entity-type users."""
    from kio.schema.alter_user_scram_credentials.v0.request import (
        AlterUserScramCredentialsRequest,
        ScramCredentialDeletion,
    )
    from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest, UserName
    from kio.static.primitive import i8

    from epochlog.client.wire import WireError
    from epochlog.security.scram_credentials import MECHANISM_BY_CODE, MECHANISMS

    if entity_type != "users":
        fail("--entity-type must be users")
    if alter == describe:
        fail("exactly one of --alter or --describe")
    try:
        if alter:
            if len(entity_name) != 1:
                fail("--alter needs exactly one --entity-name")
            user = entity_name[0]
            try:
                ups = upsertions(user, add_config) if add_config else []
            except ValueError as e:
                fail(f"--add-config: {e}")  # never the argument itself: it holds a password
                return
            mechs = [m.strip().upper() for item in delete_config for m in item.split(",") if m.strip()]
            for m in mechs:
                if m not in MECHANISMS:
                    fail(f"--delete-config: unknown mechanism {m!r}; one of {', '.join(MECHANISMS)}")
            if not ups and not mechs:
                fail("--alter needs --add-config or --delete-config")
            dels = [ScramCredentialDeletion(name=user, mechanism=i8(MECHANISMS[m][1])) for m in mechs]
            # Kafka's controller refuses a request that alters one user twice (DUPLICATE_RESOURCE), even for
            # two mechanisms, so kafka-configs.sh cannot set both at once; one request per change can.
            requests = [AlterUserScramCredentialsRequest(deletions=(d,), upsertions=()) for d in dels]
            requests += [AlterUserScramCredentialsRequest(deletions=(), upsertions=(u,)) for u in ups]
            bad = []
            with connect(bootstrap, command_config, "epochlog-scram") as conn:
                for req in requests:
                    bad += [r for r in conn.request(req).results if int(r.error_code)]
            for r in bad:
                typer.echo(f"error: user {r.user}: {error_name(int(r.error_code))}: {r.error_message}", err=True)
            if bad:
                raise typer.Exit(1)
            typer.echo(f"Completed updating config for user {user}.")
            return
        users = tuple(UserName(name=n) for n in entity_name) or None
        with connect(bootstrap, command_config, "epochlog-scram") as conn:
            resp = conn.request(DescribeUserScramCredentialsRequest(users=users))
    except WireError as e:
        fail(f"cannot reach {bootstrap}: {e}")
        return
    if int(resp.error_code):
        fail(f"{error_name(int(resp.error_code))}: {resp.error_message}")
    failed = False
    for r in resp.results:
        if int(r.error_code):
            failed = True
            typer.echo(f"error: user {r.user}: {error_name(int(r.error_code))}: {r.error_message}", err=True)
            continue
        creds = ", ".join(
            f"{MECHANISM_BY_CODE.get(int(c.mechanism), int(c.mechanism))}=iterations={int(c.iterations)}"
            for c in r.credential_infos
        )
        typer.echo(f"SCRAM credential configs for user-principal '{r.user}' are {creds}")
    if failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("scram")(scram)

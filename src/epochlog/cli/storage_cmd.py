"""`epochlog storage format`: prepare a data directory before its first start, like kafka-storage.sh format.

``--add-scram`` puts SCRAM credentials in the directory's bootstrap file (server/cluster/bootstrap.py),
salted here, so the password is neither stored nor printed; the first active controller of the metadata
log appends them, and clients can authenticate from the first start on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

storage_app = typer.Typer(no_args_is_help=True, help="Format a data directory (kafka-storage.sh).")

META = "meta.properties"
METADATA_LOG = "__cluster_metadata-0"


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(1)


def _stored_cluster_id(meta: Path) -> str:
    for line in meta.read_text().splitlines():
        key, eq, value = line.partition("=")
        if eq and key.strip() == "cluster.id":
            return value.strip()
    return ""


@storage_app.command("format")
def format_(
    data_dir: Annotated[
        Path, typer.Option("--data-dir", "-d", help="the data directory (metadata.log.dir, else log.dirs)")
    ],
    cluster_id: Annotated[str | None, typer.Option("--cluster-id", "-t", help="cluster id to record")] = None,
    add_scram: Annotated[
        list[str],
        typer.Option(
            "--add-scram",
            "-S",
            help="MECHANISM=[name=N,password=P[,iterations=I][,salt=B64]] (repeatable)",
        ),
    ] = [],  # noqa: B006
    standalone: Annotated[
        bool, typer.Option("--standalone", help="a dynamic quorum of this one controller (--node-id, --controller)")
    ] = False,
    initial_controllers: Annotated[
        str | None,
        typer.Option("--initial-controllers", help="a dynamic quorum's voters: id@host:port:directoryid,..."),
    ] = None,
    no_initial_controllers: Annotated[
        bool, typer.Option("--no-initial-controllers", help="a controller to be added to a running dynamic quorum")
    ] = False,
    node_id: Annotated[int | None, typer.Option("--node-id", help="this controller's node.id")] = None,
    controller: Annotated[
        str | None, typer.Option("--controller", help="this controller's listener host:port (with --standalone)")
    ] = None,
) -> None:
    """Write the cluster id and bootstrap records (SCRAM credentials) into a data directory; with --standalone,
    --initial-controllers or --no-initial-controllers, the voter set of a dynamic quorum (KIP-853)."""
    from epochlog.server.cluster.bootstrap import BOOTSTRAP_FILE, parse_add_scram, write_bootstrap

    if (data_dir / METADATA_LOG).exists():
        _fail(f"{data_dir} already holds a metadata log: bootstrap records apply only before the first start")
    records = []
    seen: set[tuple[str, str]] = set()
    for i, text in enumerate(add_scram, 1):
        try:
            r = parse_add_scram(text)
        except ValueError as e:
            # The argument itself is not echoed: it may hold a password.
            _fail(f"--add-scram #{i}: {e}")
            return
        if (r.name, r.mechanism) in seen:
            _fail(f"--add-scram #{i}: {r.mechanism} credential of {r.name!r} is given twice")
        seen.add((r.name, r.mechanism))
        records.append(r)
    meta = data_dir / META
    if cluster_id is not None:
        if not cluster_id.strip():
            _fail("--cluster-id must not be empty")
        stored = _stored_cluster_id(meta) if meta.exists() else ""
        if stored and stored != cluster_id:
            _fail(f"{meta} belongs to cluster {stored}, not {cluster_id}")
        if not meta.exists():
            data_dir.mkdir(parents=True, exist_ok=True)
            meta.write_text(f"version=1\ncluster.id={cluster_id}\n")
    if standalone or initial_controllers is not None or no_initial_controllers:
        _format_voters(data_dir, standalone, initial_controllers, node_id, controller)
    if records:
        path = write_bootstrap(data_dir, list(records))
        users = ", ".join(f"{r.name} ({r.mechanism}, {r.iterations} iterations)" for r in records)
        typer.echo(f"Wrote {len(records)} SCRAM credential(s) to {path}: {users}")
    elif (data_dir / BOOTSTRAP_FILE).exists():
        typer.echo(f"Kept the existing {data_dir / BOOTSTRAP_FILE}")
    typer.echo(f"Formatted {data_dir}" + (f" for cluster {cluster_id}" if cluster_id else ""))


def _format_voters(
    data_dir: Path, standalone: bool, initial: str | None, node_id: int | None, controller: str | None
) -> None:
    """Kafka's three ways to start a dynamic quorum's controller; exactly one is given."""
    from epochlog.raft.voters import Endpoint, Voter, VoterSet
    from epochlog.storage import bootstrap_voters

    if standalone + (initial is not None) > 1:
        _fail("--standalone, --initial-controllers and --no-initial-controllers exclude each other")
    if (data_dir / bootstrap_voters.VOTERS_FILE).exists():
        _fail(f"{data_dir} is formatted for a dynamic quorum already")
    if node_id is None:
        _fail("a dynamic quorum's controller needs --node-id")
        return
    if standalone:
        host, _, port = (controller or "").rpartition(":")
        if not host or not port.isdigit():
            _fail("--standalone needs --controller host:port, this controller's listener")
        own = bootstrap_voters.new_directory_id()
        voters = VoterSet.of(Voter(node_id, own, (Endpoint("CONTROLLER", host, int(port)),)))
    elif initial is not None:
        try:
            voters = bootstrap_voters.parse_initial_controllers(initial)
        except ValueError as e:
            _fail(str(e))
            return
        me = voters.get(node_id)
        if me is None:
            _fail(f"--initial-controllers does not name node {node_id}")
            return
        own = me.directory_id
    else:
        own, voters = bootstrap_voters.new_directory_id(), VoterSet()
    path = bootstrap_voters.write(data_dir, own, voters)
    named = ", ".join(f"{v.node_id} ({v.directory_id})" for v in voters.voters) or "none: to be added"
    typer.echo(f"Wrote the dynamic quorum's voters to {path}: {named}; this controller's directory id is {own}")


def register(app: typer.Typer) -> None:
    app.add_typer(storage_app, name="storage")

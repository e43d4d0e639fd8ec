"""`epochlog metadata-quorum describe --status | --replication`, `add-controller`, `remove-controller` (like
kafka-metadata-quorum.sh).

It asks a controller (`--bootstrap-controller`, before the subcommand as Kafka's tool takes it, or after
`describe` as ours always has) with DescribeQuorum and DescribeCluster and prints Kafka's field names, so
scripts written for Kafka's tool read ours. Voter changes (KIP-853) are quorum_voters_cmd.py's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from epochlog.client.quorum import describe_quorum_request


def _ask(bootstrap: str) -> tuple[str, Any]:
    """(cluster id, the metadata partition's DescribeQuorum row) from the first controller that answers."""
    from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
    from kio.static.primitive import i8

    from epochlog.client.wire import Connection, WireError

    errors = []
    for addr in bootstrap.split(","):
        host, _, port = addr.strip().rpartition(":")
        try:
            with Connection(host or "127.0.0.1", int(port), client_id="epochlog-metadata-quorum") as conn:
                quorum = conn.request(describe_quorum_request())
                cluster = conn.request(
                    DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=i8(2))
                )
        except (WireError, OSError, ValueError) as e:
            errors.append(f"{addr}: {e}")
            continue
        if quorum.error_code:
            errors.append(f"{addr}: DescribeQuorum error {int(quorum.error_code)}")
            continue
        row = quorum.topics[0].partitions[0]
        if row.error_code:
            errors.append(f"{addr}: __cluster_metadata-0 error {int(row.error_code)}")
            continue
        return str(cluster.cluster_id or ""), row
    raise typer.BadParameter("no controller answered: " + "; ".join(errors), param_hint="--bootstrap-controller")


def status_lines(cluster_id: str, row: Any, now_ms: int) -> list[tuple[str, str]]:
    """Kafka's `describe --status` fields. The lag of a voter is the leader's log end minus its own."""
    leader_end = next((int(v.log_end_offset) for v in row.current_voters if v.replica_id == row.leader_id), -1)
    followers = [v for v in row.current_voters if v.replica_id != row.leader_id]
    max_lag = max((leader_end - int(v.log_end_offset) for v in followers), default=0)
    lag_times = [now_ms - int(v.last_caught_up_timestamp) for v in followers if int(v.last_caught_up_timestamp) >= 0]
    return [
        ("ClusterId", cluster_id),
        ("LeaderId", str(int(row.leader_id))),
        ("LeaderEpoch", str(int(row.leader_epoch))),
        ("HighWatermark", str(int(row.high_watermark))),
        ("MaxFollowerLag", str(max_lag)),
        ("MaxFollowerLagTimeMs", str(max(lag_times, default=0) if followers else -1)),
        ("CurrentVoters", _voters_text(row)),
        ("CurrentObservers", "[" + ",".join(str(int(o.replica_id)) for o in row.observers) + "]"),
    ]


def _directory(r: Any) -> str:
    from epochlog.server.quorum.voter_wire import dir_text

    return dir_text(getattr(r, "replica_directory_id", None))


def _voters_text(row: Any) -> str:
    """A static quorum's voters as ids, [1,2,3]; a dynamic one's with their directory ids, as Kafka's tool
    prints them: [{"id": 1, "directoryId": "..."}, ...]."""
    if not any(_directory(v) for v in row.current_voters):
        return "[" + ",".join(str(int(v.replica_id)) for v in row.current_voters) + "]"
    items = [f'{{"id": {int(v.replica_id)}, "directoryId": "{_directory(v)}"}}' for v in row.current_voters]
    return "[" + ", ".join(items) + "]"


def replication_rows(row: Any) -> list[list[str]]:
    """Kafka's `describe --replication` table: one row per voter and observer, the leader first."""
    leader_end = next((int(v.log_end_offset) for v in row.current_voters if v.replica_id == row.leader_id), -1)
    out = []
    voters = sorted(row.current_voters, key=lambda v: (v.replica_id != row.leader_id, int(v.replica_id)))
    for v in voters:
        status = "Leader" if v.replica_id == row.leader_id else "Follower"
        out.append(_row(v, leader_end, status))
    for o in sorted(row.observers, key=lambda o: int(o.replica_id)):
        out.append(_row(o, leader_end, "Observer"))
    return out


def _row(r: Any, leader_end: int, status: str) -> list[str]:
    return [
        str(int(r.replica_id)),
        _directory(r) or ZERO_DIRECTORY,
        str(int(r.log_end_offset)),
        str(max(leader_end - int(r.log_end_offset), 0)),
        str(int(r.last_fetch_timestamp)),
        str(int(r.last_caught_up_timestamp)),
        status,
    ]


ZERO_DIRECTORY = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid.ZERO: how Kafka's tool shows a replica without a directory id
REPLICATION_HEADER = [
    "NodeId",
    "DirectoryId",
    "LogEndOffset",
    "Lag",
    "LastFetchTimestamp",
    "LastCaughtUpTimestamp",
    "Status",
]


def register(app: typer.Typer) -> None:
    quorum = typer.Typer(help="The metadata quorum (like kafka-metadata-quorum.sh)", no_args_is_help=True)
    app.add_typer(quorum, name="metadata-quorum")

    @quorum.callback()
    def options(
        ctx: typer.Context,
        bootstrap_controller: Annotated[
            str | None, typer.Option("--bootstrap-controller", help="controller HOST:PORT[,HOST:PORT...]")
        ] = None,
        command_config: Annotated[
            Path | None, typer.Option("--command-config", help="the controller's properties (add-controller)")
        ] = None,
    ) -> None:
        ctx.obj = {"bootstrap": bootstrap_controller, "command_config": command_config}

    def _bootstrap(ctx: typer.Context, given: str | None) -> str:
        value = given or (ctx.obj or {}).get("bootstrap")
        if not value:
            raise typer.BadParameter("give --bootstrap-controller", param_hint="--bootstrap-controller")
        return str(value)

    @quorum.command("add-controller")
    def add_controller(
        ctx: typer.Context,
        command_config: Annotated[
            Path | None, typer.Option("--command-config", help="the joining controller's server.properties")
        ] = None,
    ) -> None:
        """Add the controller that --command-config describes to the voters (AddRaftVoter)."""
        from epochlog.cli.quorum_voters_cmd import add_controller as add

        config = command_config or (ctx.obj or {}).get("command_config")
        if config is None:
            raise typer.BadParameter("give --command-config", param_hint="--command-config")
        add(_bootstrap(ctx, None), Path(config))

    @quorum.command("remove-controller")
    def remove_controller(
        ctx: typer.Context,
        controller_id: Annotated[int, typer.Option("--controller-id", help="the voter's node id")],
        controller_directory_id: Annotated[
            str, typer.Option("--controller-directory-id", help="the voter's metadata directory id")
        ],
    ) -> None:
        """Remove a voter (RemoveRaftVoter); the active controller itself may be removed."""
        from epochlog.cli.quorum_voters_cmd import remove_controller as remove

        remove(_bootstrap(ctx, None), controller_id, controller_directory_id)

    @quorum.command("describe")
    def describe(
        ctx: typer.Context,
        bootstrap_controller: Annotated[
            str | None, typer.Option("--bootstrap-controller", help="controller HOST:PORT[,HOST:PORT...]")
        ] = None,
        status: Annotated[bool, typer.Option("--status", help="leader, epoch, high watermark, voters")] = False,
        replication: Annotated[
            bool, typer.Option("--replication", help="each voter's and observer's position")
        ] = False,
    ) -> None:
        """Describe the metadata quorum: --status or --replication."""
        if status == replication:
            raise typer.BadParameter("give exactly one of --status and --replication")
        cluster_id, row = _ask(_bootstrap(ctx, bootstrap_controller))
        if status:
            for name, value in status_lines(cluster_id, row, time.time_ns() // 1_000_000):
                typer.echo(f"{name + ':':<24}{value}")
            return
        rows = [REPLICATION_HEADER, *replication_rows(row)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(REPLICATION_HEADER))]
        for r in rows:
            typer.echo("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())

"""`epochlog metadata-quorum describe --status | --replication` (like kafka-metadata-quorum.sh).

It asks a controller (`--bootstrap-controller`) with DescribeQuorum and DescribeCluster and prints
Kafka's field names, so scripts written for Kafka's tool read ours.
"""

from __future__ import annotations

import time
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
        ("CurrentVoters", "[" + ",".join(str(int(v.replica_id)) for v in row.current_voters) + "]"),
        ("CurrentObservers", "[" + ",".join(str(int(o.replica_id)) for o in row.observers) + "]"),
    ]


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
        str(int(r.log_end_offset)),
        str(max(leader_end - int(r.log_end_offset), 0)),
        str(int(r.last_fetch_timestamp)),
        str(int(r.last_caught_up_timestamp)),
        status,
    ]


REPLICATION_HEADER = ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]


def register(app: typer.Typer) -> None:
    quorum = typer.Typer(help="The metadata quorum (like kafka-metadata-quorum.sh)", no_args_is_help=True)
    app.add_typer(quorum, name="metadata-quorum")

    @quorum.command("describe")
    def describe(
        bootstrap_controller: Annotated[
            str, typer.Option("--bootstrap-controller", help="controller HOST:PORT[,HOST:PORT...]")
        ],
        status: Annotated[bool, typer.Option("--status", help="leader, epoch, high watermark, voters")] = False,
        replication: Annotated[
            bool, typer.Option("--replication", help="each voter's and observer's position")
        ] = False,
    ) -> None:
        """Describe the metadata quorum: --status or --replication."""
        if status == replication:
            raise typer.BadParameter("give exactly one of --status and --replication")
        cluster_id, row = _ask(bootstrap_controller)
        if status:
            for name, value in status_lines(cluster_id, row, time.time_ns() // 1_000_000):
                typer.echo(f"{name + ':':<24}{value}")
            return
        rows = [REPLICATION_HEADER, *replication_rows(row)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(REPLICATION_HEADER))]
        for r in rows:
            typer.echo("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())

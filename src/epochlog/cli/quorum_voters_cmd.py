"""`epochlog metadata-quorum add-controller | remove-controller` (KIP-853), as kafka-metadata-quorum.sh has them.

add-controller reads the joining controller's own configuration (``--command-config``, its server.properties):
its node.id, its listener and, from its formatted metadata directory, its directory id; and asks the active
controller to add it (AddRaftVoter). remove-controller names the voter by id and directory id (RemoveRaftVoter).
Both find the active controller through ``--bootstrap-controller``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from epochlog.raft.voters import Endpoint, Voter


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(1)


def controller_of(config: Path) -> Voter:
    """The voter a controller's server.properties describes, with the directory id its storage was formatted with."""
    from epochlog.properties import load_properties
    from epochlog.server.config import parse_listener
    from epochlog.storage import bootstrap_voters

    props = load_properties(config)
    if not props.get("node.id", "").strip().isdigit():
        raise typer.BadParameter(f"{config} has no node.id", param_hint="--command-config")
    listeners = props.get("listeners", "")
    host, port = parse_listener(listeners)
    name = listeners.split(",")[0].partition("://")[0] if "://" in listeners else "CONTROLLER"
    log_dir = (props.get("metadata.log.dir") or props.get("log.dirs", "")).split(",")[0].strip()
    formatted = bootstrap_voters.read(Path(log_dir)) if log_dir else None
    if formatted is None:
        raise typer.BadParameter(
            f"{log_dir or 'its log directory'} is not formatted for a dynamic quorum (storage format "
            "--no-initial-controllers)",
            param_hint="--command-config",
        )
    return Voter(int(props["node.id"]), formatted[0], (Endpoint(name, host, port),))


def _active_controller(bootstrap: str) -> tuple[str, str, int]:
    """(cluster id, host, port) of the active controller, as the first bootstrap controller that answers knows it."""
    from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
    from kio.static.primitive import i8

    from epochlog.client.quorum import describe_quorum_request
    from epochlog.client.wire import Connection, WireError

    errors = []
    for addr in bootstrap.split(","):
        host, _, port = addr.strip().rpartition(":")
        try:
            with Connection(host or "127.0.0.1", int(port), client_id="epochlog-metadata-quorum") as conn:
                row = conn.request(describe_quorum_request()).topics[0].partitions[0]
                cluster = conn.request(
                    DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=i8(2))
                )
        except (WireError, OSError, ValueError, IndexError) as e:
            errors.append(f"{addr}: {e}")
            continue
        leader = int(row.leader_id)
        where = next(((str(b.host), int(b.port)) for b in cluster.brokers if int(b.broker_id) == leader), None)
        if where is None:
            errors.append(f"{addr}: knows no active controller")
            continue
        return str(cluster.cluster_id or ""), where[0], where[1]
    raise typer.BadParameter("no controller answered: " + "; ".join(errors), param_hint="--bootstrap-controller")


def _send(bootstrap: str, build: Any) -> tuple[int, str]:
    from epochlog.client.wire import Connection

    cluster_id, host, port = _active_controller(bootstrap)
    with Connection(host, port, client_id="epochlog-metadata-quorum", timeout=60) as conn:
        resp = conn.request(build(cluster_id))
    return int(resp.error_code), str(resp.error_message or "")


def add_controller(bootstrap: str, command_config: Path) -> None:
    from epochlog.protocol.errors import Err
    from epochlog.server.quorum import voter_wire

    voter = controller_of(command_config)
    error, message = _send(bootstrap, lambda cluster: voter_wire.add_request(cluster, voter))
    if error != Err.NONE:
        _fail(f"could not add controller {voter.node_id}: {Err(error).name} {message}".rstrip())
    endpoints = ", ".join(f"{e.listener}://{e.host}:{e.port}" for e in voter.endpoints)
    typer.echo(f"Added controller {voter.node_id} with directory id {voter.directory_id} and endpoints: {endpoints}")


def remove_controller(bootstrap: str, controller_id: int, directory_id: str) -> None:
    from epochlog.protocol.errors import Err
    from epochlog.server.quorum import voter_wire

    try:
        voter_wire.dir_uuid(directory_id)
    except ValueError:
        raise typer.BadParameter(
            f"{directory_id!r} is not a directory id", param_hint="--controller-directory-id"
        ) from None
    error, message = _send(bootstrap, lambda cluster: voter_wire.remove_request(cluster, controller_id, directory_id))
    if error != Err.NONE:
        _fail(f"could not remove controller {controller_id}: {Err(error).name} {message}".rstrip())
    typer.echo(f"Removed KRaft controller {controller_id} with directory id {directory_id}")

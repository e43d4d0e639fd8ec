"""Processes of a dynamic controller quorum (KIP-853) started as an operator would, shared by
tests/integration/test_dynamic_quorum.py and bench/controller_replacement_bench.py: each node its own
server.properties, storage formatted with `epochlog storage format`, voters changed with `epochlog
metadata-quorum`, and the voter set read back from the active controller."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from epochlog.client.quorum import describe_quorum_request, leader_of
from epochlog.client.wire import Connection, WireError
from epochlog.server.cluster.local import wait_for_port
from tests.broker_process import free_port

CLUSTER = "dynquorumAAAAAAAAAAAAA"


def epochlog(*args: str, timeout: float = 90) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "epochlog.cli.main", *args], capture_output=True, text=True, timeout=timeout
    )
    assert out.returncode == 0, f"epochlog {' '.join(args)}: {out.stdout}\n{out.stderr}"
    return out.stdout


class Proc:
    def __init__(
        self, root: Path, name: str, role: str, node_id: int, props: dict[str, str], cluster: str = CLUSTER
    ) -> None:
        self.name, self.role, self.node_id, self.port = name, role, node_id, free_port()
        self.dir = root / name
        self.config = root / f"{name}.properties"
        self.log = root / f"{name}.log"
        body = {
            "process.roles": role,
            "node.id": str(node_id),
            "cluster.id": cluster,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.dir),
            **props,
        }
        self.config.write_text("".join(f"{k}={v}\n" for k, v in body.items()))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "epochlog.cli.main", self.role, "-c", str(self.config)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_for_port(self.port, proc=self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def directory_id(c: Proc) -> str:
    return str(json.loads((c.dir / "bootstrap-voters.json").read_text())["directory.id"])


def active_controller(ctrls: dict[int, Proc]) -> int:
    """The active controller's id as the live controllers report it (-1: none knows one)."""
    return int(leader_of([c.port for c in ctrls.values() if c.alive]))


def voters(ctrls: dict[int, Proc]) -> dict[int, str]:
    """The voters (id -> directory id) as the active controller reports them."""
    from epochlog.server.quorum.voter_wire import dir_text

    ports = {i: c.port for i, c in ctrls.items() if c.alive}
    leader = leader_of(list(ports.values()))
    assert leader in ports, f"no live active controller ({leader})"
    with Connection("127.0.0.1", ports[leader], client_id="test-dynamic-quorum", timeout=2) as conn:
        row = conn.request(describe_quorum_request()).topics[0].partitions[0]
    return {int(v.replica_id): dir_text(v.replica_directory_id) for v in row.current_voters}


def voters_are(ctrls: dict[int, Proc], expected: set[int]) -> bool:
    try:
        return set(voters(ctrls)) == expected
    except (AssertionError, WireError, OSError, IndexError):
        return False


def kraft_version(port: int) -> tuple[int, int]:
    """The kraft.version a controller reports in ApiVersions v3: (finalized level, highest supported)."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    from epochlog.client.wire import Connection

    with Connection("127.0.0.1", port, client_id="test-kraft-version") as conn:
        r = conn.request(ApiVersionsRequest(client_software_name="test", client_software_version="1"))
    (fin,) = [f for f in r.finalized_features if f.name == "kraft.version"]
    (sup,) = [f for f in r.supported_features if f.name == "kraft.version"]
    return int(fin.max_version_level), int(sup.max_version)

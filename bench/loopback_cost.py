"""What moving one MiB over a TCP connection on 127.0.0.1 costs the sender and the receiver, in CPU.

  .venv/bin/python bench/loopback_cost.py [--mib 400] [--rounds 2]

Every byte an RF=3 leader takes is sent twice more, to its two followers, over exactly such
connections; this is the part of replication that no broker code can make cheaper. Two ways of
sending are measured: send() from a buffer in memory (what the leader does: its segment tail cache)
and sendfile() from a file in the page cache (no copy on the sender). The receiver always reads into
one reused 1 MiB buffer, as a follower does. Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import tempfile
import time
from pathlib import Path

from results_file import write_results
from rich.console import Console
from rich.table import Table

MIB = 1 << 20


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _receive(port: int, total: int, report: int) -> None:
    """In a child process: read `total` bytes, then write CPU seconds spent to the `report` pipe."""
    conn = socket.create_connection(("127.0.0.1", port))
    buf = memoryview(bytearray(MIB))
    c0 = _cpu()
    got = 0
    while got < total:
        n = conn.recv_into(buf)
        if n == 0:
            break
        got += n
    os.write(report, f"{_cpu() - c0} {got}".encode())
    os._exit(0)


def measure(how: str, mib: int, data_file: Path) -> dict[str, float]:
    """Send `mib` MiB to a child process over loopback TCP; CPU ms per MiB on each side."""
    total = mib * MIB
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        srv.close()
        os.close(r)
        _receive(port, total, w)
    os.close(w)
    sock, _ = srv.accept()
    srv.close()
    payload = os.urandom(MIB)
    fd = os.open(data_file, os.O_RDONLY)
    c0 = _cpu()
    t0 = time.perf_counter()
    try:
        for i in range(mib):
            if how == "send":
                sock.sendall(payload)
            else:
                off, left = (i % 8) * MIB, MIB
                while left:
                    n = os.sendfile(sock.fileno(), fd, off, left)
                    off += n
                    left -= n
        sender = _cpu() - c0
        sock.shutdown(socket.SHUT_WR)
        report = b""
        while chunk := os.read(r, 100):
            report += chunk
        wall = time.perf_counter() - t0
    finally:
        os.close(fd)
        os.close(r)
        sock.close()
        os.waitpid(pid, 0)
    receiver, got = report.split()
    assert int(got) == total, f"received {got.decode()} of {total} bytes"
    return {
        "sender_cpu_ms_per_mib": sender * 1000 / mib,
        "receiver_cpu_ms_per_mib": float(receiver) * 1000 / mib,
        "wall_ms_per_mib": wall * 1000 / mib,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="loopback-") as d:
        data_file = Path(d) / "data"
        data_file.write_bytes(os.urandom(8 * MIB))  # in the page cache from here on
        for _ in range(args.rounds):
            for how in ("send", "sendfile"):
                rows.append({"how": how, **measure(how, args.mib, data_file)})
    t = Table(title=f"TCP over 127.0.0.1, {args.mib} MiB per round, 1 MiB per call")
    for col in ("sender", "sender CPU ms/MiB", "receiver CPU ms/MiB", "both", "wall ms/MiB"):
        t.add_column(col)
    for row in rows:
        s, r = row["sender_cpu_ms_per_mib"], row["receiver_cpu_ms_per_mib"]
        t.add_row(row["how"], f"{s:.3f}", f"{r:.3f}", f"{s + r:.3f}", f"{row['wall_ms_per_mib']:.3f}")
    Console(width=120).print(t)
    write_results("loopback", {"mib": args.mib, "rounds": rows})


if __name__ == "__main__":
    main()

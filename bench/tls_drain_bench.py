"""What one TLS listener connection costs per byte read, uvloop's one-record reads against draining every
whole record per call (security/tls_read.py), over a real socket and over memory BIOs.

  PYTHONPATH=src .venv/bin/python bench/tls_drain_bench.py [--rounds 5] [--mib 32]

socket  A uvloop server with the broker's TLS setup (the test PKI, TLS 1.3) and a BufferedProtocol that
        reads into a 128 KiB buffer as framing.py does. A client process finishes the handshake, encrypts
        --mib MiB offline, then sends the ciphertext as fast as the socket takes it: records of 16 B and
        1,008 B in turn (what librdkafka sends for 1 KiB messages, docs/performance-profile.md section 4),
        or full 16 KiB records. Measured: the server process's CPU seconds while it reads, so the client's
        encryption is not counted. The two read paths alternate within each round.
bio     No sockets: bench/tls_read_sizes.py's drain (64 KiB chunks into the incoming memory BIO, read as uvloop
        reads) with each SSLObject class, in process CPU time.
Prints medians and per-round ratios (drained / one record per call); writes bench/results/tls-drain-*.json.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results_file import write_results
from tls_read_sizes import MIB, SCRATCH, _ciphertext, _pair, drain

from epochlog.security.tls_read import DrainingSSLObject, available

PATTERNS = {"16+1008": (16, 1008), "16KiB": (MIB,)}


def _client(port: int, ca: str, total: int, writes: tuple[int, ...], ready: Any) -> None:
    """Handshake over the socket through memory BIOs, encrypt everything, then send only ciphertext."""
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cctx.load_verify_locations(ca)
    sock = socket.create_connection(("127.0.0.1", port))
    c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = cctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            if c_out.pending:
                sock.sendall(c_out.read())
            c_in.write(sock.recv(65536))
    sock.sendall(c_out.read())
    wire = _ciphertext(obj, c_out, total, writes)
    ready.send(len(wire))
    ready.recv()
    view = memoryview(wire)
    for pos in range(0, len(wire), 256 * 1024):
        sock.sendall(view[pos : pos + 256 * 1024])
    ready.recv()  # the server has read everything
    sock.close()


class _Reader(asyncio.BufferedProtocol):
    def __init__(self, total: int, done: asyncio.Future[float]) -> None:
        self.buf = memoryview(bytearray(SCRATCH))
        self.total, self.got, self.done, self.cpu0 = total, 0, done, 0.0

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buf

    def buffer_updated(self, nbytes: int) -> None:
        if self.got == 0:
            self.cpu0 = time.process_time()
        self.got += nbytes
        if self.got >= self.total and not self.done.done():
            self.done.set_result(time.process_time() - self.cpu0)


async def _socket_case(sctx: ssl.SSLContext, ca: str, total: int, writes: tuple[int, ...]) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[float] = loop.create_future()
    server = await loop.create_server(lambda: _Reader(total, done), "127.0.0.1", 0, ssl=sctx)
    port = server.sockets[0].getsockname()[1]
    mine, theirs = multiprocessing.Pipe()
    proc = multiprocessing.get_context("spawn").Process(target=_client, args=(port, ca, total, writes, theirs))
    proc.start()
    wire = await loop.run_in_executor(None, mine.recv)
    t0 = time.perf_counter()
    mine.send(b"go")
    cpu = await asyncio.wait_for(done, 120)
    wall = time.perf_counter() - t0
    mine.send(b"done")
    await loop.run_in_executor(None, proc.join, 30)
    server.close()
    return {"server_cpu_s": round(cpu, 4), "wall_s": round(wall, 4), "wire_bytes": wire,
            "server_cpu_ns_per_byte": round(cpu / total * 1e9, 3)}  # fmt: skip


def _bio_case(sctx: ssl.SSLContext, cctx: ssl.SSLContext, total: int, writes: tuple[int, ...]) -> dict[str, Any]:
    client, c_out, server, s_in, _ = _pair(sctx, cctx)
    wire = _ciphertext(client, c_out, total, writes)
    cpu0 = time.process_time()
    row = drain(server, s_in, wire, 65536)
    cpu = time.process_time() - cpu0
    return {"cpu_s": round(cpu, 4), "cpu_ns_per_byte": round(cpu / row["plaintext"] * 1e9, 3),
            "read_calls": row["read_calls"]}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mib", type=int, default=32)
    ap.add_argument("--skip", default="", help="socket,bio")
    args = ap.parse_args()
    if not available():
        sys.exit("security/_native/_tls_drain is not built: nothing to compare")
    import uvloop

    skip = set(filter(None, args.skip.split(",")))
    total = args.mib * MIB
    classes = {"one record per call": ssl.SSLObject, "drained": DrainingSSLObject}
    res: dict[str, Any] = {"args": vars(args), "openssl": ssl.OPENSSL_VERSION, "loadavg": os.getloadavg(),
                           "rounds": []}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="tls-drain-") as tmp:
        from tests.pki import make_pki

        pki = make_pki(Path(tmp) / "pki")
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(pki.broker_cert, pki.broker_key)
        cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        cctx.load_verify_locations(pki.ca_cert)
        ca = str(pki.ca_cert)
        for r in range(args.rounds):
            order = list(classes.items()) if r % 2 == 0 else list(reversed(classes.items()))
            rnd: dict[str, Any] = {"round": r}
            for pattern, writes in PATTERNS.items():
                for name, cls in order:
                    sctx.sslobject_class = cls
                    if "socket" not in skip:
                        row = uvloop.run(_socket_case(sctx, ca, total, writes))
                        rnd[f"socket {pattern} {name}"] = row
                    if "bio" not in skip:
                        rnd[f"bio {pattern} {name}"] = _bio_case(sctx, cctx, total // 4, writes)
            res["rounds"].append(rnd)
            print(f"round {r}: " + ", ".join(f"{k}: {v.get('server_cpu_ns_per_byte', v.get('cpu_ns_per_byte'))}"
                                            for k, v in rnd.items() if k != "round"), file=sys.stderr)  # fmt: skip
    summary: dict[str, Any] = {}
    for kind, field in (("socket", "server_cpu_ns_per_byte"), ("bio", "cpu_ns_per_byte")):
        for pattern in PATTERNS:
            both = [x for x in res["rounds"] if f"{kind} {pattern} drained" in x]
            old = [x[f"{kind} {pattern} one record per call"][field] for x in both]
            new = [x[f"{kind} {pattern} drained"][field] for x in both]
            if old:
                ratios = [n / o for n, o in zip(new, old, strict=True)]
                summary[f"{kind} {pattern}"] = {
                    "one_record_ns_per_byte": statistics.median(old),
                    "drained_ns_per_byte": statistics.median(new),
                    "ratio_median_of_rounds": round(statistics.median(ratios), 3),
                }
    res["summary"] = summary
    res["loadavg_end"] = os.getloadavg()
    for k, v in summary.items():
        print(f"{k}: {v}")
    write_results("tls-drain", res)


if __name__ == "__main__":
    main()

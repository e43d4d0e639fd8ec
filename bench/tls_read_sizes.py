"""What TLS costs the broker per byte, and why: ``ssl.SSLObject`` over memory BIOs as uvloop drives it.

  .venv/bin/python bench/tls_read_sizes.py [--mib 64] [--broker-seconds 5] [--skip bio,broker]

bio     In this process, no sockets: a client SSLObject encrypts --mib MiB (TLS 1.3, the test PKI, the
        broker's default context) written in application writes of 1 MiB (a produce request); the broker
        side is then fed that ciphertext in chunks of 4 KiB to 256 KiB (what one socket read hands uvloop,
        which writes it into the incoming memory BIO) and drains it the way uvloop's SSLProtocol does for a
        BufferedProtocol: ``SSLObject.read(room, buffer)`` into a 128 KiB buffer (framing.py's scratch) until
        SSLWantReadError. Reported: MB/s, read calls, bytes per call, exceptions. Next to it, the floors:
        AES-256-GCM alone over 16 KiB records (the cryptography package, the same OpenSSL family) and a
        memcpy. Then the write side (a fetch answer): uvloop's writelines calls ``SSLObject.write`` once per
        piece, so a response handed over as N pieces becomes at least N TLS records: pieces of 64 B to 1 MiB,
        each written alone, against the same bytes joined first.
broker  A real secure node (tests/integration/security_node.py) whose ``SSLObject.read``/``write`` calls are
        counted by bench/ssl_sizes/sitecustomize.py while a 1 KiB producer, then a consumer, run over
        SASL_SSL for --broker-seconds each: the histogram of asked and returned read sizes and write sizes.
Writes bench/results/tls-sizes-*.json.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results_file import write_results
from rich.console import Console
from rich.table import Table

SCRATCH = 128 * 1024
MIB = 1024 * 1024


def _contexts(tmp: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    from tests.pki import make_pki

    pki = make_pki(tmp / "pki")
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(pki.broker_cert, pki.broker_key)
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cctx.load_verify_locations(pki.ca_cert)
    return sctx, cctx


def _pair(sctx: ssl.SSLContext, cctx: ssl.SSLContext) -> tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.SSLObject,
                                                               ssl.MemoryBIO, ssl.MemoryBIO]:  # fmt: skip
    """A fresh TLS session over memory BIOs: (client, client's outgoing, server, server's in, server's out)."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server = sctx.wrap_bio(s_in, s_out, server_side=True)
    client = cctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    done = {"c": False, "s": False}
    for _ in range(20):
        for name, obj in (("c", client), ("s", server)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            break
    # TLS 1.3 session tickets arrive after the handshake: let the client read them so they are not data.
    c_in.write(s_out.read())
    try:
        client.read(1)
    except ssl.SSLWantReadError:
        pass
    return client, c_out, server, s_in, s_out


def _ciphertext(client: ssl.SSLObject, c_out: ssl.MemoryBIO, total: int, writes: tuple[int, ...]) -> bytes:
    """``total`` bytes written as application writes of the sizes in ``writes``, in turn: each write of up to
    16 KiB is one TLS record."""
    payloads = [os.urandom(w) for w in writes]
    parts = []
    done = 0
    while done < total:
        for p in payloads:
            client.write(p)
            done += len(p)
        if len(parts) % 64 == 0 or done >= total:
            parts.append(c_out.read())
    parts.append(c_out.read())
    return b"".join(parts)


def drain(server: ssl.SSLObject, s_in: ssl.MemoryBIO, wire: bytes, chunk: int) -> dict[str, Any]:
    """Feed ``wire`` in ``chunk``-byte writes to the incoming BIO; after each, read as uvloop does."""
    buf = bytearray(SCRATCH)
    view = memoryview(buf)
    calls = errors = got = 0
    fill = 0
    read = server.read
    t0 = time.perf_counter()
    for pos in range(0, len(wire), chunk):
        s_in.write(wire[pos : pos + chunk])
        try:
            while s_in.pending + server.pending() > 0:
                n = read(SCRATCH - fill, view[fill:])
                calls += 1
                got += n
                fill += n
                if fill == SCRATCH:
                    fill = 0  # the protocol took the frame bytes; the next read starts on an empty buffer
                if n == 0:
                    break
        except ssl.SSLWantReadError:
            errors += 1
    dt = time.perf_counter() - t0
    return {"chunk": chunk, "mb_per_s": round(got / dt / 1e6), "read_calls": calls,
            "bytes_per_call": got // max(calls, 1), "us_per_call": round(dt / max(calls, 1) * 1e6, 2),
            "want_read_errors": errors,
            "ns_per_byte": round(dt / got * 1e9, 3), "plaintext": got}  # fmt: skip


def floors(total: int) -> dict[str, Any]:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    out: dict[str, Any] = {}
    key = AESGCM.generate_key(256)
    aes = AESGCM(key)
    rec = 16 * 1024
    pt = os.urandom(rec)
    nonce = os.urandom(12)
    ct = aes.encrypt(nonce, pt, None)
    n = total // rec
    t0 = time.perf_counter()
    for _ in range(n):
        aes.decrypt(nonce, ct, None)
    out["aes256gcm_decrypt_16KiB_mb_per_s"] = round(n * rec / (time.perf_counter() - t0) / 1e6)
    src = bytearray(os.urandom(MIB))
    dst = bytearray(MIB)
    t0 = time.perf_counter()
    for _ in range(total // MIB):
        dst[:] = src
    out["memcpy_1MiB_mb_per_s"] = round(total / (time.perf_counter() - t0) / 1e6)
    return out


def write_side(server: ssl.SSLObject, s_out: ssl.MemoryBIO) -> list[dict[str, Any]]:
    """One response of ``response`` bytes handed to the TLS layer as pieces of ``piece`` bytes, then the
    outgoing BIO drained once (uvloop: ``_do_write`` over the backlog, then ``_process_outgoing``); best of 3."""
    server.write(os.urandom(MIB))  # the first write also sends the TLS 1.3 session tickets
    s_out.read()
    rows = []
    for response, pieces_of in ((256 * 1024, (64, 1024, 16384)), (10 * MIB, (1024, 16384, MIB))):
        for piece in (*pieces_of, response):
            data = os.urandom(piece)
            pieces = [data] * (response // piece)
            for how in ("each piece", "joined") if piece < response else ("whole",):
                best = float("inf")
                wire = 0
                for _ in range(3):
                    t0 = time.perf_counter()
                    if how == "joined":
                        server.write(b"".join(pieces))
                    else:
                        for p in pieces:
                            server.write(p)
                    wire = len(s_out.read())
                    best = min(best, time.perf_counter() - t0)
                rows.append({"response": response, "piece": piece, "how": how, "mb_per_s": round(response / best / 1e6),
                             "wire_overhead_pct": round(100 * (wire - response) / response, 1)})  # fmt: skip
    return rows


def bio_experiment(mib: int) -> dict[str, Any]:
    """Every case on a TLS session of its own: a record decrypts once, in sequence."""
    total = mib * MIB
    with tempfile.TemporaryDirectory(prefix="tls-sizes-") as tmp:
        sctx, cctx = _contexts(Path(tmp))
        res: dict[str, Any] = {"plaintext_bytes": total, "read": []}
        # 1 MiB writes: full 16 KiB records; 16 B + 1008 B: the records librdkafka sent a broker producing
        # 1 KiB messages over SASL_SSL (this script's broker part counted them), one per message piece.
        for writes in ((MIB,), (16, 1008)):
            for chunk in (4096, 16384, 65536, 262144) if writes == (MIB,) else (65536, 262144):
                client, c_out, server, s_in, _ = _pair(sctx, cctx)
                wire = _ciphertext(client, c_out, total if writes == (MIB,) else total // 4, writes)
                res["cipher"] = server.cipher()
                row = drain(server, s_in, wire, chunk)
                row["records_written"] = "+".join(map(str, writes))
                res["read"].append(row)
        res["floors"] = floors(total)
        _, _, server, _, s_out = _pair(sctx, cctx)
        res["write"] = write_side(server, s_out)
    return res


def broker_experiment(seconds: float) -> dict[str, Any]:
    """SSLObject call sizes inside a real broker (counted by bench/ssl_sizes/sitecustomize.py)."""
    from produce_consume import create_topic
    from profile_paths import consume_for, produce_for
    from tests.integration.security_node import ALICE_PASSWORD, start_secure_node

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tls-sizes-broker-") as tmp:
        counts = Path(tmp) / "ssl-sizes.json"
        saved = dict(os.environ)
        here = Path(__file__).resolve().parent / "ssl_sizes"
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(here), os.environ.get("PYTHONPATH")]))
        os.environ["EPOCHLOG_SSL_SIZES"] = str(counts)
        try:
            node = start_secure_node(Path(tmp))
        finally:
            os.environ.clear()
            os.environ.update(saved)
        try:
            conf = node.librdkafka_sasl_ssl("alice", ALICE_PASSWORD)
            topic = f"sizes-{uuid.uuid4().hex[:8]}"
            create_topic(conf["bootstrap.servers"], topic, client_conf=conf)
            for phase in ("produce", "consume"):
                before = json.loads(counts.read_text()) if counts.exists() else {}
                if phase == "produce":
                    load = produce_for(conf["bootstrap.servers"], topic, 1024, seconds, None, conf=conf)
                    end = load["msgs"] + 1
                else:
                    load = consume_for(conf["bootstrap.servers"], topic, end, 1024, seconds, None, conf=conf)
                time.sleep(1.5)  # the broker writes its counts every second
                after = json.loads(counts.read_text())
                out[phase] = {"load": load, "counts": _minus(after, before)}
        finally:
            node.broker.stop()
    return out


def _minus(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    def sub(a: Any, b: Any) -> Any:
        if isinstance(a, dict):
            return {k: sub(v, (b or {}).get(k, 0)) for k, v in a.items() if sub(v, (b or {}).get(k, 0))}
        return a - (b or 0)

    return sub(after, before)  # type: ignore[no-any-return]


def show(res: dict[str, Any]) -> None:
    c = Console(width=140)
    if "bio" in res:
        b = res["bio"]
        t = Table(title=f"broker-side SSLObject.read, {b['plaintext_bytes'] // MIB} MiB, {b['cipher']}; {b['floors']}")
        for col in ("app writes", "chunk", "mb_per_s", "read_calls", "bytes_per_call", "us_per_call", "want_read"):
            t.add_column(col, justify="right")
        for r in b["read"]:
            cells = [f"{r[k]:,}" for k in ("chunk", "mb_per_s", "read_calls", "bytes_per_call")]
            t.add_row(r["records_written"], *cells,
                      str(r["us_per_call"]), f"{r['want_read_errors']:,}")  # fmt: skip
        c.print(t)
        t = Table(title="SSLObject.write: one call per piece (uvloop's writelines) or joined first")
        for col in ("response", "piece", "how", "mb_per_s", "wire_overhead_pct"):
            t.add_column(col, justify="right")
        for r in b["write"]:
            t.add_row(f"{r['response']:,}", f"{r['piece']:,}", r["how"], f"{r['mb_per_s']:,}",
                      str(r["wire_overhead_pct"]))  # fmt: skip
        c.print(t)
    for phase, r in res.get("broker", {}).items():
        calls, nbytes = r["counts"].get("calls", {}), r["counts"].get("bytes", {})
        c.print(f"broker {phase}: {r['load']['msgs_per_s']:,} msgs/s; calls {calls}; bytes {nbytes}")
        for k, h in r["counts"].get("histograms", {}).items():
            c.print(f"  {k}: " + ", ".join(f"<={int(s):,}: {n:,}" for s, n in h.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--broker-seconds", type=float, default=5)
    ap.add_argument("--skip", default="")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    res: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "args": vars(args),
                           "openssl": ssl.OPENSSL_VERSION}  # fmt: skip
    if "bio" not in skip:
        res["bio"] = bio_experiment(args.mib)
    if "broker" not in skip:
        res["broker"] = broker_experiment(args.broker_seconds)
    show(res)
    write_results("tls-sizes", res)


if __name__ == "__main__":
    main()

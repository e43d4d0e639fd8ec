"""What security costs: produce and consume throughput over SASL_SSL (SCRAM-SHA-512, TLS) against
PLAINTEXT, on the same node in the same run.

  .venv/bin/python bench/security_bench.py [--rounds 3] [--count 200000] [--size 1024]

One node serves both listeners (tests/integration/security_node.py builds it, with the test PKI). Each
round produces ``count`` messages with acks=all over each listener, the order alternating by round,
then consumes each topic back over the listener it was written through. Only acknowledged messages
count. Prints medians and the SASL_SSL / PLAINTEXT ratios; writes JSON to bench/results/.

The peers of bench/brokers.py are not run: neither serves SASL_SSL from its PyPI package.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: tests/ builds the node

from proc_cpu import cpu_seconds
from produce_consume import consume_throughput, produce_throughput
from results_file import write_results
from rich.console import Console
from rich.table import Table
from tests.integration.security_node import ALICE_PASSWORD, start_secure_node


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args()

    rows: dict[str, list[dict[str, Any]]] = {"PLAINTEXT": [], "SASL_SSL": []}
    with tempfile.TemporaryDirectory(prefix="security-bench-") as tmp:
        node = start_secure_node(Path(tmp))
        try:
            secured = node.librdkafka_sasl_ssl("alice", ALICE_PASSWORD)
            confs = {"PLAINTEXT": {"bootstrap.servers": node.plaintext}, "SASL_SSL": secured}
            for r in range(args.rounds):
                order = ["PLAINTEXT", "SASL_SSL"] if r % 2 == 0 else ["SASL_SSL", "PLAINTEXT"]
                for name in order:
                    conf = confs[name]
                    bootstrap = conf["bootstrap.servers"]
                    pid = node.broker.proc.pid  # type: ignore[union-attr]
                    cpu0 = cpu_seconds(pid)
                    prod = produce_throughput(bootstrap, args.size, args.count, "all", client_conf=conf)
                    cpu1 = cpu_seconds(pid)
                    cons = consume_throughput(
                        bootstrap, prod["topic"], prod["msgs"], args.size, from_first_message=True, client_conf=conf
                    )
                    cpu2 = cpu_seconds(pid)
                    # Topic creation and the consumer's group join fall inside these spans: a fixed cost.
                    prod["broker_cpu_us_per_msg"] = round((cpu1 - cpu0) / max(prod["msgs"], 1) * 1e6, 3)
                    cons["broker_cpu_us_per_msg"] = round((cpu2 - cpu1) / max(cons["msgs"], 1) * 1e6, 3)
                    rows[name].append({"round": r, "produce": prod, "consume": cons})
                    print(
                        f"round {r} {name}: produce {prod['msgs_per_s']:,.0f} msg/s "
                        f"({prod['msgs']} acked), consume {cons['msgs_per_s']:,.0f} msg/s; broker CPU "
                        f"{prod['broker_cpu_us_per_msg']} / {cons['broker_cpu_us_per_msg']} us/msg",
                        file=sys.stderr,
                    )
        finally:
            node.broker.stop()

    def med(name: str, kind: str, field: str = "msgs_per_s") -> float:
        return statistics.median(x[kind][field] for x in rows[name])

    title = f"SASL_SSL (SCRAM-SHA-512) vs PLAINTEXT, {args.size} B messages, acks=all, median of {args.rounds}"
    table = Table(title=title)
    table.add_column("case")
    table.add_column("PLAINTEXT msg/s", justify="right")
    table.add_column("SASL_SSL msg/s", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column("broker CPU us/msg, PLAINTEXT / SASL_SSL", justify="right")
    summary: dict[str, Any] = {}
    for kind in ("produce", "consume"):
        plain, sec = med("PLAINTEXT", kind), med("SASL_SSL", kind)
        cpu = "broker_cpu_us_per_msg"
        cpu_plain, cpu_sec = med("PLAINTEXT", kind, cpu), med("SASL_SSL", kind, cpu)
        summary[kind] = {
            "plaintext_msgs_per_s": plain,
            "sasl_ssl_msgs_per_s": sec,
            "ratio": sec / plain,
            f"plaintext_{cpu}": cpu_plain,
            f"sasl_ssl_{cpu}": cpu_sec,
        }
        table.add_row(kind, f"{plain:,.0f}", f"{sec:,.0f}", f"{sec / plain:.2f}x", f"{cpu_plain} / {cpu_sec}")
    Console().print(table)
    write_results(
        "security",
        {
            "args": vars(args),
            "summary": summary,
            "rounds": rows,
            "mechanism": "SCRAM-SHA-512",
            "tls": "TLSv1.3",
            "loadavg": os.getloadavg(),
        },
    )


if __name__ == "__main__":
    main()

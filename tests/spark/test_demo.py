"""`epochlog demo` end to end, short: 3 controllers and 3 brokers, a leader and the active controller killed,
Spark into Parquet, nothing lost."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)


def _processes_mentioning(text: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, timeout=30).stdout
    return [line for line in out.splitlines() if text in line and "ps -eo" not in line]


def test_demo_short_run(tmp_path: Path) -> None:
    data, report = tmp_path / "data", tmp_path / "report.html"
    cmd = [
        sys.executable,
        "-m",
        "epochlog.cli.main",
        "demo",
        "--duration",
        "30",
        "--rate",
        "500",
        "--data-dir",
        str(data),
        "--report",
        str(report),
    ]
    started = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    took = time.monotonic() - started
    out = r.stdout
    assert r.returncode == 0, f"exit {r.returncode}\n{out[-4000:]}\n{r.stderr[-4000:]}"
    assert "lost: 0\n" in out, out
    assert "duplicated: 0\n" in out, out
    assert "kill -9 broker-" in out, out
    assert "-> broker-" in out, out  # a leader change was seen, with epochs
    assert "the active controller" in out and "controller failover: controller" in out, out
    assert "PROBLEM" not in out, out
    # The exactly-once copy through the sink, read with read_committed, and the brokers' transaction count.
    assert "into page-views-eos, read with read_committed: " in out and "(lost: 0, duplicated: 0;" in out, out
    traced = re.search(r"trace invariants: ([0-9,]+) checks over ([0-9,]+) events .*, 0 violations", out)
    assert traced and int(traced.group(1).replace(",", "")) > 0, out
    committed = re.search(r"transactions committed: ([0-9,]+), aborted: ([0-9,]+)", out)
    assert committed and int(committed.group(1).replace(",", "")) > 0, out

    page = report.read_text()
    assert "<svg" in page and "kill -9 broker-" in page and "lost: 0" in page
    assert "controller failover" in page
    assert "transactions committed / aborted" in page and "read_committed" in page

    # The output is real Parquet, readable without Spark.
    assert list((data / "spark" / "raw").glob("batch=*/*.parquet"))
    assert list((data / "spark" / "country_counts_10s").glob("batch=*/*.parquet"))

    # Progress lines while streaming, and every process the demo started is gone.
    assert out.count("producer: sent") >= 3, out
    assert _processes_mentioning(str(data)) == []
    assert took < 200, f"the demo took {took:.0f} s"

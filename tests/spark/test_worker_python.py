"""A user's own script, run with the venv's python and no PYSPARK_PYTHON: Spark would start its Python
workers with `python3` from PATH, which cannot import epochlog. `register()` says so, and what to set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.conftest import code_under_test_path

pytestmark = pytest.mark.timeout(300)

# The user's script: their own session, then register(). The code under test comes in through sys.path, not
# PYTHONPATH, which Spark's workers would inherit: as for a user whose epochlog is installed in a venv.
SCRIPT = """
import json, os, sys, warnings
sys.path.insert(0, {src!r})
from pyspark.sql import SparkSession
import epochlog.spark

def session_warnings():
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            epochlog.spark.register(spark)
        return [str(w.message) for w in caught if w.category.__name__ == "WorkerPythonWarning"]
    finally:
        spark.stop()

before = session_warnings()
os.environ["PYSPARK_PYTHON"] = sys.executable  # what the warning says to do
after = session_warnings()
print(json.dumps({{"before": before, "after": after}}))
"""


def test_register_says_the_workers_python_cannot_import_epochlog(tmp_path: Path) -> None:
    # python3 on PATH is a Python without epochlog (the system one), as on a machine where only the venv has it.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to("/usr/bin/python3")
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    probe = subprocess.run(["python3", "-c", "import epochlog"], capture_output=True, timeout=60, env=env)
    if probe.returncode == 0:
        pytest.skip("/usr/bin/python3 imports epochlog here: no Python without it to stand for the user's python3")
    env.setdefault("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(src=code_under_test_path())],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    [message] = result["before"]
    assert "Spark's Python workers run 'python3' (PySpark's default: PYSPARK_PYTHON was not set" in message, message
    assert f"{bin_dir / 'python3'} cannot import epochlog" in message, message
    assert f"PYSPARK_PYTHON={sys.executable}" in message, message
    assert result["after"] == [], "with PYSPARK_PYTHON set to this interpreter there is nothing to say"

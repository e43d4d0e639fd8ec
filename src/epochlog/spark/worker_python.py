"""Which Python runs a session's Spark workers, and whether it can import epochlog.

PySpark starts its Python workers (the data source's readers and writers among them) with the interpreter
the SparkContext was created with: PYSPARK_PYTHON as it was then, else ``python3`` from PATH. A script run
with a virtualenv's python and no PYSPARK_PYTHON therefore gets workers that run the system python3, which
has no epochlog, and every query fails inside them with ``ModuleNotFoundError: No module named 'epochlog'``.
``register`` checks once, up front, and says what to set.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from typing import Any

CHECK_TIMEOUT_S = 30.0
_checked: dict[tuple[str, str], str | None] = {}  # (interpreter, PYTHONPATH) -> the problem, if any


class WorkerPythonWarning(UserWarning):
    """Spark's Python workers would not be able to import epochlog."""


def worker_python(spark: Any) -> tuple[str, str]:
    """(the interpreter the session's Python workers run, where that choice came from)."""
    try:
        exe = spark.sparkContext.pythonExec  # what PySpark hands the JVM for every Python worker
    except Exception:  # a Spark Connect session has no SparkContext here: go by what would set it
        exe = None
    if exe:
        if os.environ.get("PYSPARK_PYTHON") == exe:
            return str(exe), "PYSPARK_PYTHON"
        if exe == "python3":
            return str(exe), "PySpark's default: PYSPARK_PYTHON was not set when the session was created"
        return str(exe), "the SparkContext's pythonExec"
    try:
        conf = spark.conf.get("spark.pyspark.python", None)
    except Exception:
        conf = None
    if conf:
        return str(conf), "spark.pyspark.python"
    if os.environ.get("PYSPARK_PYTHON"):
        return os.environ["PYSPARK_PYTHON"], "PYSPARK_PYTHON"
    return "python3", "PySpark's default: PYSPARK_PYTHON is not set"


def import_problem(exe: str, timeout: float = CHECK_TIMEOUT_S) -> str | None:
    """Why ``exe``, run as Spark runs its workers (this process's environment), cannot import epochlog;
    None when it can."""
    path = shutil.which(exe)
    key = (path or exe, os.environ.get("PYTHONPATH", ""))
    if key in _checked:
        return _checked[key]
    problem: str | None
    if path is None:
        problem = f"{exe!r} is not found on PATH"
    elif os.path.abspath(path) == os.path.abspath(sys.executable):
        # This very interpreter, which has imported epochlog. Not resolved through symlinks: a venv's
        # python links to the system one, and only its own path makes it the venv.
        problem = None
    else:
        try:
            r = subprocess.run(
                [path, "-c", "import epochlog"], capture_output=True, text=True, timeout=timeout, env=os.environ
            )
        except subprocess.TimeoutExpired:
            problem = f"`{path} -c 'import epochlog'` did not finish within {timeout:g} s"
        except OSError as e:
            problem = f"{path} cannot be run: {e}"
        else:
            last = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
            problem = None if r.returncode == 0 else f"{path} cannot import epochlog ({last})"
    _checked[key] = problem
    return problem


def check(spark: Any) -> str | None:
    """Warn (WorkerPythonWarning) when the session's Python workers cannot import epochlog; the message, or
    None when they can. Only for local masters: a cluster's executors find the interpreter on their own
    machines, which this one cannot check."""
    try:
        master = str(spark.sparkContext.master)
    except Exception:
        master = ""
    if master and not master.startswith("local"):
        return None
    exe, source = worker_python(spark)
    problem = import_problem(exe)
    if problem is None:
        return None
    message = (
        f"Spark's Python workers run {exe!r} ({source}), and {problem}: every epochlog query would fail in "
        f"them with ModuleNotFoundError. Set PYSPARK_PYTHON to this interpreter before the session is "
        f"created, e.g. `PYSPARK_PYTHON={sys.executable} python your_script.py`, or "
        f"os.environ['PYSPARK_PYTHON'] = sys.executable before SparkSession.builder...getOrCreate() "
        f"(spark-submit: --conf spark.pyspark.python={sys.executable})."
    )
    warnings.warn(message, WorkerPythonWarning, stacklevel=3)
    return message

"""The streaming sink is exactly-once for read_committed readers through kill -9 of the driver and task failures.

Each test streams a source topic into a sink topic from a separate driver process (tests/spark/sink_query.py)
with two micro-batches of two tasks each. The sink's test hook (EPOCHLOG_SINK_FAULT) stops partition 0 of
batch 1 (or the driver's commit of batch 1) at a named step; the test then kill -9s the driver's whole
process tree (the Python driver, Spark's JVM and its Python workers: every process in the session the test
started), restarts the query on the same checkpoint, and reads the sink topic with a read_committed consumer:
every input row must be there exactly once. The negative controls run the same crashes with the marker check
switched off (EPOCHLOG_SINK_TEST_NO_MARKER_CHECK), or without transactions (EPOCHLOG_SINK_TEST_NO_TRANSACTIONS),
and must see duplicates: the check and the transactions are what pass the tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import epochlog
from epochlog.spark.sink import FAULT_ENV, FAULT_FILE_ENV, NO_MARKER_CHECK_ENV, NO_TRANSACTIONS_ENV
from tests.spark.conftest import make_topic, produce

pytestmark = pytest.mark.timeout(420)

SCRIPT = Path(__file__).with_name("sink_query.py")
SRC_DIR = str(Path(epochlog.__file__).resolve().parents[1])  # the code under test, also for Spark's workers
ROWS_PER_PARTITION = 40


def _env(
    fault: str | None = None,
    fault_file: Path | None = None,
    no_marker_check: bool = False,
    no_transactions: bool = False,
) -> dict[str, str]:
    hooks = (FAULT_ENV, FAULT_FILE_ENV, NO_MARKER_CHECK_ENV, NO_TRANSACTIONS_ENV)
    env = {k: v for k, v in os.environ.items() if k not in hooks}
    env["PYTHONPATH"] = SRC_DIR
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if fault:
        assert fault_file is not None
        env[FAULT_ENV] = fault
        env[FAULT_FILE_ENV] = str(fault_file)
    if no_marker_check:
        env[NO_MARKER_CHECK_ENV] = "1"
    if no_transactions:
        env[NO_TRANSACTIONS_ENV] = "1"
    return env


def _start(args: list[str], env: dict[str, str], log: Path, master: str = "local[2]") -> subprocess.Popen[bytes]:
    cmd = [sys.executable, str(SCRIPT), *args, "--max-per-trigger", str(ROWS_PER_PARTITION), "--master", master]
    with log.open("ab") as out:
        # Its own session: the driver, its JVM and the JVM's Python workers share the session id = this pid.
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _session_pids(sid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,sid="], capture_output=True, text=True, timeout=30).stdout
    return [int(p) for p, s in (line.split() for line in out.splitlines() if line.strip()) if int(s) == sid]


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """kill -9 of every process in the session started for `proc` (only processes this test started)."""
    for pid in _session_pids(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(30)
    deadline = time.monotonic() + 30
    while _session_pids(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _session_pids(proc.pid), "processes of the killed driver are still running"


def _run_to_end(args: list[str], env: dict[str, str], log: Path, master: str = "local[2]") -> dict[str, Any]:
    proc = _start(args, env, log, master)
    try:
        proc.wait(300)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        raise AssertionError(f"the driver did not finish; see {log}") from None
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, f"driver exit {proc.returncode}:\n{text[-5000:]}"
    line = [x for x in text.splitlines() if x.startswith('{"query"')][-1]
    return dict(json.loads(line))


def _crash_at(args: list[str], fault: str, fault_file: Path, log: Path, **hooks: bool) -> dict[str, Any]:
    """Run until the hook pauses at `fault`, then kill -9 the driver's process tree."""
    proc = _start(args, _env(fault, fault_file, **hooks), log)
    try:
        deadline = time.monotonic() + 240
        while not fault_file.exists():
            assert proc.poll() is None, f"driver ended before the fault:\n{log.read_text(errors='replace')[-5000:]}"
            assert time.monotonic() < deadline, f"fault {fault} never reached; see {log}"
            time.sleep(0.2)
        time.sleep(0.5)  # the hook has written its note and is sleeping
    finally:
        _kill_tree(proc)
    return dict(json.loads(fault_file.read_text()))


def _read(bootstrap: str, topic: str, isolation: str, timeout: float = 60.0) -> list[bytes]:
    """Every value of a one-partition topic up to its end for this isolation level."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    try:
        _, end = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        pos, deadline = 0, time.monotonic() + timeout
        while pos < end:
            assert time.monotonic() < deadline, f"{topic}: read {pos} of {end} ({isolation})"
            for m in c.consume(1000, 0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        pos = max(pos, m.offset())
                    continue
                out.append(bytes(m.value()))
                pos = m.offset() + 1
        return out
    finally:
        c.close()


def _setup(bootstrap: str, tmp_path: Path) -> tuple[list[str], list[bytes]]:
    src = make_topic(bootstrap, partitions=2, prefix="eos-src")
    dst = make_topic(bootstrap, partitions=1, prefix="eos-dst")
    values: list[bytes] = []
    for p in range(2):
        vs = [b"p%d-%03d" % (p, i) for i in range(ROWS_PER_PARTITION)]
        produce(bootstrap, src, vs, partition=p)
        values += vs
    return [bootstrap, src, dst, str(tmp_path / "ckpt")], values


def _duplicates(got: list[bytes]) -> int:
    return len(got) - len(set(got))


# A driver kill and restart takes 35-55 s: the default run kills just after a task's commit (committed, never
# reported: the replay must find the marker); EPOCHLOG_LONG=1 runs every step and the negative controls
# (docs/spark.md).
LONG = pytest.mark.skipif(not os.environ.get("EPOCHLOG_LONG"), reason="a long Spark fault run; EPOCHLOG_LONG=1")
CRASH_STEPS = [
    pytest.param("before_marker:pause:1:0", True, marks=LONG),  # rows in an open transaction: aborted at restart
    pytest.param("before_task_commit:pause:1:0", True, marks=LONG),  # rows and marker in an open transaction
    ("after_task_commit:pause:1:0", False),  # committed, never reported: the replay finds the marker
    pytest.param("before_driver_commit:pause:1", False, marks=LONG),  # every task committed, the batch not
    pytest.param("after_driver_commit:pause:1", False, marks=LONG),  # batch marker written, Spark's commit log not
]


def _step_id(p: object) -> str:
    fault = p.values[0] if hasattr(p, "values") else p[0]  # type: ignore[index]
    return str(fault).split(":")[0]


@pytest.mark.parametrize(("fault", "leaves_open_txn"), CRASH_STEPS, ids=[_step_id(p) for p in CRASH_STEPS])
def test_driver_killed_at_step_then_restarted(
    bootstrap: str, tmp_path: Path, fault: str, leaves_open_txn: bool
) -> None:
    args, values = _setup(bootstrap, tmp_path)
    note = _crash_at(args, fault, tmp_path / "fault.json", tmp_path / "run1.log")
    assert note["batch"] == 1 and note["step"] == fault.split(":")[0]
    res = _run_to_end(args, _env(), tmp_path / "run2.log")
    assert res["epochlog"].startswith(SRC_DIR), res  # the driver ran the code under test
    assert 1 in res["batches"], res  # batch 1 was replayed (Spark had not committed it)

    got = _read(bootstrap, args[2], "read_committed")
    assert _duplicates(got) == 0 and sorted(got) == sorted(values), (len(got), len(values))
    raw = _read(bootstrap, args[2], "read_uncommitted")
    if leaves_open_txn:
        # The killed attempt's rows are in the log, aborted: read_uncommitted sees them, read_committed not.
        assert len(raw) > len(values), (len(raw), len(values))


@LONG
def test_without_marker_check_replay_duplicates(bootstrap: str, tmp_path: Path) -> None:
    """Negative control: the same crash (task committed, never reported), replayed with the marker check
    switched off by the test hook, writes partition 0's rows of batch 1 a second time (and partition 1's too
    when its task had also committed before the kill)."""
    args, values = _setup(bootstrap, tmp_path)
    _crash_at(args, "after_task_commit:pause:1:0", tmp_path / "fault.json", tmp_path / "run1.log")
    _run_to_end(args, _env(no_marker_check=True), tmp_path / "run2.log")
    got = _read(bootstrap, args[2], "read_committed")
    assert set(got) == set(values)
    twice = {v for v in got if got.count(v) == 2}
    batch1_p0 = {b"p0-%03d" % i for i in range(ROWS_PER_PARTITION // 2, ROWS_PER_PARTITION)}
    assert batch1_p0 <= twice, sorted(twice)
    assert _duplicates(got) in (ROWS_PER_PARTITION // 2, ROWS_PER_PARTITION), _duplicates(got)


@LONG
def test_without_transactions_killed_before_marker_duplicates(bootstrap: str, tmp_path: Path) -> None:
    """Negative control for the transactions: the sink as it was before them (test hook: idempotent writes,
    then the marker) killed between its flushed rows and its marker. The replay finds no marker for
    partition 0 and writes its rows again; the same crash with transactions (test_driver_killed_at_step_then_
    restarted[before_marker]) leaves them in an aborted transaction instead."""
    args, values = _setup(bootstrap, tmp_path)
    _crash_at(args, "before_marker:pause:1:0", tmp_path / "fault.json", tmp_path / "run1.log", no_transactions=True)
    _run_to_end(args, _env(no_transactions=True), tmp_path / "run2.log")
    got = _read(bootstrap, args[2], "read_committed")
    assert set(got) == set(values)
    twice = {v for v in got if got.count(v) == 2}
    assert twice == {b"p0-%03d" % i for i in range(ROWS_PER_PARTITION // 2, ROWS_PER_PARTITION)}, sorted(twice)


TASK_FAILURES = [
    # the failed attempt's open transaction is aborted by the retry's init (long tier: the default run's time)
    pytest.param("before_task_commit", True, 0, marks=LONG),
    ("after_task_commit", True, 0),  # the failed attempt committed: the retry finds its marker
    # negative control: no marker check, 20 rows twice (long tier: it proves the check matters, the case above
    # that it works)
    pytest.param("after_task_commit", False, ROWS_PER_PARTITION // 2, marks=LONG),
]


@pytest.mark.parametrize(
    ("step", "marker_check", "duplicates"),
    TASK_FAILURES,
    ids=["before_task_commit", "after_task_commit", "after_task_commit-no_marker_check"],
)
def test_task_failure_retried_by_spark(
    bootstrap: str, tmp_path: Path, step: str, marker_check: bool, duplicates: int
) -> None:
    """A task of batch 1 raises at `step` inside Spark (local[2,4]: up to 4 attempts); its retry has the same
    transactional.id, so the failed attempt's open transaction is aborted, or its committed one is found."""
    args, values = _setup(bootstrap, tmp_path)
    fault_file = tmp_path / "fault.json"
    env = _env(f"{step}:raise:1:0", fault_file, no_marker_check=not marker_check)
    res = _run_to_end(args, env, tmp_path / "run.log", master="local[2,4]")
    assert fault_file.exists() and res["error"] is None, res
    assert "injected sink fault at " + step in (tmp_path / "run.log").read_text(errors="replace")
    got = _read(bootstrap, args[2], "read_committed")
    assert set(got) == set(values)
    assert _duplicates(got) == duplicates, (_duplicates(got), len(got), len(values))
    if step == "before_task_commit":
        assert len(_read(bootstrap, args[2], "read_uncommitted")) > len(values)  # the aborted attempt's rows


@LONG
def test_worker_process_dies_then_retried(bootstrap: str, tmp_path: Path) -> None:
    """The Python worker running partition 0 of batch 1 exits mid-transaction (os._exit, like a kill of that
    process): Spark retries the task, whose init_transactions aborts the dead attempt's transaction."""
    args, values = _setup(bootstrap, tmp_path)
    fault_file = tmp_path / "fault.json"
    res = _run_to_end(args, _env("before_task_commit:exit:1:0", fault_file), tmp_path / "run.log", "local[2,4]")
    assert fault_file.exists() and res["error"] is None, res
    got = _read(bootstrap, args[2], "read_committed")
    assert _duplicates(got) == 0 and sorted(got) == sorted(values), (len(got), len(values))
    assert len(_read(bootstrap, args[2], "read_uncommitted")) > len(values)


@pytest.mark.parametrize(
    ("zombie_pauses_at", "zombie_fenced"),
    [("after_init", False), ("before_marker", True), ("before_task_commit", True)],
    ids=["after_init", "before_marker", "before_task_commit"],
)
def test_zombie_attempt_is_fenced(
    bootstrap: str, zombie_pauses_at: str, zombie_fenced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two attempts of one partition of one batch at once (a speculative copy, or an attempt Spark gave up
    on): the zombie stops at a step, the second attempt runs whole, then the zombie goes on. Stopped before
    its marker read, the zombie finds the second attempt's marker and writes nothing; stopped inside its
    transaction, it was fenced by the second attempt's init_transactions (its transaction aborted, its
    commit refused). Either way the rows are in once."""
    import threading

    import pyarrow as pa

    from epochlog.spark import sink
    from epochlog.spark.options import parse_sink_options

    dst = make_topic(bootstrap, prefix="eos-zombie")
    opts = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": dst})
    sink._ensure_commit_topic(opts)
    query = f"zombie-{uuid.uuid4().hex[:8]}"
    values = [b"z-%02d" % i for i in range(10)]

    def batches() -> Any:
        yield pa.RecordBatch.from_pydict({"value": pa.array(values, pa.binary())})

    reached, resume = threading.Event(), threading.Event()
    zombie = threading.current_thread().name + "-zombie"

    def hook(step: str, batch_id: int, partition: int) -> None:
        if threading.current_thread().name == zombie and step == zombie_pauses_at:
            reached.set()
            assert resume.wait(60)

    monkeypatch.setattr(sink, "fault_point", hook)
    outcome: list[Any] = []

    def run_zombie() -> None:
        try:
            outcome.append(sink.write_task_transactional(opts, batches(), query, 3, 0))
        except Exception as e:
            outcome.append(e)

    t = threading.Thread(target=run_zombie, name=zombie)
    t.start()
    assert reached.wait(60)
    second = sink.write_task_transactional(opts, batches(), query, 3, 0)
    assert second.rows == len(values) and not second.skipped
    resume.set()
    t.join(120)
    assert not t.is_alive()
    assert len(outcome) == 1, outcome
    if zombie_fenced:
        assert isinstance(outcome[0], Exception), outcome
        assert "fenced" in str(outcome[0]).lower() or "epoch" in str(outcome[0]).lower(), outcome[0]
    else:
        assert outcome[0] == sink.TaskResult(0, True), outcome
    got = _read(bootstrap, dst, "read_committed")
    assert sorted(got) == sorted(values)
    # A third attempt (a retry after both) finds the marker and writes nothing.
    third = sink.write_task_transactional(opts, batches(), query, 3, 0)
    assert third.skipped and third.rows == 0
    assert sorted(_read(bootstrap, dst, "read_committed")) == sorted(values)

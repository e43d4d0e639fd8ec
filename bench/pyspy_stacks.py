"""py-spy on running processes, and its collapsed stacks (`--format raw`) folded into top-function tables.

py-spy is not a project dependency: install it outside the project venv,
  python3 -m venv /tmp/pyspy && /tmp/pyspy/bin/pip install py-spy
and point EPOCHLOG_PY_SPY (or --py-spy) at the binary (default /tmp/pyspy/bin/py-spy). It needs ptrace
rights on the target (root, or kernel.yama.ptrace_scope=0 for a child).

py-spy's own idle filter (sampling without --idle) proved unreliable here: on this VM it kept 16% of the
samples of a process that only slept in epoll and in a condition wait. So the brokers are sampled with
``--native --idle`` and the idle samples are dropped here, by their native leaf (epoll_wait, a futex or
condition wait, the GIL's wait, ...): what is left estimates on-CPU time, and the tables say how its count
compares with the CPU seconds /proc gave the process. Without ``classify`` (the Spark workers, sampled with
line numbers and no native frames) every sample counts: a wall-clock view, for phases that mostly wait.
"""

from __future__ import annotations

import gzip
import os
import re
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proc_cpu import cpu_seconds
from rich.console import Console
from rich.table import Table

PY_SPY = os.environ.get("EPOCHLOG_PY_SPY", "/tmp/pyspy/bin/py-spy")
_FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")
_ADDRESS = re.compile(r"^0x[0-9a-f]+$")
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Spy:
    """One py-spy attached to one process, writing collapsed stacks to ``out``."""

    name: str
    pid: int
    out: Path
    proc: subprocess.Popen[bytes] | None = None
    cpu0: float = 0.0
    t0: float = 0.0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    log: str = ""
    user_sys0: tuple[float, float] = (0.0, 0.0)
    sys_s: float = 0.0


@dataclass
class Recording:
    """py-spy on several processes at once (the brokers of a cluster), started and stopped together."""

    pids: dict[str, int]
    out_dir: Path
    case: str
    rate: int = 100
    native: bool = True
    idle: bool = True
    lines: bool = False
    subprocesses: bool = False
    spies: list[Spy] = field(default_factory=list)

    def start(self) -> Recording:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for name, pid in self.pids.items():
            self.attach(name, pid)
        return self

    def attach(self, name: str, pid: int) -> None:
        out = self.out_dir / f"{self.case}-{name}.txt"
        args = [PY_SPY, "record", "-p", str(pid), "--format", "raw", "-o", str(out), "-r", str(self.rate)]
        if not self.lines:
            args.append("--nolineno")
        if self.native:
            args.append("--native")
        if self.idle:
            args.append("--idle")
        if self.subprocesses:
            args.append("--subprocesses")
        logf = out.with_suffix(".log")
        spy = Spy(name, pid, out, cpu0=_cpu_or_zero(pid), t0=time.monotonic())
        with open(logf, "wb") as lf:
            spy.proc = subprocess.Popen(args, stdout=lf, stderr=subprocess.STDOUT)
        spy.log = str(logf)
        # Attached once it says so: the load must not start before the sampling does.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and spy.proc.poll() is None:
            if b"Sampling process" in logf.read_bytes():
                break
            time.sleep(0.05)
        spy.cpu0, spy.t0, spy.user_sys0 = _cpu_or_zero(pid), time.monotonic(), _user_sys(pid)
        self.spies.append(spy)

    def stop(self) -> None:
        for spy in self.spies:
            spy.cpu_s = _cpu_or_zero(spy.pid) - spy.cpu0
            spy.sys_s = _user_sys(spy.pid)[1] - spy.user_sys0[1]
            spy.wall_s = time.monotonic() - spy.t0
            if spy.proc is not None and spy.proc.poll() is None:
                spy.proc.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
        for spy in self.spies:
            if spy.proc is None:
                continue
            try:
                spy.proc.wait(60)
            except subprocess.TimeoutExpired:
                spy.proc.kill()
                spy.proc.wait(10)

    def __enter__(self) -> Recording:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def summaries(self, top: int = 15) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for spy in self.spies:
            if spy.out.exists():
                s = summarize(spy.out, top, classify=self.native)
            else:
                s = {"samples": 0, "error": _tail(spy.log)}
            s.update(pid=spy.pid, cpu_s=round(spy.cpu_s, 2), sys_s=round(spy.sys_s, 2), wall_s=round(spy.wall_s, 2),
                     rate=self.rate, native=self.native, idle=self.idle, file=spy.out.name)  # fmt: skip
            out[spy.name] = s
        return out


def _cpu_or_zero(pid: int) -> float:
    try:
        return cpu_seconds(pid)
    except (OSError, IndexError, ValueError):
        return 0.0


def _user_sys(pid: int) -> tuple[float, float]:
    """User and system (kernel: the syscalls' own work) CPU seconds of ``pid`` so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) / _TICK, int(fields[12]) / _TICK
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0


def _tail(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")[-400:]
    except OSError:
        return ""


def frame_key(frame: str) -> tuple[str, str]:
    """(module, function) of one collapsed frame: ``fn (path/to/file.py)`` or a native ``sym (lib.so)``."""
    m = _FRAME.match(frame)
    if not m:
        return "?", frame
    fn, path = m["fn"], m["file"]
    if _ADDRESS.match(fn):
        fn = "?"  # an unresolved native address: one bucket per library
    module = path[:-3].replace("/", ".") if path.endswith(".py") else path
    for prefix in ("site-packages.", "lib.python3.11."):
        if prefix in module:
            module = module.split(prefix, 1)[1]
    return module, fn


def read_stacks(path: Path) -> Counter[tuple[str, ...]]:
    stacks: Counter[tuple[str, ...]] = Counter()
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, n = line.rpartition(" ")
            frames = tuple(fr for fr in stack.split(";") if not fr.startswith(("process ", "thread ")))
            if frames and n.isdigit():
                stacks[frames] += int(n)
    return stacks


_WAITS = ("epoll_wait", "epoll_pwait", "poll", "__poll", "ppoll", "select", "pselect", "__select", "nanosleep",
          "clock_nanosleep", "__futex", "futex", "do_futex_wait", "pthread_cond_wait", "pthread_cond_timedwait",
          "___pthread_cond", "__pthread_cond", "sem_wait", "sem_timedwait", "__new_sem_wait", "accept",
          "__lll_lock_wait", "take_gil", "sleep", "wait4", "waitpid")  # fmt: skip
# A libc leaf py-spy could not name (its futex wait is a local symbol) under one of these is waiting too.
_WAITING_PY = ("threading:Condition.wait", "threading:Event.wait", "threading:Lock.acquire", "queue:Queue.get",
               "concurrent.futures.thread:_worker", "selectors:", "threading:Thread.join")  # fmt: skip


def is_native(frame: str) -> bool:
    m = _FRAME.match(frame)
    return bool(m) and not (m["file"].endswith(".py") or m["file"].startswith("<"))


def is_idle(frames: tuple[str, ...]) -> bool:
    mod, fn = frame_key(frames[-1])
    if not is_native(frames[-1]):
        return False
    if fn.startswith(_WAITS) or fn.lstrip("_").startswith(_WAITS):
        return True
    if fn == "?" and mod.startswith("libc"):
        py = next((":".join(frame_key(f)) for f in reversed(frames) if not is_native(f)), "")
        return py.startswith(_WAITING_PY)
    return False


def summarize(path: Path, top: int = 15, classify: bool = True) -> dict[str, Any]:
    """Self time (the leaf frame, native or Python), self time of the deepest Python frame (what a native
    leaf was called from), inclusive time (anywhere in the stack, once per stack) and self time by module,
    as sample counts and shares of the busy samples (all samples when not ``classify``)."""
    stacks = read_stacks(path)
    total = idle = 0
    self_fn: Counter[str] = Counter()
    self_py: Counter[str] = Counter()
    incl_fn: Counter[str] = Counter()
    self_mod: Counter[str] = Counter()
    for frames, n in stacks.items():
        if classify and is_idle(frames):
            idle += n
            continue
        total += n
        mod, fn = frame_key(frames[-1])
        self_fn[f"{mod}:{fn}"] += n
        self_mod[mod] += n
        py = next((":".join(frame_key(f)) for f in reversed(frames) if not is_native(f)), "(no Python frame)")
        self_py[py] += n
        for key in {":".join(frame_key(fr)) for fr in frames}:
            incl_fn[key] += n

    def rows(c: Counter[str]) -> list[dict[str, Any]]:
        return [{"name": k, "samples": v, "pct": round(100 * v / max(total, 1), 1)} for k, v in c.most_common(top)]

    # The frames every busy sample shares (the start-up chain down to the event loop) say nothing.
    for k in [k for k, v in incl_fn.items() if v >= 0.97 * total]:
        del incl_fn[k]
    return {"samples": total, "idle_samples": idle, "self": rows(self_fn), "self_python": rows(self_py),
            "inclusive": rows(incl_fn), "self_by_module": rows(self_mod)}  # fmt: skip


def inclusive_share(path: Path, needles: list[str]) -> dict[str, float]:
    """The share of samples whose stack has a frame matching each needle (a substring of module:function)."""
    stacks = read_stacks(path)
    total = sum(stacks.values()) or 1
    out = {}
    for needle in needles:
        hit = sum(n for frames, n in stacks.items() if any(needle in ":".join(frame_key(f)) for f in frames))
        out[needle] = round(100 * hit / total, 1)
    return out


def show(case: str, summaries: dict[str, Any], top: int = 12, console: Console | None = None) -> None:
    console = console or Console(width=160)
    for name, s in summaries.items():
        if not s.get("samples"):
            console.print(f"[red]{case} / {name}: no samples[/red] {s.get('error', '')}")
            continue
        if s["native"]:
            mode = f"busy of {s['samples'] + s['idle_samples']}, = {s['samples'] / s['rate']:.1f} s"
        else:
            mode = "wall clock, idle included"
        title = (f"{case} / {name}: {s['samples']} samples at {s['rate']} Hz ({mode}); "
                 f"/proc CPU {s['cpu_s']} s ({s.get('sys_s', '?')} s system) in {s['wall_s']} s")  # fmt: skip
        t = Table(title=title, title_justify="left")
        t.add_column("self", overflow="fold")
        t.add_column("%", justify="right")
        t.add_column("self, by Python caller", overflow="fold")
        t.add_column("%", justify="right")
        t.add_column("inclusive", overflow="fold")
        t.add_column("%", justify="right")
        cols = [s["self"], s["self_python"], s["inclusive"]]
        for i in range(top):
            cells: list[str] = []
            for col in cols:
                cells += [col[i]["name"], f"{col[i]['pct']:.1f}"] if i < len(col) else ["", ""]
            t.add_row(*cells)
        console.print(t)


def under(path: Path, frame: str, top: int = 15) -> list[dict[str, Any]]:
    """Busy samples whose stack passes through ``frame`` (a module:function substring), by their leaf: what
    the time under that function is spent on."""
    by: Counter[str] = Counter()
    total = 0
    for frames, n in read_stacks(path).items():
        if is_idle(frames):
            continue
        keys = [":".join(frame_key(f)) for f in frames]
        hits = [i for i, k in enumerate(keys) if frame in k]
        if hits:
            total += n
            by[keys[-1]] += n
    return [{"name": k, "samples": v, "pct": round(100 * v / max(total, 1), 1)} for k, v in by.most_common(top)]


if __name__ == "__main__":
    import sys

    # python bench/pyspy_stacks.py FILE [FRAME]: a file's tables, or what the time under FRAME goes to
    if len(sys.argv) > 2:
        for r in under(Path(sys.argv[1]), sys.argv[2]):
            print(f"{r['pct']:5.1f}% {r['samples']:6d}  {r['name']}")
    else:
        s = summarize(Path(sys.argv[1]))
        s.update(rate=100, cpu_s="?", wall_s="?", native=True, idle=True)
        show(Path(sys.argv[1]).name, {"": s})

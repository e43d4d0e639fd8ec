"""Counts the sizes of every ``ssl.SSLObject.read`` and ``write`` of a process, for bench/tls_read_sizes.py.

Active only when EPOCHLOG_SSL_SIZES names a file: the directory holding this module is put on the broker's
PYTHONPATH by that script, so Python imports it at start-up, before uvloop binds ``SSLObject.read`` per
connection. Every second (and at exit) the histograms are written to that file as JSON. It adds a Python
call per read, so a process run with it is for counting, never for timing.
"""

from __future__ import annotations

import atexit
import json
import os
import ssl
import threading
from collections import Counter

_OUT = os.environ.get("EPOCHLOG_SSL_SIZES")


def _bucket(n: int) -> int:
    """The power of two at or above ``n`` (0 stays 0)."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


if _OUT:
    _stats: dict[str, Counter[int]] = {k: Counter() for k in ("read_asked", "read_got", "write_len")}
    _calls: Counter[str] = Counter()
    _bytes: Counter[str] = Counter()
    _orig_read, _orig_write = ssl.SSLObject.read, ssl.SSLObject.write

    def _read(self: ssl.SSLObject, size: int = 1024, buffer: object = None) -> object:
        _stats["read_asked"][_bucket(size)] += 1
        try:
            got = _orig_read(self, size, buffer)
        except ssl.SSLWantReadError:
            _calls["read_want_read_error"] += 1
            raise
        n = got if isinstance(got, int) else len(got)  # type: ignore[arg-type]
        _stats["read_got"][_bucket(n)] += 1
        _calls["read"] += 1
        _bytes["read"] += n
        return got

    def _write(self: ssl.SSLObject, data: object) -> int:
        n = _orig_write(self, data)
        _stats["write_len"][_bucket(n)] += 1
        _calls["write"] += 1
        _bytes["write"] += n
        return n

    ssl.SSLObject.read = _read  # type: ignore[method-assign, assignment]
    ssl.SSLObject.write = _write  # type: ignore[method-assign]

    def _dump() -> None:
        data = {"calls": dict(_calls), "bytes": dict(_bytes),
                "histograms": {k: dict(sorted(v.items())) for k, v in _stats.items()}}  # fmt: skip
        tmp = _OUT + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, _OUT)

    def _loop() -> None:
        while True:
            threading.Event().wait(1.0)
            _dump()

    threading.Thread(target=_loop, daemon=True, name="ssl-sizes").start()
    atexit.register(_dump)

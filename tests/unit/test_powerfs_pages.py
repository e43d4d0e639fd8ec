"""The unsynced state of one file (chaos/powerfs/pages.py) against a model: a bytearray that every write and
truncate changes. Reads through the state must equal the model at every step, the backing file must not
change before a flush, and after a flush the backing file must equal the model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.chaos.powerfs.pages import PAGE, Unsynced

pytestmark = pytest.mark.unit

op = st.one_of(
    st.tuples(st.just("write"), st.integers(0, 5 * PAGE), st.binary(min_size=1, max_size=2 * PAGE + 3)),
    st.tuples(st.just("truncate"), st.integers(0, 6 * PAGE), st.just(b"")),
)


def _apply(model: bytearray, kind: str, n: int, data: bytes) -> None:
    if kind == "write":
        if n > len(model):
            model.extend(bytes(n - len(model)))
        model[n : n + len(data)] = data
    elif n < len(model):
        del model[n:]
    else:
        model.extend(bytes(n - len(model)))


@settings(max_examples=150, deadline=None)
@given(start=st.binary(max_size=3 * PAGE), ops=st.lists(op, max_size=12))
def test_reads_see_the_unsynced_view_and_flush_makes_it_durable(tmp_path_factory, start: bytes, ops) -> None:  # type: ignore[no-untyped-def]
    path: Path = tmp_path_factory.mktemp("pages") / "f"
    path.write_bytes(start)
    fd = os.open(path, os.O_RDWR)
    try:
        model, u = bytearray(start), Unsynced(len(start))
        for kind, n, data in ops:
            _apply(model, kind, n, data)
            if kind == "write":
                u.write(fd, data, n)
            else:
                u.truncate(n)
            assert u.size == len(model)
            assert u.read(fd, len(model) + 10, 0) == bytes(model)
            assert path.read_bytes() == start  # nothing reaches the backing file before fsync
        mid = len(model) // 3
        assert u.read(fd, 5000, mid) == bytes(model[mid : mid + 5000])
        u.flush(fd)
        assert path.read_bytes() == bytes(model)
        assert not u.pages and u.read(fd, len(model), 0) == bytes(model)
    finally:
        os.close(fd)


def test_a_truncation_then_growth_reads_zeros_not_the_old_bytes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10_000)
    fd = os.open(path, os.O_RDWR)
    try:
        u = Unsynced(10_000)
        u.truncate(100)
        u.truncate(9_000)
        assert u.read(fd, 9_000, 0) == b"x" * 100 + bytes(8_900)
        u.flush(fd)
        assert path.read_bytes() == b"x" * 100 + bytes(8_900)
    finally:
        os.close(fd)

"""One source for each protocol fact: Kafka's error codes are named only in epochlog.codes, which the sans-IO
cores can import without pulling in the wire codec."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import epochlog
from epochlog.codes import Err
from epochlog.protocol import errors as protocol_errors

SRC = Path(epochlog.__file__).parent
ERR_MODULE = SRC / "codes.py"
CORES = ("replication", "raft", "controller", "transactions")
# Names that are spelled like an error code but mean something else.
NOT_ERROR_CODES = {("protocol/records.py", "NONE")}  # compression codec 0 (batch attributes), not Err.NONE


def _int_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def bare_codes(tree: ast.Module) -> list[str]:
    """Module-level names spelled like an Err member and bound to an int literal (also in tuple assignments)."""
    found = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            pairs: list[tuple[ast.expr, ast.expr]] = []
            for target in stmt.targets:
                if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
                    pairs += zip(target.elts, stmt.value.elts, strict=False)
                else:
                    pairs.append((target, stmt.value))
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            pairs = [(stmt.target, stmt.value)]
        else:
            continue
        for target, value in pairs:
            if isinstance(target, ast.Name) and target.id in Err.__members__ and _int_literal(value):
                found.append(target.id)
    return found


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p != ERR_MODULE)


def test_the_scan_finds_a_redeclared_code() -> None:
    src = "NONE = 0\nFENCED_LEADER_EPOCH: int = 74\nA, UNKNOWN_SERVER_ERROR = 1, -1\nNO_LEADER = -1\nX = Err.NONE\n"
    assert bare_codes(ast.parse(src)) == ["NONE", "FENCED_LEADER_EPOCH", "UNKNOWN_SERVER_ERROR"]


def test_no_module_but_the_err_module_redeclares_an_error_code() -> None:
    offenders = {}
    for path in _modules():
        rel = str(path.relative_to(SRC))
        names = [n for n in bare_codes(ast.parse(path.read_text(), rel)) if (rel, n) not in NOT_ERROR_CODES]
        if names:
            offenders[rel] = names
    assert offenders == {}, f"use epochlog.codes.Err instead of these ints: {offenders}"


def test_the_err_module_is_a_leaf_the_wire_layer_re_exports() -> None:
    tree = ast.parse(ERR_MODULE.read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m and m.startswith("epochlog")]
    assert protocol_errors.Err is Err


@pytest.mark.parametrize("core", CORES)
def test_cores_take_error_codes_without_the_wire_codec(core: str) -> None:
    for path in sorted((SRC / core).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            assert not [n for n in names if n.startswith("epochlog.protocol")], f"{path} imports protocol/"

"""No import circles, and every package imports only the layers below it (docs/architecture.md).

Every import counts, at module level and inside functions and methods: a function-level import still runs,
only later, and a circle through it is a circle in the design that merely fails less often. The one
exemption is an import under ``if TYPE_CHECKING:``, which never runs.

The file graph has one node per module (``pkg/__init__.py`` is the node ``pkg``). ``import a.b.c`` and
``from a.b import c`` (c a submodule) are edges to ``a.b.c``; ``from a.b import name`` (name defined in
``a/b/__init__.py``) is an edge to ``a.b``. The implicit import of parent packages is not an edge: Python
puts the parent in ``sys.modules`` before its child runs, so it cannot close a circle on its own.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[2] / "src"
TOP = "epochlog"

# The layers of docs/architecture.md, top first: a package imports only packages of layers below its own
# (ALLOWED says which), never one of its own layer or above. config_error and properties are leaf modules
# directly under epochlog, as is offsets (the LSO rule the replication core and storage share); "epochlog" is
# the package's own __init__ (the version).
LAYERS: list[set[str]] = [
    {"cli"},
    {"demo", "sim", "chaos"},
    {"server", "console", "spark"},
    {"storage", "client"},
    {"controller"},
    {"raft", "security", "transactions", "groups", "quotas"},
    {"replication", "protocol"},
    {"properties", "epochlog"},
    {"config_error", "offsets", "codes", "config_defs", "trace"},
    {"clock"},
]

# What each first-level package may import, besides itself. The layers differ from DESIGN.md's sketch
# in three places, each a dependency the code has and needs:
# - client/ is beside server/, not above it: client/ is a library for users and never imports server/; the
#   broker's peer connections and the local cluster harness use client/'s wire codec and quorum helper.
# - storage/ knows raft/'s and controller/'s record types: the metadata log's files (metadata_raft_log,
#   quorum_state_file) and dump-log store and print them. raft/ and controller/ never import storage/.
# - sim/ reads console/'s epoch lineage (where two replicas' epoch histories diverge) for its report.
# security/ is used by server/, client/ and controller/ (ACLs, SCRAM), so it imports none of them.
# The cores stay sans-IO: replication/ imports nothing, raft/, transactions/ and groups/ only the error codes (codes),
# and none reads configuration files. config_error (ConfigError) and properties (.properties files) are
# below every other package.
# A dependency missing from a row is one the design does not have; a new package must get a row.
SHARED = frozenset({"config_error", "properties", "offsets", "codes", "config_defs", "trace", "clock"})
ALLOWED: dict[str, frozenset[str]] = {
    "epochlog": frozenset(),
    "config_error": frozenset(),
    "offsets": frozenset(),
    "codes": frozenset(),
    "config_defs": frozenset(),
    "clock": frozenset(),  # the one wall clock of a process (a test or the simulator can install another)
    "trace": frozenset({"clock"}),  # the trace events, sink and checker: what the cores report, checked anywhere
    "properties": frozenset({"config_error"}),
    "protocol": frozenset({"codes", "clock"}),
    "replication": frozenset({"offsets", "codes", "trace"}),
    "transactions": frozenset({"codes"}),
    "groups": frozenset({"codes"}),
    "quotas": frozenset(),  # client quota decisions (sans-IO): precedence, sampled rates, throttle times
    "raft": frozenset({"codes", "trace"}),
    "security": SHARED | {"protocol"},
    "storage": SHARED | {"controller", "raft", "protocol"},
    "controller": frozenset({"codes", "config_defs", "raft", "replication", "security", "protocol"}),
    "client": SHARED | {"transactions", "security", "protocol"},
    "server": SHARED
    | {
        "client",
        "controller",
        "raft",
        "replication",
        "transactions",
        "groups",
        "quotas",
        "storage",
        "security",
        "protocol",
    },
    "spark": SHARED | {"client", "security", "protocol"},
    "sim": SHARED | {"console", "controller", "raft", "replication", "transactions", "storage", "protocol"},
    "console": SHARED | {"client", "storage", "security", "protocol"},
    "demo": SHARED | {"spark", "server", "client", "security", "protocol"},
    "chaos": SHARED | {"server", "client", "trace"},
    "cli": SHARED
    | {
        "epochlog",
        "demo",
        "chaos",
        "console",
        "sim",
        "spark",
        "server",
        "client",
        "controller",
        "storage",
        "raft",
        "replication",
        "transactions",
        "quotas",
        "security",
        "protocol",
    },
}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    path: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under node, in functions and classes too, except the body of `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield from _import_nodes_of(other)
        else:
            yield from _import_nodes(child)


def _import_nodes_of(stmt: ast.stmt) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        yield stmt
    else:
        wrapper = ast.Module(body=[stmt], type_ignores=[])
        yield from _import_nodes(wrapper)


def _known_prefix(name: str, modules: set[str]) -> str | None:
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def scan(root: Path, top: str = TOP) -> tuple[set[str], list[Import]]:
    """The modules of package `top` under `root` and every import between two of them."""
    paths = {module_name(root, p): p for p in sorted((root / top).rglob("*.py"))}
    modules = set(paths)
    imports: list[Import] = []
    for importer, path in paths.items():
        source = path.read_text()
        lines = source.splitlines()
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        for node in _import_nodes(ast.parse(source, str(path))):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [_known_prefix(alias.name, modules) for alias in node.names]
            else:
                if node.level:
                    base_parts = package.split(".")
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else _known_prefix(base, modules))
            text = lines[node.lineno - 1].strip()
            for target in dict.fromkeys(targets):
                if target is not None and target != importer:
                    rel = path.relative_to(root)
                    imports.append(Import(importer, target, rel, node.lineno, text))
    return modules, imports


def strongly_connected(nodes: set[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph is deeper than a comfortable recursion); components of size > 1."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = []
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        work.append((start, iter(sorted(edges.get(start, ())))))
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(edges.get(succ, ())))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def file_circles(modules: set[str], imports: list[Import]) -> list[str]:
    """One report per circle: its modules and the imports that close it, with the importing lines."""
    edges: dict[str, set[str]] = defaultdict(set)
    for imp in imports:
        edges[imp.importer].add(imp.imported)
    reports = []
    for component in strongly_connected(modules, edges):
        members = set(component)
        inside = [imp for imp in imports if imp.importer in members and imp.imported in members]
        lines = "\n".join(f"    {imp.importer} -> {imp.imported}  ({imp.where()})" for imp in inside)
        reports.append(f"import circle {' <-> '.join(component)}:\n{lines}")
    return reports


def package_of(module: str, top: str = TOP) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == top else top


def package_violations(imports: list[Import], allowed: dict[str, frozenset[str]], top: str = TOP) -> list[str]:
    reports = []
    for imp in imports:
        src, dst = package_of(imp.importer, top), package_of(imp.imported, top)
        if src != dst and dst not in allowed.get(src, frozenset()):
            reports.append(f"{src} -> {dst} is not allowed: {imp.importer} imports {imp.imported} ({imp.where()})")
    return reports


@pytest.fixture(scope="module")
def tree() -> tuple[set[str], list[Import]]:
    return scan(SRC)


def test_no_import_circle_between_files(tree: tuple[set[str], list[Import]]) -> None:
    modules, imports = tree
    circles = file_circles(modules, imports)
    if circles:
        pytest.fail("\n".join(circles), pytrace=False)


def test_packages_import_only_the_layers_below(tree: tuple[set[str], list[Import]]) -> None:
    _, imports = tree
    violations = package_violations(imports, ALLOWED)
    if violations:
        pytest.fail("\n".join(violations), pytrace=False)


def test_every_package_has_a_row_and_the_table_has_no_circle(tree: tuple[set[str], list[Import]]) -> None:
    modules, _ = tree
    packages = {package_of(m) for m in modules}
    assert packages == set(ALLOWED), f"packages without a row: {packages - set(ALLOWED)}"
    edges = {src: set(dsts) for src, dsts in ALLOWED.items()}
    assert not strongly_connected(set(ALLOWED), edges)


def test_the_table_follows_the_layers() -> None:
    layer = {pkg: depth for depth, pkgs in enumerate(LAYERS) for pkg in pkgs}
    assert set(layer) == set(ALLOWED)
    upward = [(src, dst) for src, dsts in ALLOWED.items() for dst in dsts if layer[dst] <= layer[src]]
    assert not upward, f"allowed imports of a package in the same layer or above: {upward}"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_checker_finds_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low/__init__.py": "",
            "pkg/low/a.py": "from pkg.high import b\n",
            "pkg/high/__init__.py": "",
            "pkg/high/b.py": "def later():\n    from ..low.a import x\n    return x\n",
            "pkg/high/c.py": "from . import b\n",
        },
    )
    modules, imports = scan(tmp_path, "pkg")
    circles = file_circles(modules, imports)
    assert len(circles) == 1
    assert "pkg.high.b <-> pkg.low.a" in circles[0]
    assert "pkg/high/b.py:2: from ..low.a import x" in circles[0]
    allowed = {"pkg": frozenset(), "low": frozenset(), "high": frozenset({"low"})}
    (violation,) = package_violations(imports, allowed, "pkg")
    assert violation.startswith("low -> high is not allowed: pkg.low.a imports pkg.high.b")


def test_checker_exempts_only_the_type_checking_branch(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": (
                "import typing\n"
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from pkg.a import A\n"
                "if typing.TYPE_CHECKING:\n"
                "    import pkg.a\n"
            ),
            "pkg/c.py": "import pkg.d\n",
            "pkg/d.py": "if TYPE_CHECKING:\n    pass\nelse:\n    import pkg.c\n",
        },
    )
    modules, imports = scan(tmp_path, "pkg")
    circles = file_circles(modules, imports)
    assert len(circles) == 1
    assert "pkg.c <-> pkg.d" in circles[0]

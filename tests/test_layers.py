"""The package's shape (ARCHITECTURE.md, DESIGN.md invariant 8): every import inside ``connector/`` goes to
its own layer or one below, and no module imports itself back through others. Imports under ``if
TYPE_CHECKING:`` are left out; imports inside functions count (that is how cycles hide)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "connector"

#: lowest first; a module may import its own layer and those below
LAYERS = {
    "connector.errors": 0, "connector._native": 0, "connector.plugins": 0, "connector.serializers": 0,
    "connector.packed": 0, "connector.counters": 0, "connector.settings": 0,
    "connector.accumulo": 1,
    "connector.export": 2, "connector.clusters_config": 2,
    "connector.queue": 3, "connector.transactions": 3,
    "connector.combine": 4, "connector.snapshot": 4,
    "connector.jobs": 5,
    "connector.spark": 6,
    "connector.cli": 7, "connector.__main__": 7,
}


def _layer(module: str) -> tuple[str, int] | None:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return prefix, LAYERS[prefix]
    return None


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(module: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """The modules of ``connector`` that ``module`` imports, with line numbers."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(n) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for stmt in node.body for n in ast.walk(stmt)}
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            # `from pkg import name` imports pkg.name when that is a module, else pkg
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found += [(name, node.lineno) for name in names if name in known and name != module]
    return found


def _graph() -> tuple[dict[str, list[tuple[str, int]]], dict[str, Path]]:
    modules = _modules()
    return {m: _imports(m, p, set(modules)) for m, p in modules.items()}, modules


def test_every_module_has_a_layer():
    _, modules = _graph()
    assert [m for m in modules if m != "connector" and _layer(m) is None] == []


def test_no_import_runs_upward():
    graph, modules = _graph()
    upward = []
    for module, targets in graph.items():
        mine = _layer(module)
        for target, line in targets:
            theirs = _layer(target)
            if mine and theirs and theirs[1] > mine[1]:
                upward.append(f"{modules[module].relative_to(PACKAGE.parent)}:{line} imports {target} "
                              f"({mine[0]} may not import {theirs[0]})")
    assert upward == []


#: what the wire codecs (``connector.accumulo.wire``) may import of the client beside each other: the IDL, the
#: errors and the types they encode, never the client's classes (connection, writers, scanners), which use them
WIRE_MAY_IMPORT = {"connector.accumulo._idl", "connector.accumulo.errors", "connector.accumulo.mutation",
                   "connector.accumulo.visibility"}


def test_the_wire_codecs_sit_below_the_client_classes():
    graph, modules = _graph()
    wrong = [f"{modules[module].relative_to(PACKAGE.parent)}:{line} imports {target}"
             for module, targets in graph.items() if module.startswith("connector.accumulo.wire")
             for target, line in targets
             if target.startswith("connector.accumulo") and not target.startswith("connector.accumulo.wire")
             and target not in WIRE_MAY_IMPORT]
    assert wrong == []


def test_each_layer_calls_the_crate_through_its_one_wrapper():
    """One front door to ``connector._native`` per layer (ARCHITECTURE.md: the hot path); nothing outside
    ``tests/`` (the package, the benchmarks, the examples) imports the test oracles (the Python twins of the
    Rust codec live only under ``tests/``)."""
    wrappers = {"connector.packed", "connector.accumulo.wire.native", "connector.queue.native_rows",
                "connector.export.native_translate", "connector.snapshot.native_digest"}
    callers, oracles = set(), []
    others = {p.relative_to(PACKAGE.parent).as_posix(): p for folder in ("integration", "examples")
              for p in (PACKAGE.parent / folder).rglob("*.py")}
    for module, path in {**_modules(), **others}.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            if "connector._native" in names:
                callers.add(module)
            oracles += [f"{module} imports {n}" for n in names if n == "tests" or n.startswith("tests.")]
    assert callers == wrappers
    assert oracles == []


def test_no_import_cycle():
    graph, _ = _graph()
    edges = {m: sorted({t for t, _ in targets}) for m, targets in graph.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in edges.get(module, []):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_the_check_sees_a_cycle_and_an_upward_import(tmp_path):
    # the checks themselves can fail: a tiny package with both faults
    pkg = tmp_path / "connector"
    (pkg / "queue").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "queue" / "__init__.py").write_text("from connector.queue import a\n")
    (pkg / "queue" / "a.py").write_text("from connector.queue import b\nfrom connector.spark import x\n")
    (pkg / "queue" / "b.py").write_text("def f():\n    from connector.queue import a\n")
    (pkg / "spark").mkdir()
    (pkg / "spark" / "__init__.py").write_text("")
    (pkg / "spark" / "x.py").write_text("")
    global PACKAGE
    real, PACKAGE = PACKAGE, pkg
    try:
        graph, _ = _graph()
        assert ("connector.spark.x", 2) in graph["connector.queue.a"]
        assert ("connector.queue.a", 2) in graph["connector.queue.b"]
        failed = 0
        for check in (test_no_import_runs_upward, test_no_import_cycle):
            try:
                check()
            except AssertionError:
                failed += 1
        assert failed == 2
    finally:
        PACKAGE = real


def test_every_package_declares_a_sorted_public_surface():
    import importlib

    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists() and not p.name.startswith("_"))
    assert {"accumulo", "queue", "export", "transactions"} <= set(packages)
    for name in packages:
        module = importlib.import_module(f"connector.{name}")
        public = list(getattr(module, "__all__", []))
        assert public, f"connector.{name} has no __all__"
        assert public == sorted(public), f"connector.{name}.__all__ is not sorted"
        missing = [n for n in public if not hasattr(module, n)]
        assert not missing, f"connector.{name}.__all__ names what it does not define: {missing}"

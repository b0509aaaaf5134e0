"""The package's import structure (issue 18): no import cycle, no private name imported across modules.

Both checks read the source with ``ast`` (nothing is imported, no Spark) and see every import
statement of every module of ``pando_iceberg/``: at module level, inside functions and methods,
under ``if``/``try``. An import hidden inside a function is still a dependency (it runs on the
first call), so it counts like any other.

How an import becomes an edge of the graph (module → module):
- ``from .x import name`` / ``from ..a.b import name`` are resolved against the importing
  module's package (``__init__.py`` is its own package); ``from . import x`` where ``x`` is a
  submodule is an edge to that submodule, otherwise to the package's ``__init__``.
- A name re-exported by a package (``from ..layout import Layout``) is an edge to the package's
  ``__init__`` module, which imports its submodules in turn: cycles through a re-exporting
  ``__init__`` are counted. We decided they are real, not spurious: ``from ..layout import
  Layout`` executed while ``layout/__init__.py`` is still importing its submodules fails, or
  binds a half-initialized module, exactly as a direct cycle does.
- The implicit import of a module's parent packages (Python runs ``a/__init__.py`` before
  ``a/b.py``) is NOT an edge. Counting it would turn every ``__init__`` that re-exports its own
  submodules into a cycle (``a`` → ``a.b`` → ``a``) although Python always finishes the
  submodule before the ``__init__`` goes on; only an explicit import of a name from the
  ``__init__`` (previous point) can observe it half-done, and that one is counted.
- Dynamic imports (``importlib.import_module``, as the top-level ``__init__`` does lazily for its
  facades) are not seen; they are not import statements.

A private name is a single leading underscore (``_name``, not ``__dunder__``). Using one across
modules means it is part of a module's interface: make it public (drop the underscore) instead.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "pando_iceberg"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (a submodule, or a package's __init__)
    name: str | None  # the name imported from ``target`` (None: the module itself)
    line: int


def module_names(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name → file, for every ``.py`` under ``root`` (a package is its ``__init__``)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute module named by ``from <level dots><target> import ...`` in ``module``."""
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(base) - 1:
        raise ValueError(f"{module}: relative import beyond the top-level package (level {level})")
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports_of(module: str, source: str, modules: dict[str, Path] | set[str], is_package: bool) -> list[Import]:
    """Every import of a package module in ``source`` (module level and nested)."""
    known = set(modules)
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    out.append(Import(module, _owning_module(alias.name, known), None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            target = resolve(module, is_package, node.level, node.module)
            if target != PACKAGE and not target.startswith(PACKAGE + "."):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:  # from . import x, x a submodule
                    out.append(Import(module, sub, None, node.lineno))
                else:
                    out.append(Import(module, _owning_module(target, known), alias.name, node.lineno))
    return out


def _owning_module(name: str, known: set[str]) -> str:
    """``name`` if it is a module of the package, else the longest module prefix of it."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in known:
            return candidate
    raise AssertionError(f"import of {name!r}: no such module in {PACKAGE}")


def package_imports(root: Path = ROOT) -> list[Import]:
    modules = module_names(root)
    out = []
    for name, path in modules.items():
        out += imports_of(name, path.read_text(encoding="utf-8"), modules, path.name == "__init__.py")
    return out


def is_private(name: str | None) -> bool:
    return name is not None and name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def import_cycles(edges: list[Import]) -> list[list[str]]:
    """The modules of every import cycle: each strongly connected component of the graph with
    more than one module (Tarjan), sorted. A module importing itself is not a cycle."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if e.source != e.target:
            graph.setdefault(e.source, set()).add(e.target)
            graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(components)


def _describe(component: list[str], edges: list[Import]) -> str:
    """The imports inside a cycle's modules, with their lines."""
    inside = sorted({(e.source, e.target) for e in edges if e.source in component and e.target in component
                     and e.source != e.target})
    steps = []
    for a, b in inside:
        lines = sorted({e.line for e in edges if e.source == a and e.target == b})
        steps.append(f"{a} → {b} (line {', '.join(map(str, lines))})")
    return "; ".join(steps)


# ---- the two checks ----------------------------------------------------------------------------


def test_no_private_name_is_imported_from_another_module() -> None:
    bad = [e for e in package_imports() if is_private(e.name)]
    if bad:
        pytest.fail("private names imported across modules (make them public, or keep them in their module):\n"
                    + "\n".join(f"  {e.source} (line {e.line}) imports {e.name} from {e.target}" for e in bad))


def test_the_import_graph_has_no_cycle() -> None:
    edges = package_imports()
    cycles = import_cycles(edges)
    if cycles:
        pytest.fail("import cycles in the package (move what both sides use to a lower module):\n"
                    + "\n".join(f"  modules {', '.join(c)}: {_describe(c, edges)}" for c in cycles))


# ---- the checks check what they claim (so that they cannot pass by seeing nothing) ---------------


def test_relative_imports_resolve_to_modules_and_packages() -> None:
    modules = {"pando_iceberg", "pando_iceberg.layout", "pando_iceberg.layout.tree", "pando_iceberg.spark",
               "pando_iceberg.spark.rewrite", "pando_iceberg.spark.iceberg_jvm", "pando_iceberg.expr",
               "pando_iceberg.expr.keys"}
    source = (
        "from . import iceberg_jvm as jv\n"
        "from ..layout import Layout\n"
        "from ..layout.tree import PartitionTree, _private\n"
        "from ..expr import keys as keyset\n"
        "def f():\n"
        "    from .. import __version__\n"
        "    import pando_iceberg.layout.tree\n"
        "from numpy import array\n"
    )
    got = {(e.target, e.name) for e in imports_of("pando_iceberg.spark.rewrite", source, modules, False)}
    assert got == {("pando_iceberg.spark.iceberg_jvm", None), ("pando_iceberg.layout", "Layout"),
                   ("pando_iceberg.layout.tree", "PartitionTree"), ("pando_iceberg.layout.tree", "_private"),
                   ("pando_iceberg.expr.keys", None), ("pando_iceberg", "__version__"),
                   ("pando_iceberg.layout.tree", None)}
    # In a package's __init__, "." is the package itself.
    init = imports_of("pando_iceberg.layout", "from .tree import cut_table\nfrom . import tree\n", modules, True)
    assert {(e.target, e.name) for e in init} == {("pando_iceberg.layout.tree", "cut_table"),
                                                  ("pando_iceberg.layout.tree", None)}
    assert resolve("pando_iceberg.spark.rewrite", False, 2, "layout.tree") == "pando_iceberg.layout.tree"
    assert [is_private(n) for n in ("_x", "__all__", "__x", "x", None)] == [True, False, True, False, False]


def test_cycles_are_found_and_named() -> None:
    def edge(a: str, b: str) -> Import:
        return Import(a, b, None, 1)

    edges = [edge("p.a", "p.b"), edge("p.b", "p.c"), edge("p.c", "p.a"), edge("p.c", "p.d"),
             edge("p.x", "p.y"), edge("p.y", "p.x"), edge("p.d", "p.d")]
    assert import_cycles(edges) == [["p.a", "p.b", "p.c"], ["p.x", "p.y"]]
    assert _describe(["p.x", "p.y"], edges) == "p.x → p.y (line 1); p.y → p.x (line 1)"
    assert import_cycles([edge("p.a", "p.b"), edge("p.b", "p.c")]) == []


def test_the_graph_is_the_real_one() -> None:
    edges = {(e.source, e.target) for e in package_imports()}
    assert len(module_names()) > 50 and len(edges) > 100
    assert ("pando_iceberg.spark.rewrite", "pando_iceberg.spark.blocks") in edges  # from .blocks import ...
    assert ("pando_iceberg.spark.rewrite", "pando_iceberg.spark.iceberg_jvm") in edges  # from . import iceberg_jvm
    assert ("pando_iceberg.layout", "pando_iceberg.layout.layout") in edges  # an __init__'s re-export


def layer_graph(edges: list[Import]) -> dict[str, set[str]]:
    """Subpackage → the subpackages it imports (``pando_iceberg.spark.rewrite`` is ``spark``; a
    top-level module is itself): the package's layers at a glance."""
    def layer(module: str) -> str:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else "(package)"

    out: dict[str, set[str]] = {}
    for e in edges:
        a, b = layer(e.source), layer(e.target)
        out.setdefault(a, set())
        if a != b:
            out[a].add(b)
    return out


def test_the_subpackages_form_layers() -> None:
    """No cycle between subpackages either (``planner`` → ``storage`` → ``layout`` → ``expr``, ...)."""
    layers = layer_graph(package_imports())
    assert {"expr", "layout", "planner", "spark", "storage", "workload"} <= set(layers)
    # expr is the bottom layer: it imports only the errors' module, which imports nothing of the package
    assert "expr" in layers["layout"] and layers["expr"] <= {"exceptions"} and "exceptions" not in layers
    edges = [Import(a, b, None, 0) for a, targets in layers.items() for b in targets]
    cycles = import_cycles(edges)
    assert not cycles, f"subpackages importing each other: {cycles}"
    assert layer_graph([Import("p.a.x", "p.b.y", None, 1), Import("p.a.x", "p.a.z", None, 1)]) == {"a": {"b"}}


if __name__ == "__main__":  # pragma: no cover - a quick report
    # python tests/test_package_structure.py           the checks
    # python tests/test_package_structure.py --graph   the import graph between subpackages, and its cycles
    import sys

    if "--graph" not in sys.argv:
        raise SystemExit(pytest.main([__file__, "-q"]))
    all_edges = package_imports()
    for source, targets in sorted(layer_graph(all_edges).items()):
        print(f"{source:>12} → {', '.join(sorted(targets)) or '-'}")
    found = import_cycles(all_edges)
    print(f"{len(module_names())} modules, {len({(e.source, e.target) for e in all_edges})} import edges, "
          f"{len(found)} module cycle(s)" + "".join(f"\n  {', '.join(c)}" for c in found))

"""The house rules of the layout, read from the source with ``ast`` (nothing is imported).

- ``course_lib`` (the library learners install) never imports ``autograder`` (the grader), anywhere,
  not even inside a function: a learner's environment has no grader in it.
- The imports between modules of either package form no circle: at module level none at all, and
  counting the imports inside functions too, none either (a lazy import must not hide a loop).
- ``demo/`` is the one place that imports both packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("course_lib", "autograder", "lessons")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(package: str) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((REPO / package).rglob("*.py"))}


def _imports(path: Path, module: str, top_level_only: bool) -> set[str]:
    """Absolute names of the modules ``path`` imports (``from . import x`` counts as ``pkg.x``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            found.add(prefix)
            found.update(f"{prefix}.{alias.name}" for alias in node.names)
    return found


def _graph(top_level_only: bool) -> dict[str, set[str]]:
    modules = {name: path for package in PACKAGES for name, path in _modules(package).items()}
    graph = {}
    for name, path in modules.items():
        targets = {t for t in _imports(path, name, top_level_only) if t in modules and t != name}
        # importing a package runs its __init__: an edge to the package itself is an edge to its __init__
        graph[name] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _is_package_init_edge(a: str, b: str) -> bool:
    return b == a.rpartition(".")[0]


def test_the_library_never_imports_the_grader():
    offenders = sorted(f"{name} imports {target}"
                       for name, path in _modules("course_lib").items()
                       for target in _imports(path, name, top_level_only=False)
                       if target == "autograder" or target.startswith("autograder."))
    assert not offenders, f"course_lib must not import autograder: {offenders}"


@pytest.mark.parametrize("top_level_only", [True, False], ids=["module level", "function level too"])
def test_no_import_circle(top_level_only):
    graph = _graph(top_level_only)
    # A submodule importing its own package's __init__ (e.g. `from . import x` inside pkg/y.py) is how
    # Python reaches a sibling; it is not a circle of our making unless the __init__ imports the submodule
    # back AND the submodule uses a name the __init__ defines. Drop only the edge to the package object.
    graph = {a: {b for b in targets if not _is_package_init_edge(a, b)} for a, targets in graph.items()}
    assert _cycles(graph) == []


def test_the_guard_sees_a_circle():
    # The detector itself: a two-module loop and a three-module loop are found, a chain is not.
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_only_demo_imports_both_packages():
    both = []
    for folder in ("course_lib", "autograder", "demo", "benchmarks", "notebooks", "labs"):
        for path in sorted((REPO / folder).rglob("*.py")):
            names = {n.split(".")[0] for n in _imports(path, _module_name(path), top_level_only=False)}
            if {"course_lib", "autograder"} <= names and folder not in ("demo", "autograder", "benchmarks"):
                both.append(str(path.relative_to(REPO)))
    assert both == []
    demo = {n.split(".")[0] for p in (REPO / "demo").glob("*.py") for n in _imports(p, _module_name(p), False)}
    assert {"course_lib", "autograder"} <= demo, "make demo runs demo/, which composes both packages"

"""The house rules of the layout, read from the source with ``ast`` (nothing is imported).

- ``course_lib`` (the library learners install) never imports ``autograder`` (the grader) or
  ``lessons`` (their trusted checks), anywhere, not even inside a function: a learner's environment
  has no grader in it.
- ``autograder`` (the engine) never imports ``lessons``, and no engine file names a lesson: a lesson
  is a folder the engine finds (entry points) or is given (``--lesson``). Lessons import the engine.
- ``autograder/sandbox/`` (the trust boundary) imports nothing of the engine but its error type:
  it can be read and audited alone.
- The imports between modules of the packages form no circle: at module level none at all, and
  counting the imports inside functions too, none either (a lazy import must not hide a loop).
- ``demo/`` and the lessons are the places that import both the library and the engine.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("course_lib", "autograder", "lessons")
#: The engine's files that make the learner's install and workspace (the course's library wheel, the
#: release opened in JupyterLab): they name the course's own distribution, not a lesson's grading.
LEARNER_SIDE = {"autograder/learner/learner_env.py", "autograder/learner/workspace.py"}


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


def _importers(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(f"{name} imports {target}" for name, path in _modules(package).items()
                  for target in _imports(path, name, top_level_only=False)
                  if target.split(".")[0] in forbidden)


def test_the_library_never_imports_the_grader():
    offenders = _importers("course_lib", ("autograder", "lessons"))
    assert not offenders, f"course_lib must not import autograder or lessons: {offenders}"


def test_the_library_core_names_no_lesson():
    # A lesson's learner-side helpers (its visible checks, demonstration cells, log excerpts, lab toolkit) live in
    # course_lib/lessons/<lesson>/; the core (every other module of course_lib) neither imports them nor names a
    # lesson's own modules, so a second lesson adds a folder and touches no core file.
    # The one exception: `course-memory demo` (course_lib/cli/demo.py) is the lesson's own demonstration, the library's
    # part of `make demo`; like demo/ at the top, it composes the lesson from its parts.
    core = {name: path for name, path in _modules("course_lib").items()
            if not name.startswith("course_lib.lessons") and name != "course_lib.cli.demo"}
    importers = sorted(f"{name} imports {target}" for name, path in core.items()
                       for target in _imports(path, name, top_level_only=False)
                       if target.startswith("course_lib.lessons"))
    assert importers == [], f"core modules that import a lesson's helpers: {importers}"
    named = sorted(f"{path.relative_to(REPO)}:{n}" for name, path in core.items()
                   for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                   if any(word in line for word in ("practice.", "lesson_logs", "labfile", "lessons.l14")))
    assert named == [], f"core files that name a lesson's module: {named}"
    assert {"course_lib.lessons.l14_04.practice", "course_lib.lessons.l14_04.demos"} <= set(_modules("course_lib"))


def test_the_engine_never_imports_a_lesson():
    offenders = _importers("autograder", ("lessons",))
    assert not offenders, f"autograder must not import lessons (a lesson plugs into the engine): {offenders}"


def test_no_engine_file_names_a_lesson():
    named = sorted(f"{path.relative_to(REPO)}:{n}" for path in sorted((REPO / "autograder").rglob("*.py"))
                   if str(path.relative_to(REPO)) not in LEARNER_SIDE
                   for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                   if "l14" in line.lower() or "lessons." in line or "LAB_" in line)
    assert named == [], f"engine files that name a lesson: {named}"


def test_the_trust_boundary_imports_nothing_of_the_engine():
    allowed = {"autograder.errors", "autograder.errors.AutograderError"}
    offenders = sorted(f"{name} imports {target}" for name, path in _modules("autograder").items()
                       if name.startswith("autograder.sandbox")
                       for target in _imports(path, name, top_level_only=False)
                       if target.startswith("autograder") and not target.startswith("autograder.sandbox")
                       and target not in allowed and target != "autograder")
    assert offenders == [], f"autograder/sandbox/ must stand alone: {offenders}"


def test_the_guards_see_what_they_guard():
    # what the rules above read: a lesson that imports the engine, and the engine package itself
    assert "autograder.contract.lesson" in _imports(REPO / "lessons" / "l14_04" / "__init__.py", "lessons.l14_04", False)
    assert _importers("lessons", ("autograder",)) and "autograder.sandbox.box" in _modules("autograder")


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
    for folder in ("course_lib", "autograder", "lessons", "demo", "benchmarks", "notebooks", "labs"):
        for path in sorted((REPO / folder).rglob("*.py")):
            names = {n.split(".")[0] for n in _imports(path, _module_name(path), top_level_only=False)}
            if {"course_lib", "autograder"} <= names and folder not in ("demo", "autograder", "lessons", "benchmarks"):
                both.append(str(path.relative_to(REPO)))
    assert both == []
    demo = {n.split(".")[0] for p in (REPO / "demo").glob("*.py") for n in _imports(p, _module_name(p), False)}
    assert {"course_lib", "autograder"} <= demo, "make demo runs demo/, which composes both packages"


# ------------------------------------------------------------------ course_lib's floors (issue 40)

#: course_lib's floors, lowest first: the rooms (top-level modules and folders of course_lib) on each. A
#: module imports its own floor and the floors below, never one above, not even inside a function.
#: simulate and runtimes import neither the other (either order would hold); the front door
#: (course_lib/__init__.py, the names learners import) re-exports the model's and the serving's names.
COURSE_LIB_FLOORS = (
    {"errors", "units", "bounds", "dtypes", "output", "regular_files", "grading", "gpus"},   # shared leaves
    {"model"},
    {"serving", ""},            # "": the front door, course_lib/__init__.py
    {"simulate"},
    {"runtimes"},
    {"measure"},
    {"views"},
    {"lessons"},
    {"cli", "__main__"},
)
#: What every runtime shares; none of these imports one runtime's modules.
RUNTIMES_SHARED = {"result", "versions", "releases", "profile", "log_lines"}


def _floor(module: str) -> int:
    room = module.split(".")[1] if "." in module else ""
    floors = [i for i, rooms in enumerate(COURSE_LIB_FLOORS) if room in rooms]
    assert floors, f"course_lib/{room} is on no floor: add it to COURSE_LIB_FLOORS in tests/test_layering.py"
    return floors[0]


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """'a imports b' for every edge from a course_lib module to a course_lib floor above its own."""
    return sorted(f"{a} (floor {_floor(a)}) imports {b} (floor {_floor(b)})"
                  for a, targets in graph.items() if a.split(".")[0] == "course_lib"
                  for b in targets if b.split(".")[0] == "course_lib" and _floor(b) > _floor(a))


def test_course_lib_imports_no_floor_above_its_own():
    graph = _graph(top_level_only=False)     # imports inside functions count: a lazy import is still an arrow
    assert _upward(graph) == []
    # the shared leaves on top import no folder of course_lib at all
    shared = {m: {t for t in ts if t.startswith("course_lib.")} for m, ts in graph.items()
              if m.split(".")[0] == "course_lib" and _floor(m) == 0}
    assert all(_floor(t) == 0 for ts in shared.values() for t in ts), shared
    # inside runtimes/: what every runtime shares imports no runtime's own module
    runtime_specific = [f"{a} imports {b}" for a, ts in graph.items()
                        if a.startswith("course_lib.runtimes.") and a.split(".")[2] in RUNTIMES_SHARED
                        for b in ts if b.startswith("course_lib.runtimes.") and b.split(".")[2] not in RUNTIMES_SHARED]
    assert runtime_specific == []


def test_the_guard_sees_an_upward_import():
    # The floor check itself, on the real graph plus one arrow back up: the budget (serving) asking a view.
    graph = _graph(top_level_only=False)
    graph["course_lib.serving.budget"] = graph["course_lib.serving.budget"] | {"course_lib.views.report"}
    assert _upward(graph) == ["course_lib.serving.budget (floor 2) imports course_lib.views.report (floor 6)"]
    assert _floor("course_lib.units") == 0 and _floor("course_lib.runtimes.vllm.scheduler") == 4
    with pytest.raises(AssertionError, match="on no floor"):
        _floor("course_lib.newfolder.x")


#: The grader's folders by role, from the ground up (autograder/__init__.py draws them). A module imports its own
#: folder and the floors below it, never a floor above or beside it: learner/ and run/ share a floor and neither
#: imports the other. The contract (what every part shares) imports only the sandbox's Limits and the error type.
ENGINE_FLOORS = (("errors",), ("sandbox",), ("contract",), ("source",), ("publish",), ("learner", "run"), ("batch",),
                 ("cli",), ("__main__",))


def _engine_floor(module: str) -> tuple[str, int] | None:
    """``autograder.run.grade`` -> ("run", 5); the package's own ``__init__`` -> None; a room on no floor -> (room, -1)."""
    parts = module.split(".")
    if parts[0] != "autograder" or len(parts) < 2:
        return None
    return parts[1], next((i for i, rooms in enumerate(ENGINE_FLOORS) if parts[1] in rooms), -1)


def _engine_offenders(edges: list[tuple[str, str]]) -> list[str]:
    """The imports (``a`` imports ``b``) that leave a room for a floor that is not below it, or that touch a room on no floor."""
    out = []
    for a, b in edges:
        here, there = _engine_floor(a), _engine_floor(b)
        if here is None or there is None or here[0] == there[0]:
            continue
        if here[1] < 0 or there[1] < 0 or there[1] >= here[1]:
            out.append(f"{a} imports {b}")
    return sorted(out)


def _engine_edges() -> list[tuple[str, str]]:
    modules = _modules("autograder")
    return [(name, target) for name, path in modules.items()
            for target in _imports(path, name, top_level_only=False) if target in modules and target != name]


def test_the_engine_folders_stand_in_order():
    rooms = {_engine_floor(name) for name in _modules("autograder")} - {None}
    assert sorted(room for room, floor in rooms if floor < 0) == [], "every engine module sits in a folder of ENGINE_FLOORS"
    assert {room for room, _ in rooms} == {room for floor in ENGINE_FLOORS for room in floor}
    assert _engine_offenders(_engine_edges()) == []


def test_the_contract_imports_no_other_folder():
    offenders = sorted(f"{a} imports {b}" for a, b in _engine_edges() if a.startswith("autograder.contract.")
                       and not b.startswith(("autograder.contract", "autograder.errors", "autograder.sandbox.limits"))
                       and b not in ("autograder.sandbox", "autograder.sandbox.Limits"))
    assert offenders == [], f"the contract must stand on the sandbox's Limits and the error type alone: {offenders}"


def test_the_folder_guard_sees_an_import_upward_or_sideways():
    assert _engine_offenders([("autograder.contract.results", "autograder.run.grade")]) == [
        "autograder.contract.results imports autograder.run.grade"]
    assert _engine_offenders([("autograder.run.grade", "autograder.learner.release")]) != []   # beside, not below
    assert _engine_offenders([("autograder.grade", "autograder.results")]) != []   # a room on no floor (the old flat house)
    assert _engine_offenders([("autograder.batch.autograde", "autograder.run.grade"),
                              ("autograder.run.grade", "autograder.run.execute")]) == []
    assert "autograder.contract.lesson" in _imports(REPO / "lessons" / "l14_04" / "__init__.py", "lessons.l14_04", False)

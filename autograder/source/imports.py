"""Before grading: can the Python the notebooks run in import what they import?

A package the course needs (scipy, say) that the kernels' Python lacks fails every hand-in alike, one
``ModuleNotFoundError`` per student. It is found here once, before anything is graded: the import
statements of the instructor's notebooks (the released cells, the solutions and the hidden tests:
all of them run when a hand-in is graded), read with :mod:`ast` after IPython's own input
transforms (``%matplotlib inline``, ``!pip ...``), are looked up with :func:`importlib.util.find_spec`
in that Python, in the assignment's folder (a module released beside the notebook counts) and with
the kernels' ``PYTHONPATH`` (the course library). An import inside ``try: ... except ImportError``
is optional and not required. The kernel itself needs ``ipykernel`` there too.

>>> sorted(imported_names("import numpy as np\\nfrom scipy.optimize import minimize\\nfrom . import x\\n"
...                       "try:\\n    import torch\\nexcept ImportError:\\n    torch = None\\n%matplotlib inline"))
['numpy', 'scipy']
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Iterable, Mapping

from ..errors import AutograderError

#: A line IPython runs as a magic or a shell command (``%matplotlib inline``, ``!pip install x``).
_MAGIC_LINE = re.compile(r"^([ \t]*)[%!].*$", re.M)
#: What every Python kernel needs in the kernels' Python, beyond what the notebooks import.
KERNEL_MODULES = ("ipykernel",)
_LOOKUP = ("import importlib.util, json, sys\n"
           "missing = []\n"
           "for name in sys.argv[1:]:\n"
           "    try:\n"
           "        found = importlib.util.find_spec(name) is not None\n"
           "    except (ImportError, ValueError):\n"
           "        found = False\n"
           "    if not found:\n"
           "        missing.append(name)\n"
           "print(json.dumps(missing))\n")


def _python_source(source: str) -> str:
    """A cell's code as IPython runs it (magics and shell escapes become calls); as written if that fails."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - the cell's own syntax error is the learner's concern
        return source


def _optional(handlers: list[ast.ExceptHandler]) -> bool:
    """A try whose handlers catch ImportError (or ModuleNotFoundError, Exception, anything)."""
    for handler in handlers:
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        for name in names:
            if name is None or (isinstance(name, ast.Name) and name.id in
                                ("ImportError", "ModuleNotFoundError", "Exception", "BaseException")):
                return True
    return False


def imported_names(source: str) -> set[str]:
    """The top-level modules a cell's code imports for sure (not relative, not ``__future__``, not optional)."""
    tree = None
    # Most cells are plain Python, or Python with a line magic or a shell escape: IPython's own transforms
    # (a 0.2 s import, then ~10 ms a cell) only for what neither reading parses.
    for text in (source, _MAGIC_LINE.sub(r"\1pass", source)):
        try:
            tree = ast.parse(text)
            break
        except SyntaxError:
            continue
    if tree is None:
        try:
            tree = ast.parse(_python_source(source))
        except SyntaxError:
            return set()
    names: set[str] = set()
    stack = [(stmt, False) for stmt in tree.body]   # statements only: an import is never inside an expression
    while stack:
        node, optional = stack.pop()
        if isinstance(node, ast.Import) and not optional:
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not optional and not node.level and node.module:
            names.add(node.module.split(".")[0])
        guarded = isinstance(node, ast.Try) and _optional(node.handlers)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, field, None) or ():
                if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                    stack.append((child, optional or (guarded and field == "body")))
    return names - {"__future__"}


def notebook_imports(notebooks: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """module -> the notebooks that import it, from each notebook's code cells (``notebooks``: name -> sources)."""
    found: dict[str, list[str]] = {}
    for name, sources in notebooks.items():
        for source in sources:
            for module in sorted(imported_names(source)):
                if name not in found.setdefault(module, []):
                    found[module].append(name)
    return found


def code_cells(path: Path) -> list[str]:
    """A notebook's code cells' sources, read as JSON ([] where it cannot be read: load_source says why)."""
    try:
        cells = json.loads(Path(path).read_bytes()).get("cells") or []
        return ["".join(c["source"]) if isinstance(c.get("source"), list) else str(c.get("source", ""))
                for c in cells if isinstance(c, dict) and c.get("cell_type") == "code"]
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return []


def missing_modules(python: str, modules: Iterable[str], folder: Path, pythonpath: str) -> list[str]:
    """Those of ``modules`` that ``python``, started in ``folder`` with ``pythonpath``, cannot find."""
    modules = sorted(set(modules))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": pythonpath, "PYTHONNOUSERSITE": "1",
           "LANG": "C.UTF-8"}
    try:
        proc = subprocess.run([python, "-s", "-c", _LOOKUP, *modules], cwd=folder, env=env, capture_output=True,
                              text=True, timeout=120)
        return list(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
        raise AutograderError(f"could not ask {python} which modules it has ({type(e).__name__}); give a working "
                              f"Python with --python PATH") from None


def check_imports(notebooks: Mapping[str, Iterable[str]], python: str, folder: Path, pythonpath: str,
                  requirements: str | None = None, given: bool = False) -> None:
    """Refuse, in one line, a batch whose notebooks import a module the kernels' Python cannot find, or
    whose Python has no ipykernel. ``notebooks``: each Python notebook's code cells, by name; ``python``:
    the grader's own, the course's (``given``, from ``--python``), or the one built from ``requirements``."""
    imports = notebook_imports(notebooks)
    missing = missing_modules(python, [*imports, *KERNEL_MODULES], folder, pythonpath)
    if not missing:
        return
    if requirements is not None:
        whose, fix = f"the environment built from {requirements} ({python})", f"add it to {requirements}"
    elif given:
        whose, fix = f"the course's Python ({python})", f"install it there (`{python} -m pip install ...`)"
    else:
        whose = f"the grader's own Python ({python})"
        fix = "give the course's environment with --python PATH or --requirements FILE"
    kernel = [m for m in missing if m in KERNEL_MODULES and m not in imports]
    if kernel:
        raise AutograderError(f"{whose} has no {', '.join(kernel)}, which runs the notebooks; "
                              f"{fix.replace('...', 'ipykernel').replace('add it', 'add ipykernel')}")
    shown = ", ".join(f"{m} ({', '.join(imports[m][:3])})" for m in missing[:8]) + (", ..." if len(missing) > 8 else "")
    raise AutograderError(f"the notebooks import {shown}, which {whose} cannot import; {fix}")

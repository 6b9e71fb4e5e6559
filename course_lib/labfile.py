"""Find, run and read the L14.4 lab script, for the notebook and the autograder.

The lab prints lines such as ``parts_gb = {'weights': 14.0, ...}`` and
``headroom_gb = 1.705``; :func:`parse_lab_output` reads them back as Python
values with :func:`ast.literal_eval` (never ``eval``).

>>> out = parse_lab_output("parts_gb = {'weights': 14.0, 'kv_cache': 4.295}\\nheadroom_gb = 1.705\\n"
...                        "verdict: the workload fits with 1.705 GB to spare\\n")
>>> out["parts_gb"]["kv_cache"], out["headroom_gb"], out["fits"]
(4.295, 1.705, True)
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from .errors import CourseInputError

LAB_NAME = "l14-04-model-memory.py"
LAB_RELATIVE = Path("labs") / "notebooks" / "level-14" / LAB_NAME


def find_lab_file(start: str | Path | None = None) -> Path:
    """The lab file as a learner's notebook sees it.

    Looked for, from ``start`` (default: the current folder): beside the
    notebook (the release layout), then at ``labs/notebooks/level-14/`` in
    this folder or any parent (the repository layout).
    """
    here = Path(start or Path.cwd()).resolve()
    candidates = [here / LAB_NAME] + [parent / LAB_RELATIVE for parent in (here, *here.parents)]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise CourseInputError(
        f"lab file {LAB_NAME!r} not found beside {str(here)!r} or under {str(LAB_RELATIVE)!r} in it or its parents; "
        f"open the notebook from the release folder or the repository"
    )


def parse_lab_output(text: str) -> dict:
    """Read the lab's printed ``name = value`` lines and its verdict into a dict."""
    out: dict = {}
    for line in text.splitlines():
        if line.startswith("verdict:"):
            out["verdict"] = line
            out["fits"] = "does not fit" not in line
            continue
        name, sep, value = line.partition(" = ")
        if not sep or not name.isidentifier():
            continue
        value = value.split("  (")[0].split(" of ")[0].strip()
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[name] = value
    return out


def run_lab(path: str | Path | None = None, timeout_s: float = 60) -> dict:
    """Run the lab script in a fresh Python and return its parsed output (plus ``stdout``)."""
    lab = Path(path) if path else find_lab_file()
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, str(lab)], capture_output=True, text=True, env=env,
                          cwd=lab.parent, timeout=timeout_s)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise CourseInputError(f"the lab {str(lab)!r} failed: {last}")
    result = parse_lab_output(proc.stdout)
    result["stdout"] = proc.stdout
    return result

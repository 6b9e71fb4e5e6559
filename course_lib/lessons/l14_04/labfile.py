"""The L14.4 lab toolkit: find the lab file, edit its one knob, run it, read what it printed.

The notebook, ``make demo`` and the autograder all go through these functions, so
there is one way to change ``active_sequences`` (located in the file's syntax tree,
not by text search) and one rule for the verdict line.

The lab prints lines such as ``parts_gb = {'weights': 14.0, ...}`` and
``headroom_gb = 1.705``; :func:`parse_output` reads them back as Python values
with :func:`ast.literal_eval` (never ``eval``).

>>> out = parse_output("parts_gb = {'weights': 14.0, 'kv_cache': 4.295}\\nheadroom_gb = 1.705\\n"
...                    "verdict: the workload fits with 1.705 GB to spare\\n")
>>> out["parts_gb"]["kv_cache"], out["headroom_gb"], out["fits"]
(4.295, 1.705, True)
>>> edit_knob("x = 1\\nactive_sequences = 8   # the knob\\n", 16)
'x = 1\\nactive_sequences = 16   # the knob\\n'
"""

from __future__ import annotations

import ast
import copy
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ...errors import CourseInputError
from ...grading import grading

LAB_NAME = "l14-04-model-memory.py"
LAB_RELATIVE = Path("labs") / "notebooks" / "level-14" / LAB_NAME
REPO = Path(__file__).resolve().parents[3]
#: The lab file in this checkout (the instructor's copy; learners get it beside the notebook).
REPO_LAB = REPO / LAB_RELATIVE
#: The one line the lab asks learners to change.
KNOB = "active_sequences"

FITS = "verdict: the workload fits"
DOES_NOT_FIT = "verdict: the workload does not fit"


class LabFailed(CourseInputError):
    """The lab file itself failed (a typo, a bad value): one line naming the learner's own line.

    A notebook shows it as that line alone (IPython asks an exception for ``_render_traceback_``), so no
    frame of this library reaches the learner: the error is in their file, not here."""

    def _render_traceback_(self) -> list[str]:
        return [f"LabFailed: {self}"]


def lab_error_line(stderr: str, lab_name: str) -> str:
    r"""One line from a failed lab's stderr: the lab's own line (the last frame in it) and the error.

    >>> err = ('Traceback (most recent call last):\n  File "/w/l14-04-model-memory.py", line 23, in <module>\n'
    ...        '    x = active_sequencez\nNameError: name \'active_sequencez\' is not defined\n')
    >>> lab_error_line(err, "l14-04-model-memory.py")
    "l14-04-model-memory.py, line 23: NameError: name 'active_sequencez' is not defined"
    >>> lab_error_line('  File "/w/l14-04-model-memory.py", line 5\n    x = (\n        ^\nSyntaxError: '
    ...                "'(' was never closed\n", "l14-04-model-memory.py")
    "l14-04-model-memory.py, line 5: SyntaxError: '(' was never closed"
    """
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    error = next((line.strip() for line in reversed(lines) if not line.startswith((" ", "\t"))), "(no output)")
    frames = re.findall(r'File "([^"]+)", line (\d+)', stderr)
    own = [number for path, number in frames if Path(path).name == lab_name]
    where = f"{lab_name}, line {own[-1]}" if own else lab_name
    return f"{where}: {error}"[:300]


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


def knob_assignments(tree: ast.Module) -> list[ast.Assign]:
    """Top-level ``active_sequences = ...`` statements of a parsed lab."""
    return [n for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and n.targets[0].id == KNOB]


def edit_knob(text: str, value: int) -> str:
    """The lab's source with only the value of its one ``active_sequences`` assignment replaced.

    The assignment is found in the syntax tree, so a comment or a string that mentions
    ``active_sequences = 8`` is never touched; the rest of the line (its comment) is kept.
    """
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise CourseInputError(f"the lab does not parse (line {e.lineno}: {e.msg}); restore it from the release") from None
    knobs = knob_assignments(tree)
    if len(knobs) != 1:
        raise CourseInputError(f"the lab should assign {KNOB} exactly once at the top level; found {len(knobs)}")
    node = knobs[0].value
    if node.lineno != node.end_lineno:
        raise CourseInputError(f"the value of {KNOB} spans several lines; write it on one line")
    lines = text.splitlines(keepends=True)
    line = lines[node.lineno - 1]
    # col_offset counts UTF-8 bytes; the knob's line is ASCII up to its value in every lab we ship
    start, end = _char_offset(line, node.col_offset), _char_offset(line, node.end_col_offset)
    lines[node.lineno - 1] = line[:start] + repr(int(value)) + line[end:]
    return "".join(lines)


def _char_offset(line: str, byte_offset: int) -> int:
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", "ignore"))


def parse_output(text: str) -> dict:
    """Read the lab's printed ``name = value`` lines and its verdict into a dict.

    ``fits`` is set only by a verdict line that starts with exactly
    ``verdict: the workload fits`` (True) or ``verdict: the workload does not fit`` (False).
    A value that is not a Python literal is kept as its text.
    """
    out: dict = {}
    for line in text.splitlines():
        if line.startswith("verdict:"):
            out["verdict"] = line.strip()
            if line.startswith(DOES_NOT_FIT):
                out["fits"] = False
            elif line.startswith(FITS):
                out["fits"] = True
            continue
        name, sep, value = line.partition(" = ")
        if not sep or not name.isidentifier():
            continue
        value = value.split("  (")[0].split(" of ")[0].strip()
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            out[name] = value
    return out


#: While a grader runs the notebook (NBGRADER_EXECUTION, set by nbgrader and course-grade alike),
#: what each lab file printed, by its bytes: the notebook runs the lab twice, and a grader gives
#: it the same file both times, so the second run would print the same lines again.
_GRADED_RUNS: dict[tuple[str, str, str], dict] = {}


def run_lab(path: str | Path | None = None, timeout_s: float = 60) -> dict:
    """Run the lab script in a fresh Python and return its parsed output (plus ``stdout``).

    While a grader runs the notebook, a lab file that already ran, byte for byte the same, is not
    run again: its output is given again (the lab computes a budget and prints it; nothing else).
    """
    lab = Path(path) if path else find_lab_file()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    key = None
    if grading():
        key = (str(lab.resolve()), hashlib.sha256(lab.read_bytes()).hexdigest(), env["PYTHONPATH"])
        if key in _GRADED_RUNS:
            return copy.deepcopy(_GRADED_RUNS[key])
    proc = subprocess.run([sys.executable, str(lab)], capture_output=True, text=True, env=env,
                          cwd=lab.parent, timeout=timeout_s)
    if proc.returncode != 0:
        raise LabFailed(f"{lab_error_line(proc.stderr, lab.name)} (the lab file failed: fix that line and run "
                        "this cell again)") from None
    result = parse_output(proc.stdout)
    result["stdout"] = proc.stdout
    if key is not None:
        _GRADED_RUNS[key] = copy.deepcopy(result)
    return result


def run_lab_source(source: str, timeout_s: float = 60) -> dict:
    """Run a lab given as text (e.g. :func:`edit_knob`'s result) in the repository layout."""
    with tempfile.TemporaryDirectory(prefix="course-lab-") as tmp:
        lab = Path(tmp) / LAB_RELATIVE
        lab.parent.mkdir(parents=True)
        lab.write_text(source, encoding="utf-8")
        return run_lab(lab, timeout_s=timeout_s)

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
#: The one line the lab asks learners to change, and its released value (course_lib.scenario's
#: LAB_ACTIVE_SEQUENCES, which the grader compares with).
KNOB = "active_sequences"
LAB_RELEASED_SEQUENCES, LAB_EDITED_SEQUENCES = 8, 16

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


def code_lines(text: str) -> list[tuple[int, str]]:
    r"""The lines of a lab that hold code, as (line number, text without its comment or trailing spaces).

    >>> code_lines('x = 1   # a knob\n\n# a note\ns = "# kept"\n')
    [(1, 'x = 1'), (4, 's = "# kept"')]
    """
    import io
    import tokenize

    comment_at: dict[int, int] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                comment_at[token.start[0]] = token.start[1]
    except (tokenize.TokenError, SyntaxError):      # an unfinished file: its lines as they stand
        pass
    lines = [(n, line[:comment_at.get(n, len(line))].rstrip()) for n, line in enumerate(text.splitlines(), 1)]
    return [(n, line) for n, line in lines if line.strip()]


def line_digest(line: str) -> str:
    """A short SHA-256 of one line of code (what :data:`RELEASED_CODE_LINES` holds)."""
    return hashlib.sha256(line.encode("utf-8")).hexdigest()[:10]


#: The released lab's lines of code (:func:`code_lines`, the knob at its released 8), as :func:`line_digest`s:
#: what :func:`lab_changes` compares a learner's lab with (the learner's folder keeps no released copy).
#: tests/lesson/test_lab.py holds them to labs/notebooks/level-14/l14-04-model-memory.py.
RELEASED_CODE_LINES: tuple[str, ...] = (
    '6ff69d8c8b', '4a06b3ba9c', 'bb52d4bad5', '55f720b65f', '02e644be31', '3629639441', '931852705e',
    '102e87c59d', '01672fcbc4', 'b6d267efe8', '9e77b3746e', '6d69f2ac09', '3170189119', 'a3ac8280f5',
    '23fb5d372e', 'e83404162e', 'f4a5e2dd51', '0c0a36ddb9', 'cb21160c13', 'b9bfffe8b4', 'd3cf20f50f',
    '33cece7ccc', '5a4718b335', 'f3a335c63b', 'de690631fb', '513a486457', '0a1f1936e3', '1a95a3280c',
    '2ee027f19d', '19ea241a58', 'b24db457c9', '46a8666e6c', 'ba5ec51d07', '53e60e415b', '236ea7169b',
    '75f5d6094b', '764cf16d4a', '1bd31a54a3', 'a35eee9cf8', '3d8e3a2ea2', '1dd44750ad', 'db796111d3',
    'd88f5439dc', '1ef23b5099', 'b5fe7a469b', '675c27cf48', '92651edffc',
)


def lab_changes(text: str, released: tuple[str, ...] = RELEASED_CODE_LINES) -> list[str]:
    r"""The changes of a lab against the release other than the value of ``active_sequences``, one line each
    (comments and blank lines are free, as for the grader); [] when only the knob changed.

    >>> released = tuple(line_digest(t) for _, t in code_lines("'Step 3: set x = 8'\nactive_sequences = 8\n"))
    >>> lab_changes("'Step 3: set x = 8'\nactive_sequences = 16  # done\n", released)
    []
    >>> lab_changes("'Step 3: set x = 16'\nactive_sequences = 16\n", released)
    ["line 1: 'Step 3: set x = 16'"]
    """
    import difflib

    try:
        normalized = edit_knob(text, LAB_RELEASED_SEQUENCES)
    except CourseInputError as exc:
        return [str(exc)]
    code = code_lines(normalized)
    mine = [line_digest(line) for _, line in code]
    changes = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, released, mine, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            changes += [f"line {code[j][0]}: {code[j][1].strip()[:80]}" for j in range(j1, j2)]
        elif tag == "delete":
            changes.append(f"{i2 - i1} line(s) of code removed after line {code[j1 - 1][0] if j1 else 0}")
    return changes


def knob_value(text: str):
    """The value ``active_sequences`` is given in a lab's text (None if it does not parse or has no one knob)."""
    try:
        knobs = knob_assignments(ast.parse(text))
    except SyntaxError:
        return None
    if len(knobs) != 1:
        return None
    node = knobs[0].value
    return node.value if isinstance(node, ast.Constant) else ast.unparse(node)


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

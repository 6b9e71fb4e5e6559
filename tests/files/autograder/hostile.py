"""Crafted submissions for the hardening tests, built on ``fixture/l14-04-model-memory.ipynb`` (fast: no torch, no plots).

The fixture's max score is 5 notebook points (2 + 1 + 2) plus the lab's points (:data:`LAB_POINTS`, the real lesson's lab
check: 2) = 7.
Each case says what the grader must decide: status, score, and per-question status.
The batch runs them with a 5 s cell timeout, a 15 s notebook timeout, 512 MiB of memory
and 64 MiB of disk (see :data:`BATCH`).
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat

from lessons.l14_04.lab import QUESTIONS as _LAB_QUESTIONS

LAB_POINTS = float(sum(_LAB_QUESTIONS.values()))
"""The lab check's points (the real lesson's: the edit 1, its two effects 0.5 each)."""

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
FIXTURE = HERE / "fixture" / "l14-04-model-memory.ipynb"   # the fixture notebook, under the name it is released as
FIXTURE_LESSON = HERE / "fixture_lesson.py"
LAB = REPO / "labs" / "notebooks" / "level-14" / "l14-04-model-memory.py"
ASSIGNMENT = "l14-04-model-memory"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", re.S)
ANSWER_MIME = "application/vnd.course-answer+json"
#: The limits the hardening batch grades under (tests/autograder/test_hardening.py).
BATCH = {"cell_timeout": 5, "notebook_timeout": 15, "memory_limit": "512MiB", "disk_limit": "64MiB"}
#: A file outside the class that a hand-in links to; its text must never reach any result.
SECRET = "SECRET-d41d8cd98f00b204"
CORRECT = {"test_kv_per_token": [327_680, 28_672], "test_weights_bytes": [14_000_000_000, 4_015_000_000],
           "test_max_sequences": [17]}


def assignment(notebook: Path = FIXTURE, lesson: Path | str = FIXTURE_LESSON):
    """The fixture assignment: ``notebook`` with the lab beside it, graded by ``lesson`` (the fixture's own)."""
    from autograder.source.assignment import Assignment

    return Assignment(name=ASSIGNMENT, notebooks=(Path(notebook),), files=(LAB,), lesson=str(lesson))


#: What the fixture's batch tests write into a child Python to grade with the fixture assignment.
ASSIGNMENT_CODE = ("from autograder.source.assignment import Assignment; "
                   f"fixture = Assignment(name={ASSIGNMENT!r}, notebooks=({str(FIXTURE)!r},), files=({str(LAB)!r},), "
                   f"lesson={str(FIXTURE_LESSON)!r}); ")


def lab_text(active_sequences: int = 16) -> str:
    return LAB.read_text().replace("active_sequences = 8 ", f"active_sequences = {active_sequences} ", 1)


def learner_notebook() -> nbformat.NotebookNode:
    """What a learner who solved everything hands in: solutions in, hidden tests absent."""
    nb = nbformat.read(FIXTURE, as_version=4)
    for cell in nb.cells:
        cell.source = HIDDEN.sub("", cell.source)
    return nb


def _index(nb, grade_id: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def insert_after(nb, grade_id: str, *sources: str):
    at = _index(nb, grade_id) + 1
    for offset, source in enumerate(sources):
        nb.cells.insert(at + offset, nbformat.v4.new_code_cell(source))
    return nb


def set_answer(nb, grade_id: str, source: str):
    nb.cells[_index(nb, grade_id)].source = source
    return nb


def delete(nb, *grade_ids: str):
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in grade_ids]
    return nb


WRONG_KV = "def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, bytes_per_value):\n    return 0\n"
WRONG_WEIGHTS = "def weights_bytes(num_params, bits_per_value):\n    return 0\n"
BLANK_KV = ("def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, bytes_per_value):\n"
            "    raise NotImplementedError()\n")
BLANK_WEIGHTS = "def weights_bytes(num_params, bits_per_value):\n    raise NotImplementedError()\n"


def _forge(grade_id: str, got) -> str:
    payload = {"grade_id": grade_id, "values": {"got": got}}
    return f"display({{{ANSWER_MIME!r}: {payload!r}}}, raw=True)"


# A post_run_cell hook runs inside each test cell's execution, so what it displays lands in that cell.
CONFLICT_HOOK = r"""\
import re
from IPython.display import display
def _forge(result):
    m = re.search(r'record[(][\'"](test_\w+)[\'"]', result.info.raw_cell or '')
    if m:
        display({'application/vnd.course-answer+json': {'grade_id': m.group(1), 'values': {'got': [0]}}}, raw=True)
get_ipython().events.register('post_run_cell', _forge)
"""
WRONG_ID_HOOK = """\
from IPython.display import display
def _forge(result):
    display({'application/vnd.course-answer+json': {'grade_id': 'test_max_sequences', 'values': {'got': [17]}}},
            raw=True)
get_ipython().events.register('post_run_cell', _forge)
"""


@dataclass
class Case:
    student_id: str
    build: Callable[[dict], nbformat.NotebookNode | bytes | Callable | str | None]
    """Given the test's context (paths, port): the notebook, raw bytes, None (no notebook), "symlink",
    "no-folder", or a function that makes the notebook's path itself (links, FIFOs)."""
    status: str
    score: float | None
    """Expected autograded score, or None when it depends on the isolation (checked by the test)."""
    questions: dict[str, str] = field(default_factory=dict)
    """grade_id -> expected question status (passed / failed / not_run)."""
    lab: str | None = "16"
    """"16" (correct edit), None (no lab file), or raw lab text."""


def _isolation_probe(ctx: dict) -> str:
    targets = json.dumps(ctx["targets"])
    return (
        "import json, os\n"
        f"report = {{}}\n"
        f"for name, path in json.loads({targets!r}).items():\n"
        "    try:\n"
        "        with open(path, 'a') as f:\n"
        "            f.write('tampered')\n"
        "        report[name + ':write'] = True\n"
        "    except OSError:\n"
        "        report[name + ':write'] = False\n"
        "    try:\n"
        "        with open(path, 'rb') as f:\n"
        "            f.read(1)\n"
        "        report[name + ':read'] = True\n"
        "    except OSError:\n"
        "        report[name + ':read'] = False\n"
        "print('ISOLATION ' + json.dumps(report, sort_keys=True))\n"
    )


FORK_BOMB = (
    "import os, time\n"
    "children = []\n"
    "for i in range(2000):\n"
    "    try:\n"
    "        pid = os.fork()\n"
    "    except OSError:\n"
    "        break\n"
    "    if pid == 0:\n"
    "        time.sleep(120)\n"
    "        os._exit(0)\n"
    "    children.append(pid)\n"
    "print('FORKS', len(children))\n"
    "for pid in children:\n"
    "    os.kill(pid, 9)\n"
    "    os.waitpid(pid, 0)\n"
)


def network_probe(port: int) -> str:
    return (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=3).close()\n"
        "    reached = True\n"
        "except OSError:\n"
        "    reached = False\n"
        "print('NETWORK', reached)\n"
    )


KV_ANSWER = ("def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, bytes_per_value):\n"
             "    return 2 * num_layers * num_kv_heads * head_dim * bytes_per_value\n")
WEIGHTS_ANSWER = "def weights_bytes(num_params, bits_per_value):\n    return num_params * bits_per_value // 8\n"
# Passes the visible check, then raises from inside the hidden one, quoting the hidden line that
# called it (inspect reads it from the cell) and the hidden inputs.
QUOTES_HIDDEN = ("def kv_bytes_per_token(*args):\n"
                 "    import inspect\n"
                 "    if args == (32, 32, 128, 2):\n"
                 "        return 524288\n"
                 "    line = inspect.stack()[1].code_context[0].strip()\n"
                 "    raise ValueError(line + repr(args))\n")
# The same, with terminal escapes (a window title, clear screen, red, carriage return, backspace) instead.
ESCAPES_IN_ERROR = QUOTES_HIDDEN.replace("line + ", "'\\x1b]0;owned\\x07\\x1b[2J\\x1b[31mred\\r\\x08' + ")
# 3 s of CPU (the notebook's limit is CPU time: six of these pass its 15 s; six sleeps would not).
BURNS_3_CPU_S = "import time\nt = time.process_time()\nwhile time.process_time() - t < 3:\n    pass"
# Loops that run before the answer's definition, so the answer is lost with the cell.
IGNORES_SIGINT = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n"
CATCHES_INTERRUPT = "while True:\n    try:\n        while True:\n            pass\n    except KeyboardInterrupt:\n        pass\n"
DISK_HOG = ("i = 0\nwhile True:  # 12 GB in 20 s on a bare host folder\n"
            "    with open(f'fill-{i}.bin', 'wb') as f:\n        f.write(b'x' * (8 * 2**20))\n    i += 1\n")
# Forks until the cap and leaves every child running: later cells could start no process at all.
FORKS_LEFT_RUNNING = "import os\nwhile True:\n    if os.fork() == 0:\n        os.execv('/bin/sleep', ['sleep', '600'])\n"
# Every shape of metadata.nbgrader that is not what nbgrader writes (7), each applied to an
# answer cell, a test cell, a locked markdown cell and the hand-graded answer: 28 (shape, cell) pairs.
BAD_METADATA = {"null": None, "list": [], "string": "x", "number": 5, "true": True,
                "gid_list": {"grade": True, "grade_id": ["test_kv_per_token"], "locked": True, "points": 2},
                "gid_dict": {"grade": True, "grade_id": {"id": "test_kv_per_token"}, "locked": True, "points": 2}}
BAD_METADATA_CELLS = ("kv_per_token", "test_kv_per_token", "intro", "explain_budget")


def bad_metadata(shape, cells=BAD_METADATA_CELLS) -> nbformat.NotebookNode:
    nb = learner_notebook()
    for i in [_index(nb, gid) for gid in cells]:
        nb.cells[i].metadata["nbgrader"] = copy.deepcopy(shape)
    return nb


def huge_notebook(cells: int = 250_000) -> bytes:
    """250,000 markdown cells: 15.9 MiB, under the file size cap (written as JSON: nbformat is slow here)."""
    nb = json.loads(nbformat.writes(learner_notebook()))
    nb["cells"] += [{"cell_type": "markdown", "id": f"m{i}", "metadata": {}, "source": "scratch"}
                    for i in range(cells)]
    return json.dumps(nb, separators=(",", ":")).encode()


def hard_link_to(target: str):
    def make(path: Path) -> None:
        os.link(target, path)
    return make


def fifo(path: Path) -> None:
    os.mkfifo(path)  # a naive reader blocks here forever


def foreign_owner(path: Path) -> None:
    nbformat.write(learner_notebook(), path)
    if os.geteuid() == 0:
        os.chown(path, 4242, 4242)
    else:  # cannot chown without root: a second link makes it refused all the same
        os.link(path, path.with_suffix(".bak"))


CASES = [
    Case("ref", lambda ctx: learner_notebook(), "graded", 5 + LAB_POINTS,
         {"test_kv_per_token": "passed", "test_weights_bytes": "passed", "test_max_sequences": "passed"}),
    # ---- limits
    # A cell that dies, hangs or hits a limit costs only the questions it breaks: the kernel is
    # interrupted, or replaced by a fresh one that replays the cells before, and the rest runs.
    Case("kernel_dies", lambda ctx: insert_after(learner_notebook(), "test_kv_per_token", "import os; os._exit(1)"),
         "kernel_died", 5 + LAB_POINTS,
         {"test_kv_per_token": "passed", "test_weights_bytes": "passed", "test_max_sequences": "passed"}),
    Case("dies_in_answer", lambda ctx: set_answer(learner_notebook(), "weights", "import os; os._exit(1)\n" + WEIGHTS_ANSWER),
         "kernel_died", 4 + LAB_POINTS,
         {"test_kv_per_token": "passed", "test_weights_bytes": "failed", "test_max_sequences": "passed"}),
    Case("memory_hog", lambda ctx: insert_after(learner_notebook(), "test_kv_per_token",
                                                "hog = b'x' * (3 * 2**30)"),
         "memory_limit", 5 + LAB_POINTS, {"test_kv_per_token": "passed", "test_weights_bytes": "passed"}),
    Case("infinite_loop", lambda ctx: insert_after(learner_notebook(), "test_kv_per_token", "while True:\n    pass"),
         "timeout", 5 + LAB_POINTS, {"test_kv_per_token": "passed", "test_weights_bytes": "passed"}),
    Case("loop_in_first_answer", lambda ctx: set_answer(learner_notebook(), "kv_per_token",
                                                        "while True:\n    pass\n" + KV_ANSWER),
         "timeout", 3 + LAB_POINTS, {"test_kv_per_token": "failed", "test_weights_bytes": "passed", "test_max_sequences": "passed"}),
    Case("ignores_interrupt", lambda ctx: insert_after(set_answer(learner_notebook(), "kv_per_token",
                                                                  IGNORES_SIGINT + KV_ANSWER), "intro",
                                                       "print('printed once')"),
         "timeout", 3 + LAB_POINTS, {"test_kv_per_token": "failed", "test_weights_bytes": "passed", "test_max_sequences": "passed"}),
    Case("catches_interrupt", lambda ctx: set_answer(learner_notebook(), "weights", CATCHES_INTERRUPT + WEIGHTS_ANSWER),
         "timeout", 4 + LAB_POINTS, {"test_kv_per_token": "passed", "test_weights_bytes": "failed", "test_max_sequences": "passed"}),
    Case("slow_notebook", lambda ctx: insert_after(learner_notebook(), "test_kv_per_token",
                                                   *[BURNS_3_CPU_S] * 6),
         "timeout", 2 + LAB_POINTS, {"test_kv_per_token": "passed", "test_max_sequences": "not_run"}),
    # correct but slow: 2 s of CPU in a 5 s limit, which a busy machine stretched past 5 s of wall clock
    Case("slow_but_correct", lambda ctx: insert_after(learner_notebook(), "test_kv_per_token",
                                                      BURNS_3_CPU_S.replace("< 3", "< 2")),
         "graded", 5 + LAB_POINTS, {"test_kv_per_token": "passed", "test_weights_bytes": "passed", "test_max_sequences": "passed"}),
    Case("fork_bomb", lambda ctx: insert_after(learner_notebook(), "test_kv_per_token", FORK_BOMB),
         "process_limit", 5 + LAB_POINTS),
    Case("forks_left_running", lambda ctx: insert_after(learner_notebook(), "test_kv_per_token", FORKS_LEFT_RUNNING),
         "process_limit", 5 + LAB_POINTS, {"test_kv_per_token": "passed", "test_weights_bytes": "passed"}),
    Case("disk_hog", lambda ctx: insert_after(learner_notebook(), "test_kv_per_token", DISK_HOG),
         "disk_limit", 5 + LAB_POINTS, {"test_kv_per_token": "passed", "test_weights_bytes": "passed"}),
    Case("flood_in_answer", lambda ctx: set_answer(learner_notebook(), "kv_per_token",
                                                   KV_ANSWER + "for i in range(300_000):\n    print(i)\n"),
         "graded", 5 + LAB_POINTS),
    Case("network", lambda ctx: insert_after(learner_notebook(), "test_kv_per_token", network_probe(ctx["port"])),
         "graded", 5 + LAB_POINTS),
    Case("output_flood", lambda ctx: insert_after(learner_notebook(), "test_kv_per_token",
                                                  "print('x' * 50_000_000)", "for i in range(200_000): print(i)"),
         "graded", 5 + LAB_POINTS),
    # ---- isolation
    Case("isolation", lambda ctx: insert_after(learner_notebook(), "test_kv_per_token", _isolation_probe(ctx)),
         "graded", 5 + LAB_POINTS),
    # ---- tampering and trusted scoring
    Case("tamper_edit", lambda ctx: set_answer(set_answer(learner_notebook(), "test_kv_per_token", "pass"),
                                               "kv_per_token", WRONG_KV),
         "graded", 3 + LAB_POINTS, {"test_kv_per_token": "failed", "test_weights_bytes": "passed"}),
    Case("tamper_delete", lambda ctx: set_answer(delete(learner_notebook(), "test_weights_bytes", "test_max_sequences"),
                                                 "weights", WRONG_WEIGHTS),
         "graded", 4 + LAB_POINTS, {"test_weights_bytes": "failed", "test_max_sequences": "passed"}),
    Case("always_equal", lambda ctx: set_answer(learner_notebook(), "weights",
                                                "class Sneaky(int):\n"
                                                "    def __eq__(self, other):\n        return True\n"
                                                "    __hash__ = int.__hash__\n"
                                                "def weights_bytes(num_params, bits_per_value):\n"
                                                "    return Sneaky(0)\n"),
         "graded", 4 + LAB_POINTS, {"test_weights_bytes": "failed"}),
    Case("quotes_hidden", lambda ctx: set_answer(learner_notebook(), "kv_per_token", QUOTES_HIDDEN),
         "graded", 3 + LAB_POINTS, {"test_kv_per_token": "failed", "test_weights_bytes": "passed"}),
    Case("escapes_in_error", lambda ctx: set_answer(learner_notebook(), "kv_per_token", ESCAPES_IN_ERROR),
         "graded", 3 + LAB_POINTS, {"test_kv_per_token": "failed", "test_weights_bytes": "passed"}),
    Case("traceback_hidden", lambda ctx: insert_after(
        set_answer(set_answer(learner_notebook(), "kv_per_token", BLANK_KV), "weights", BLANK_WEIGHTS),
        "intro", "get_ipython().showtraceback = lambda *args, **kwargs: None\n"
                 "get_ipython()._showtraceback = lambda *args, **kwargs: None"),
         "graded", 2 + LAB_POINTS, {"test_kv_per_token": "failed", "test_weights_bytes": "failed", "test_max_sequences": "passed"}),
    Case("forged_in_answer_cell", lambda ctx: insert_after(
        set_answer(learner_notebook(), "kv_per_token", WRONG_KV), "kv_per_token",
        "from IPython.display import display\n" + _forge("test_kv_per_token", CORRECT["test_kv_per_token"])),
         "graded", 3 + LAB_POINTS, {"test_kv_per_token": "failed"}),
    Case("conflicting_answers", lambda ctx: insert_after(learner_notebook(), "intro", CONFLICT_HOOK),
         "graded", 0 + LAB_POINTS, {"test_kv_per_token": "failed", "test_weights_bytes": "failed", "test_max_sequences": "failed"}),
    Case("wrong_id_answers", lambda ctx: insert_after(learner_notebook(), "intro", WRONG_ID_HOOK),
         "graded", 2 + LAB_POINTS, {"test_kv_per_token": "failed", "test_weights_bytes": "failed", "test_max_sequences": "passed"}),
    Case("invented_grade_cell", lambda ctx: _invented(learner_notebook()), "graded", 5 + LAB_POINTS),
    # ---- noise
    Case("stderr_noise", lambda ctx: insert_after(
        learner_notebook(), "kv_per_token",
        "import sys, warnings\nwarnings.warn('this API is deprecated', DeprecationWarning)\n"
        "warnings.warn('numerical precision may be lost', UserWarning)\n"
        "print('Traceback (most recent call last): not really', file=sys.stderr)\n"), "graded", 5 + LAB_POINTS),
    # ---- broken or absent hand-ins
    Case("corrupt_json", lambda ctx: b'{"cells": [ {"cell_type": "code", "source": "1 +', "invalid_submission", 0.0),
    Case("not_a_notebook", lambda ctx: b'{"cells": 5, "nbformat": 4}', "invalid_submission", 0.0),
    Case("binary_garbage", lambda ctx: bytes(range(256)) * 10, "invalid_submission", 0.0),
    Case("missing_notebook", lambda ctx: None, "missing_submission", 0.0),
    Case("missing_folder", lambda ctx: "no-folder", "missing_submission", 0.0, lab=None),
    Case("symlinked_notebook", lambda ctx: "symlink", "invalid_submission", 0.0),
    Case("hardlinked_secret", lambda ctx: hard_link_to(ctx["secret"]), "invalid_submission", 0.0),
    Case("hardlinked_copy", lambda ctx: hard_link_to(ctx["outside_notebook"]), "invalid_submission", 0.0),
    Case("fifo_notebook", lambda ctx: fifo, "invalid_submission", 0.0),
    Case("foreign_owner", lambda ctx: foreign_owner, "invalid_submission", 0.0),
    Case("huge_notebook", lambda ctx: huge_notebook(), "invalid_submission", 0.0),
    # ---- malformed nbgrader metadata: restored from the source, graded as usual
    *[Case(f"meta_{name}", lambda ctx, shape=shape: bad_metadata(shape), "graded", 5 + LAB_POINTS,
           {"test_kv_per_token": "passed", "test_weights_bytes": "passed", "test_max_sequences": "passed"})
      for name, shape in BAD_METADATA.items()],
    # ---- names: "=1+2" and "a\tb" are not student ids (autograder.batch.student_ids): the test skips them
    # ---- the lab file
    Case("no_lab_file", lambda ctx: learner_notebook(), "graded", 5.0, lab=None),
    # a coding cookie other than UTF-8: Python would run other text than the one compared (a utf-7
    # comment holds a line: +AAo- is a newline); refused, never run
    Case("utf7_lab", lambda ctx: learner_notebook(), "graded", 5.0,
         {"lab_edit_only_active_sequences": "not_run", "lab_reports_not_fit": "not_run", "lab_only_kv_doubled": "not_run"},
         lab="# -*- coding: utf-7 -*-\n" + lab_text(16) + "# +AAo-import builtins+ADs- builtins.print = lambda *a, **k: None\n"),
]


def _invented(nb):
    cell = nbformat.v4.new_code_cell("print('free points')")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": "bonus",
                                 "points": 100, "schema_version": 3}
    nb.cells.append(cell)
    return nb


def write_class(submitted: Path, ctx: dict, cases=CASES) -> None:
    """SUBMITTED/<student>/<assignment>/ for every case."""
    for case in cases:
        folder = submitted / case.student_id / ASSIGNMENT
        built = case.build(ctx)
        if built == "no-folder":
            (submitted / case.student_id).mkdir(parents=True)
            continue
        folder.mkdir(parents=True)
        if built == "symlink":
            (folder / NOTEBOOK).symlink_to(submitted / "ref" / ASSIGNMENT / NOTEBOOK)
        elif callable(built):
            built(folder / NOTEBOOK)
        elif isinstance(built, bytes):
            (folder / NOTEBOOK).write_bytes(built)
        elif built is not None:
            nbformat.write(copy.deepcopy(built), folder / NOTEBOOK)
        if case.lab == "16":
            (folder / LAB.name).write_text(lab_text(16))
        elif case.lab is not None:
            (folder / LAB.name).write_text(case.lab)

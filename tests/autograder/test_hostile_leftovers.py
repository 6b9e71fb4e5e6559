"""What learner code sends the grader or leaves behind costs that hand-in's own points, never a grader error
(issue 39, round 5).

nbgrader's own example ``ps1/problem1.ipynb`` (tests/files/nbgrader_example: 3 autograded points), its
instructor solution handed in three times, graded in one batch by one worker, one after another:

- ``a_message``: its ``squares`` answer, the first time it is called with 1 (by the ``correct_squares`` test),
  sends a message on the kernel's own IOPub socket whose header is 200,000 arrays deep. Before, the
  grader's ``json.loads`` raised RecursionError: ``grader_error``, 0 points, "the grader failed". Now that
  test fails with an error saying why (1 point lost), the rest score: 2 of 3.
- ``b_leftovers``: its answer cell leaves in the working folder a chain of 1,500 nested folders, a fifo,
  a socket, a name with a newline, a 255-character name, a folder of mode 000, and a chain whose path is
  longer than PATH_MAX. Where no tmpfs can be mounted (the disk watchdog: the scratch folder is removed
  file by file), ``shutil.rmtree`` recursed into RecursionError: ``grader_error``. Now: 3 of 3.
- ``c_next``: the same solution untouched, graded after them by the same worker: 3 of 3.
- ``d_json``: the solution with 200,000 empty objects in a cell's metadata: refused before any of them is
  built (``invalid_submission``, 0 points, the message says why), as a hand-in that is not JSON is.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest

import autograder.run.grade
from autograder.source.assignment import Assignment
from autograder.batch.autograde import main as autograde
from autograder.sandbox import probe

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[1] / "files" / "nbgrader_example" / "source" / "ps1"

DEEP_MESSAGE = '''
_sent = []
def _send_deep_header():
    """200,000 nested arrays as the header (and every other part) of a message on this kernel's IOPub."""
    deep = b"[" * 200_000 + b"]" * 200_000
    kernel = get_ipython().kernel
    kernel.iopub_socket.send_multipart([b"execute_result", b"<IDS|MSG>", b"", deep, deep, deep, deep])
    import time; time.sleep(0.3)
'''

LEAVE = '''
import os, socket
here = os.getcwd()
os.mkdir("chain"); os.chdir("chain")
for _ in range(1500):
    os.mkdir("d"); os.chdir("d")
os.chdir(here)
os.mkdir("long"); os.chdir("long")
for _ in range(20):                       # 20 x 255 characters: past PATH_MAX (4,096)
    os.mkdir("L" * 255); os.chdir("L" * 255)
os.chdir(here)
os.mkfifo("fifo")
_keep = socket.socket(socket.AF_UNIX); _keep.bind("sock")
open("name\\nwith a newline", "w").write("x")
open("n" * 255, "w").write("x")
os.mkdir("locked"); open("locked/f", "w").write("x"); os.chmod("locked", 0)
'''


def _hand_in(edit: dict[str, str]) -> nbformat.NotebookNode:
    """The instructor's solution with ``edit[grade_id]`` put before that answer cell's code."""
    nb = nbformat.read(EXAMPLE / "problem1.ipynb", as_version=4)
    for cell in nb.cells:
        gid = (cell.metadata.get("nbgrader") or {}).get("grade_id")
        if gid in edit:
            cell.source = edit[gid] + "\n" + cell.source
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("leftovers")
    source = root / "source" / "ps1"
    source.mkdir(parents=True)
    shutil.copy(EXAMPLE / "problem1.ipynb", source)
    shutil.copy(EXAMPLE / "jupyter.png", source)
    hand_ins = {
        "a_message": _hand_in({"squares": DEEP_MESSAGE}),
        "b_leftovers": _hand_in({"squares": LEAVE}),
        "c_next": _hand_in({}),
    }
    # a_message: squares(1) sends the message once (the correct_squares test makes that call first)
    for cell in hand_ins["a_message"].cells:
        if (cell.metadata.get("nbgrader") or {}).get("grade_id") == "squares":
            cell.source = cell.source.replace('    """\n', '    """\n    if n == 1 and not _sent:\n        _sent.append(1)\n'
                                              '        _send_deep_header()\n', 1)
    submitted = root / "submitted"
    for sid, nb in hand_ins.items():
        (submitted / sid / "ps1").mkdir(parents=True)
        nbformat.write(nb, submitted / sid / "ps1" / "problem1.ipynb")
    wide = _hand_in({})
    wide.cells[0].metadata["x"] = "WIDE"
    (submitted / "d_json" / "ps1").mkdir(parents=True)
    (submitted / "d_json" / "ps1" / "problem1.ipynb").write_bytes(
        nbformat.writes(wide).encode().replace(b'"WIDE"', b"[" + b",".join([b"{}"] * 200_000) + b"]"))
    # No tmpfs: the scratch folder is removed file by file (what a host without mount rights does).
    watchdog = dataclasses.replace(probe(), disk="watchdog")
    mp = pytest.MonkeyPatch()
    mp.setattr(autograder.run.grade, "probe", lambda: watchdog)
    try:
        batch = autograde(submitted, out=root / "results", workers=1, progress=False,
                          assignment=Assignment.from_source(source))
    finally:
        mp.undo()
    return {"batch": batch, "results": root / "results"}


def _why(r) -> str:
    return f"{r.status} {r.score}: {r.message} " + "; ".join(f"{k}={q.status} {q.message}" for k, q in r.questions.items())


def test_a_message_nested_200000_deep_fails_its_test_not_the_grader(graded):
    r = graded["batch"].students["a_message"]
    assert r.status == "graded" and r.score == 2.0 and r.max_score == 3.0, _why(r)
    assert r.questions["correct_squares"].score == 0.0, _why(r)
    nb = nbformat.read(graded["results"] / "autograded" / "a_message" / "ps1" / "problem1.ipynb", as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert [e.ename for e in errors] == ["MalformedKernelMessage"], errors
    assert "nests deeper than 100 levels" in errors[0].evalue or "more than 100,000" in errors[0].evalue


def test_a_deep_chain_and_odd_files_left_in_the_folder_cost_nothing(graded):
    r = graded["batch"].students["b_leftovers"]
    assert r.status == "graded" and r.score == 3.0, _why(r)


def test_the_next_student_is_unaffected_and_nothing_is_left_behind(graded):
    r = graded["batch"].students["c_next"]
    assert r.status == "graded" and r.score == 3.0, _why(r)
    grades = json.loads((graded["results"] / "grades.json").read_text())["students"]
    assert {sid: s["status"] for sid, s in grades.items()} == {"a_message": "graded", "b_leftovers": "graded",
                                                               "c_next": "graded", "d_json": "invalid_submission"}
    mine = [p for p in Path(tempfile.gettempdir()).glob("cg-*") if (p / "work" / "chain").exists()]
    assert mine == [], f"a sandbox's scratch folder was left behind: {mine}"


SIGNED = '''
kernel = get_ipython().kernel
parent = kernel.get_parent()
deep = {}
for _ in range(500):                     # deep, but within json's recursion: parsed, then kept, before
    deep = {"d": deep}
kernel.session.send(kernel.iopub_socket, "display_data", {"data": {"text/plain": "x"}, "metadata": deep},
                    parent=parent)
kernel.session.send(kernel.iopub_socket, "stream", {"name": "stdout", "text": "wide\\n"}, parent=parent,
                    metadata={"m": [{} for _ in range(200_000)]})   # 200,000 objects: 2 MB of them
kernel.iopub_socket.send_multipart([b"stream", b"<IDS|MSG>", b"", b"[" * 50_000, b"{}", b"{}", b"{}"])  # never closed
kernel.session.send(kernel.iopub_socket, "error", {"ename": "Flood", "evalue": "", "traceback": [""] * 2_000_000},
                    parent=parent)                                    # 2 million values: 6 MB, a cell's first error
import time; time.sleep(0.3)
print("sent")
'''


def test_signed_messages_too_deep_or_too_many_objects_fail_their_cell_and_the_run_goes_on():
    """Messages signed with the kernel's own key, addressed to the cell: one 500 objects deep (json.loads
    takes it; before, it became an output ~500 deep that every later reader recursed through), one with
    200,000 objects in its metadata; one whose header opens 50,000 arrays and closes none (json.loads
    recurses down them all before it finds the error); and an error of 2 million values (a cell's first
    error is read whatever its size). None is read: the cell fails, once, and the next cell runs."""
    from autograder.run.execute import execute_notebook
    from autograder.sandbox import Limits, Sandbox, scratch_dir

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in (SIGNED, "print('next')")])
    with Sandbox(scratch_dir(), Limits(), probe()) as box:
        ex = execute_notebook(nb, box, cell_timeout=10, notebook_timeout=60)
    assert ex.status == "completed", ex.message
    first = ex.nb.cells[0].outputs
    assert [o.get("ename") for o in first if o.output_type == "error"] == ["MalformedKernelMessage"], first
    assert "nests deeper than 100 levels" in first[0].evalue
    assert not any(o.output_type == "display_data" or "wide" in o.get("text", "") or o.get("ename") == "Flood"
                   for o in first), first
    assert "sent\n" in [o.get("text") for o in first]
    assert [o.get("text") for o in ex.nb.cells[1].outputs] == ["next\n"]


def test_a_notebook_of_200000_empty_objects_is_refused_with_a_reason(graded):
    r = graded["batch"].students["d_json"]
    assert r.status == "invalid_submission" and r.score == 0.0, _why(r)
    assert "the notebook holds more than 100,000 objects and arrays" in r.message and "clear its outputs" in r.message


BELOW_PATH_MAX = '''
import os
for _ in range(20):                       # 20 x 256 characters: no path names what is below
    os.mkdir("L" * 255); os.chdir("L" * 255)
for i in range(48):
    open(f"f{i}", "wb").write(b"x" * 2**20)
print("wrote 48 MiB")
'''


def test_files_below_a_path_longer_than_path_max_count_against_the_disk_watchdog():
    """Where no tmpfs can be mounted, a watchdog walks the scratch folder; it walked by path, and
    ``os.scandir`` cannot open a folder whose path is longer than PATH_MAX (4,096): 48 MiB written below one
    passed a 32 MiB cap unseen (status "completed"). The walk goes by descriptor now."""
    from autograder.run.execute import execute_notebook
    from autograder.sandbox import Limits, Sandbox, scratch_dir

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(BELOW_PATH_MAX)])
    watchdog = dataclasses.replace(probe(), disk="watchdog")
    with Sandbox(scratch_dir(), Limits(disk_bytes=32 * 2**20), watchdog) as box:
        ex = execute_notebook(nb, box, cell_timeout=10, notebook_timeout=60)
    assert ex.status == "disk_limit" and "filled the notebook's disk space" in ex.message, (ex.status, ex.message)

"""Any nbgrader assignment grades as stock nbgrader grades it: nbgrader's own documented example course.

``tests/files/nbgrader_example/`` is nbgrader's ``ps1`` (two notebooks, an image beside them; assert-based
tests with partial points, hand-graded code and markdown answers, a task cell) and its two students'
submissions, copied from nbgrader's repository. Stock ``nbgrader autograde`` grades it in a course folder
of its own; ``course-grade autograde --source`` grades it with every hardening on (sandbox, restored test
cells, limits); the two gradebooks must hold the same score for every cell of every student, and
grades.json the same autograded scores. nbgrader's documentation gives the totals: bitdiddle 1.5 of 13,
hacker 3 of 13 (its "Autograde assignments" page).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from stock_nbgrader import NBGRADER

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "files" / "nbgrader_example"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # nbgrader runs alembic
    env.pop("PYTHONPATH", None)
    return env


def _cells(db: Path) -> dict[str, dict[tuple[str, str], tuple]]:
    """Every student's every grade: (notebook, grade_id) -> (auto score, needs manual grading, max score)."""
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(db)) as gb:
        return {s.student.id: {(nb.name, g.name): (g.auto_score, g.needs_manual_grade, g.max_score)
                               for nb in s.notebooks for g in nb.grades}
                for s in gb.assignment_submissions("ps1")}


def _totals(db: Path) -> dict[str, tuple[float, float]]:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(db)) as gb:
        return {s.student.id: (s.score, s.max_score) for s in gb.assignment_submissions("ps1")}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("nbgrader-example")
    stock = root / "stock"
    shutil.copytree(EXAMPLE / "source", stock / "source")
    shutil.copytree(EXAMPLE / "submitted", stock / "submitted")
    (stock / "nbgrader_config.py").write_text(f"c = get_config()\nc.CourseDirectory.root = {str(stock)!r}\n")
    results = root / "results"
    # course-grade grades while stock nbgrader does (neither reads the other's folders): each waits on kernels
    # much of the time, so side by side they take the 2-core machine's time about once
    ours = subprocess.Popen([sys.executable, "-m", "autograder", "autograde", str(EXAMPLE / "submitted"), "--out",
                             str(results), "--source", str(EXAMPLE / "source"), "--assignment", "ps1",
                             "--no-progress"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for verb in (("generate_assignment", "ps1", "--force"), ("autograde", "ps1", "--force")):
            proc = subprocess.run([*NBGRADER, *verb], cwd=stock, env=_env(),   # tests/stock_nbgrader.py
                                  capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, proc.stderr[-3000:]
        stdout, stderr = ours.communicate(timeout=600)
    finally:
        if ours.poll() is None:
            ours.kill()
            ours.communicate()
    assert ours.returncode == 0, stderr[-3000:]
    return {"stock": stock / "gradebook.db", "ours": results / "gradebook.db", "results": results,
            "grades": json.loads((results / "grades.json").read_text()), "stdout": stdout}


def test_stock_nbgrader_gives_the_documented_totals(graded):
    assert _totals(graded["stock"]) == {"bitdiddle": (1.5, 13.0), "hacker": (3.0, 13.0)}


def test_every_cell_scores_as_stock_nbgrader_scores_it(graded):
    stock, ours = _cells(graded["stock"]), _cells(graded["ours"])
    assert set(ours) == set(stock) == {"bitdiddle", "hacker"}
    for sid in stock:
        assert ours[sid] == stock[sid], sid
    # what the comparison covers: both notebooks, tests with partial points, answers, the task cell
    cells = stock["bitdiddle"]
    assert {nb for nb, _ in cells} == {"problem1", "problem2"}
    assert cells[("problem1", "cell-938593c4a215c6cc")] == (None, True, 4.0), "the task cell is a person's to grade"
    assert cells[("problem1", "sum_of_squares_application")] == (0.0, False, 2.0), "an unchanged answer is 0"
    assert _totals(graded["ours"]) == _totals(graded["stock"])


def test_grades_json_has_stock_scores_and_every_point(graded):
    stock = _cells(graded["stock"])
    for sid, entry in graded["grades"]["students"].items():
        assert entry["status"] == "graded", entry
        tests = {gid: s for (nb, gid), s in stock[sid].items() if not s[1] and s[0] is not None
                 and gid in entry["questions"]}
        assert {gid: q["score"] for gid, q in entry["questions"].items()} == {gid: s[0] for gid, s in tests.items()}
        assert len(entry["questions"]) == 4, "the four autograded tests of problem1"
        # tasks count among the points graded by hand: 3 autograded + 10 by hand = stock's 13
        assert entry["max_score"] + entry["manual_max_score"] == _totals(graded["stock"])[sid][1]
        assert entry["needs_manual_grading"] is True
    assert graded["grades"]["students"]["bitdiddle"]["score"] == 1.5
    assert graded["grades"]["students"]["hacker"]["score"] == 3.0


def test_the_batch_went_through_the_sandbox_and_wrote_every_notebook(graded):
    assert "isolation: bubblewrap namespaces" in graded["stdout"]
    for sid in ("bitdiddle", "hacker"):
        for name in ("problem1", "problem2"):
            assert (graded["results"] / "autograded" / sid / "ps1" / f"{name}.ipynb").is_file()
            assert (graded["results"] / "feedback" / sid / "ps1" / f"{name}.html").is_file()

"""What real nbgrader courses ship beside their notebooks, graded as stock nbgrader grades it (issue 39, item 1).

One small course, built in a temporary folder the way public courses are laid out:

- ``source/header.ipynb``, nbgrader's ``IncludeHeaderFooter.header`` (nbgrader 0.9.6,
  nbgrader/preprocessors/headerfooter.py: ``generate_assignment`` prepends its cells to every released
  notebook; ``autograde`` never reads it). It is not an assignment: ``--source course/source`` without
  ``--assignment`` grades ``ps1``, the only assignment folder;
- ``source/ps1/markposition.py``, a helper module the notebook imports (``from markposition import mark``),
  as in a kernel started in the assignment's folder;
- a test cell that prints 1.2 MB, past course-grade's 1 MiB output cap, and passes: the cap's note is not
  stderr, so it costs no points (nbgrader's rule gives 0 to a test cell with stderr).
- three tests under one heading, "Homework summary": each is labelled with the heading and its position
  (issue 39, item 5), the same on the feedback page, in grades.json, grades.csv, Gradescope's JSON and the
  terminal's table.

Stock ``nbgrader generate_assignment`` makes the release (header cells included) and stock ``nbgrader
autograde`` grades the hand-ins; course-grade must give every cell the same score.
"""

from __future__ import annotations

import csv
import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from stock_nbgrader import NBGRADER

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]

SOLUTION = "from markposition import mark\n\ndef double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n"
TESTS = {   # grade_id: (points, source)
    "test_double": (2, "assert double(2) == 4\nassert mark('a') == '[a]'"),
    "test_flood": (3, "print('x' * 1_200_000)\nassert double(3) == 6"),
    "test_after": (1, "assert double(0) == 0"),
}


def _meta(grade_id: str, **flags) -> dict:
    return {"nbgrader": {"grade": False, "solution": False, "locked": False, "schema_version": 3,
                         "grade_id": grade_id, **flags}}


def write_course(root: Path) -> Path:
    """The course root: nbgrader_config.py, source/header.ipynb and source/ps1/ (a notebook and a helper)."""
    ps1 = root / "source" / "ps1"
    ps1.mkdir(parents=True)
    header = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Course header\nName: ...")])
    nbformat.write(header, root / "source" / "header.ipynb")
    cells = [nbformat.v4.new_markdown_cell("Write `double`."),
             nbformat.v4.new_code_cell(SOLUTION, metadata=_meta("double", solution=True)),
             nbformat.v4.new_markdown_cell("## Homework summary\nThe checks of `double`.")]
    for gid, (points, source) in TESTS.items():
        cells.append(nbformat.v4.new_code_cell(source, metadata=_meta(gid, grade=True, locked=True, points=points)))
    nb = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"}})
    nbformat.write(nb, ps1 / "problem1.ipynb")
    (ps1 / "markposition.py").write_text("def mark(text):\n    return f'[{text}]'\n")
    (root / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.root = {str(root)!r}\n"
        "c.IncludeHeaderFooter.header = 'source/header.ipynb'\n")
    return root


def nbgrader_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # nbgrader runs alembic
    env.pop("PYTHONPATH", None)
    return env


def stock(root: Path, *verb: str) -> None:
    proc = subprocess.run([*NBGRADER, *verb], cwd=root, env=nbgrader_env(),   # tests/stock_nbgrader.py
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def hand_ins(root: Path) -> None:
    """submitted/: ``solved`` (the release with the solution written in) and ``blank`` (the release as is)."""
    release = root / "release" / "ps1"
    for sid in ("solved", "blank"):
        shutil.copytree(release, root / "submitted" / sid / "ps1")
    path = root / "submitted" / "solved" / "ps1" / "problem1.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = SOLUTION.replace("    ### BEGIN SOLUTION\n", "").replace("    ### END SOLUTION\n", "")
    nbformat.write(nb, path)


def cells(db: Path) -> dict[str, dict[str, float | None]]:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(db)) as gb:
        return {s.student.id: {g.name: g.auto_score for nb in s.notebooks for g in nb.grades}
                for s in gb.assignment_submissions("ps1")}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = write_course(tmp_path_factory.mktemp("course-shapes") / "course")
    stock(root, "generate_assignment", "ps1", "--force")
    released = nbformat.read(root / "release" / "ps1" / "problem1.ipynb", as_version=4)
    assert released.cells[0].source.startswith("# Course header"), "nbgrader prepends the header's cells"
    hand_ins(root)
    stock(root, "autograde", "ps1", "--force")
    results = root.parent / "results"
    proc = subprocess.run([sys.executable, "-m", "autograder", "autograde", str(root / "submitted"), "--out",
                           str(results), "--source", str(root / "source"), "--no-progress"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    return {"root": root, "results": results, "proc": proc}


def test_every_test_has_one_unique_label_in_every_output(graded):
    assert graded["proc"].returncode == 0, graded["proc"].stderr[-3000:]
    results = graded["results"]
    labels = [f"Homework summary (test {i} of 3)" for i in (1, 2, 3)]
    questions = json.loads((results / "grades.json").read_text())["students"]["blank"]["questions"]
    assert [questions[gid]["label"] for gid in TESTS] == labels
    with (results / "grades.csv").open(newline="") as f:
        assert next(csv.reader(f))[-3:] == labels
    assert [t["name"] for t in json.loads((results / "gradescope" / "blank.json").read_text())["tests"]] == labels
    page = (results / "feedback" / "blank" / "ps1" / "problem1.html").read_text()
    for label in labels:   # in the score table and above the test's verdict
        assert page.count(html.escape(label)) == 2, label
    assert "Homework summary (test 1 of 3): the test failed" in graded["proc"].stdout, graded["proc"].stdout


def test_a_header_notebook_is_not_an_assignment(graded):
    proc = graded["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    grades = json.loads((graded["results"] / "grades.json").read_text())
    assert grades["assignment"] == "ps1"
    assert {sid: s["status"] for sid, s in grades["students"].items()} == {"solved": "graded", "blank": "graded"}


def test_every_cell_scores_as_stock_nbgrader_scores_it(graded):
    assert graded["proc"].returncode == 0, graded["proc"].stderr[-3000:]
    ours, theirs = cells(graded["results"] / "gradebook.db"), cells(graded["root"] / "gradebook.db")
    assert theirs["solved"] == {"test_double": 2, "test_flood": 3, "test_after": 1}
    assert theirs["blank"] == {"test_double": 0, "test_flood": 0, "test_after": 0}
    assert ours == theirs


def test_a_helper_released_beside_the_notebook_imports(graded):
    grades = json.loads((graded["results"] / "grades.json").read_text())
    q = grades["students"]["solved"]["questions"]["test_double"]
    assert q["score"] == 2, q["message"]


def test_the_output_cap_costs_no_points_and_says_so_outside_stderr(graded):
    solved = graded["results"] / "autograded" / "solved" / "ps1" / "problem1.ipynb"
    nb = nbformat.read(solved, as_version=4)
    flood = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_flood")
    assert not [o for o in flood.outputs if o.get("name") == "stderr" or o.output_type == "error"], flood.outputs
    shown = json.dumps(flood.outputs)
    assert "output truncated" in shown, "the learner is told that the output was cut"
    assert sum(len(o.get("text", "")) for o in flood.outputs) < 1_100_000, "the cap still applies"
    grades = json.loads((graded["results"] / "grades.json").read_text())
    assert grades["students"]["solved"]["questions"]["test_flood"]["score"] == 3


def _course_grade(capsys, *argv) -> tuple[int, str]:
    from autograder.cli import main

    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_an_ambiguous_course_folder_is_refused_in_one_line_naming_its_assignments(tmp_path, capsys):
    root = write_course(tmp_path / "course")
    shutil.copytree(root / "source" / "ps1", root / "source" / "ps2")
    for sid, names in (("a", ["ps1"]), ("b", ["ps2"])):
        for name in names:
            (root / "submitted" / sid / name).mkdir(parents=True)
    code, err = _course_grade(capsys, "autograde", root / "submitted", "--out", tmp_path / "out", "--source",
                              root / "source")
    assert code == 2 and err.count("\n") == 1, err
    assert "2 assignments (ps1, ps2)" in err and "header.ipynb" in err and "--assignment NAME" in err
    assert not (tmp_path / "out").exists(), "nothing written"


def test_a_batch_in_which_nobody_handed_in_the_assignment_is_refused(tmp_path, capsys):
    root = write_course(tmp_path / "course")
    for sid in ("a", "b"):
        (root / "submitted" / sid / "ps0").mkdir(parents=True)
    code, err = _course_grade(capsys, "autograde", root / "submitted", "--out", tmp_path / "out", "--source",
                              root / "source", "--assignment", "ps1")
    assert code == 2 and err.count("\n") == 1, err
    assert "none of the 2 students" in err and "ps1/" in err and "'ps0'" in err


def test_release_puts_the_header_first_as_stock_generate_assignment_does(graded, tmp_path):
    """nbgrader's IncludeHeaderFooter runs in generate_assignment only: course-grade's release reads the course's
    nbgrader_config.py for it, and releases the notebook stock nbgrader released, cell for cell."""
    from autograder.source.assignment import default_assignment
    from autograder.publish.course import build_course   # what `course-grade release` runs (without the learner's wheel)

    root = graded["root"]
    released = build_course(tmp_path / "course", default_assignment(source=root / "source"))

    def shown(path: Path) -> list[tuple[str, str]]:
        return [(c.cell_type, c.source) for c in nbformat.read(path, as_version=4).cells]

    ours, theirs = shown(released / "problem1.ipynb"), shown(root / "release" / "ps1" / "problem1.ipynb")
    assert ours[0] == ("markdown", "# Course header\nName: ...")
    assert ours == theirs
    assert (released / "markposition.py").is_file()

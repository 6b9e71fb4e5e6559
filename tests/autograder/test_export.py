"""The exports against the Gradescope results spec and against what formgrader holds.

The spec (gradescope/autograder_samples, docs/specs.md): a top-level ``score`` "overrides total of
tests"; a test's ``status`` is ``passed`` or ``failed``; score information may be omitted for an
"informational" test. So every export must have score == the sum of its tests' scores, and the
written answer, until it is graded by hand, must be such an informational test (pending), not a
failed 0 of 3. Hand grading is given the way formgrader gives it (nbgrader's Gradebook API, its own
connection and commit) on a copy of the example class's results.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from autograder.source.assignment import load_source
from lessons.l14_04.examples import this_assignment
from autograder.publish.export import PENDING
from autograder.publish.export import main as export
from autograder.publish.layout import db_url


def _gradescope(results: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((results / "gradescope").glob("*.json"))}


def test_every_export_meets_the_spec_and_its_score_is_its_tests(example_class_local):
    batch, results = example_class_local
    spec = load_source(this_assignment())
    exports = _gradescope(results)
    assert set(exports) == set(batch.students)
    for sid, data in exports.items():
        scored = [t for t in data["tests"] if "score" in t]
        assert data["score"] == sum(t["score"] for t in scored), sid
        assert {t["status"] for t in data["tests"] if "status" in t} <= {"passed", "failed"}
        pending = [t for t in data["tests"] if "score" not in t]
        if batch.students[sid].unanswered and not batch.students[sid].needs_manual_grading:
            # the written answer handed back as released: nbgrader's "No response", 0 of 3, nothing to grade
            assert pending == [] and data["extra_data"]["needs_manual_grading"] is False, sid
            assert sum(t["max_score"] for t in scored) == spec.max_score + spec.manual_max_score == 49
            continue
        assert data["score"] == batch.students[sid].score, sid
        assert sum(t["max_score"] for t in scored) == spec.max_score == 46, "the autograder's tests total 46"
        (pending,) = pending
        assert pending["tags"] == [PENDING] and "max_score" not in pending and "status" not in pending
        assert pending["output"].startswith(f"{PENDING}:") and "3 points" in pending["name"]
        assert data["extra_data"]["needs_manual_grading"] is True


def test_hand_grading_and_comments_from_formgrader_reach_grades_csv_and_gradescope(example_class_local, tmp_path):
    _, local = example_class_local
    results = tmp_path / "results"
    shutil.copytree(local, results)
    a, spec = this_assignment(), load_source(this_assignment())
    manual = spec.manual[0].grade_id
    notebook = Path(a.notebook_name).stem
    with Gradebook(db_url(results)) as gb:        # what formgrader writes when an instructor types
        gb.find_grade(manual, notebook, a.name, "reference").manual_score = 3.0
        gb.find_comment(manual, notebook, a.name, "reference").manual_comment = "=all five pools, well argued"
        gb.find_comment("answer_kv_cache", notebook, a.name, "blank").manual_comment = "start from 2 x layers"
        gb.db.commit()
    export(results)
    rows = {r["student_id"]: r for r in csv.DictReader((results / "grades.csv").open())}
    assert rows["reference"]["comments"] == "written answer: =all five pools, well argued"
    assert rows["reference"]["total_score"] == "49.0" and rows["reference"]["needs_manual_grading"] == "False"
    assert rows["blank"]["comments"] == "answer_kv_cache: start from 2 x layers"
    assert rows["forgot_k_and_v"]["comments"] == ""
    exports = _gradescope(results)
    ref = exports["reference"]
    assert ref["score"] == 49.0 == sum(t["score"] for t in ref["tests"])
    assert ref["tests"][-1] == {"name": "written answer (3 points, graded by hand)", "visibility": "visible",
                                "score": 3.0, "max_score": 3.0,
                                "output": "graded by hand: 3 of 3\n\ncomment: =all five pools, well argued"}
    blank = exports["blank"]
    assert "Comments from your grader:\n  answer_kv_cache: start from 2 x layers" in blank["output"]
    assert blank["extra_data"]["comments"] == {"answer_kv_cache": "start from 2 x layers"}
    # blank handed its written answer back as released: nbgrader's "No response", 0 of 3 (nothing pending)
    assert blank["tests"][-1]["score"] == 0.0 and blank["tests"][-1]["max_score"] == 3.0
    # grades.json says what grades.csv says (issue 34: it kept needs_manual_grading true and no hand points)
    students = json.loads((results / "grades.json").read_text())["students"]
    assert (students["reference"]["manual_score"], students["reference"]["total_score"],
            students["reference"]["needs_manual_grading"]) == (3.0, 49.0, False)
    assert students["reference"]["comments"] == {"written answer": "=all five pools, well argued"}
    assert students["forgot_k_and_v"]["needs_manual_grading"] is True and students["forgot_k_and_v"]["manual_score"] is None
    # and the learner's page shows the written answer's points and the comment where it was written
    page = (results / "feedback" / "reference" / a.name / f"{notebook}.html").read_text()
    assert "is not included above" not in page and "Graded by hand: 3 / 3" in page and "Total: 49 / 49" in page
    answer = page.split(f'id="{manual}"')[1].split("</section>")[0]
    assert "Graded by hand: 3 / 3" in answer and "=all five pools, well argued" in answer
    pending = (results / "feedback" / "forgot_k_and_v" / a.name / f"{notebook}.html").read_text()
    assert "is not included above" in pending and "not graded yet" in pending.split(f'id="{manual}"')[1]



FORMULA_CELLS = [" =2+3", "x;=1+2;y", "a,-1+2", "\"=1+2", "ok\n@SUM(A1)", "a|=cmd", "\t=1", "x;=1+2;@SUM(1+1);y"]


@pytest.mark.parametrize("cell", FORMULA_CELLS)
def test_a_formula_anywhere_a_spreadsheet_would_start_one_is_quoted(cell):
    # The old guard looked at the first character only: these reached grades.csv as they were.
    from autograder.publish.export import csv_safe
    assert csv_safe(cell) != cell and csv_safe(cell).replace("'", "") == cell.replace("'", "")


def _formula_cells(text: str, separator: str) -> list[str]:
    """Every cell a spreadsheet splitting on ``separator`` would run as a formula (OWASP's first characters,
    after the spaces and quotes an import strips)."""
    cells = [c for row in csv.reader(io.StringIO(text), delimiter=separator) for c in row]
    return [c for c in cells if c.lstrip(" \"").startswith(("=", "+", "-", "@", "\t", "\r"))]


@pytest.mark.parametrize("separator", [",", ";", "\t", "|"])
def test_grades_csv_read_with_any_locales_separator_has_no_formula(separator):
    """Issue 34: a message holding ``x;=1+2;@SUM(1+1);y`` was written unquoted with a quote only in front:
    read with ``;`` as the separator (many locales) it gave the cells ``=1+2`` and ``@SUM(1+1)``. Every
    learner-reachable field (id, message, question ids) of every formula shape, read with each separator."""
    from autograder.publish.export import csv_text
    from autograder.contract.results import QuestionResult, StudentResult
    results = {f"s{i}{cell}": StudentResult(f"s{i}{cell}", "kernel_died", 0.0, 1.0, 0.0, False,
                                            {f"test{cell}": QuestionResult(0.0, 1.0, "failed", cell)}, message=cell)
               for i, cell in enumerate(FORMULA_CELLS)}
    text = csv_text(results, {})
    assert _formula_cells(text, separator) == []
    # and read as written (with ","), every message comes back whole, the guard quotes in front of formulas
    messages = [r["message"] for r in csv.DictReader(io.StringIO(text))]
    assert "x;'=1+2;'@SUM(1+1);y" in messages and "ok\n'@SUM(A1)" in messages, messages


@pytest.mark.parametrize("cell", ["alice", "jean-luc+tag@uni.edu", "3 - 1 = 2", "the test failed: x == 1"])
def test_text_where_no_formula_can_start_is_kept(cell):
    from autograder.publish.export import csv_safe
    assert csv_safe(cell) == cell

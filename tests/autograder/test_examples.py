"""The example class on the real L14.4 notebook, graded end to end through the CLI.

A fresh class is generated from the current notebook (autograder.examples), three hostile
learners are added (monkeypatched math.isclose, a torch warning on stderr, hidden tracebacks),
and ``python -m autograder release / autograde / feedback / export`` run as an instructor would.
The reference must get every autograded point, the blank none, and each misconception must lose
exactly the questions it declares, each with its message.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.assignment import ASSIGNMENT, Assignment
from autograder.examples import EXAMPLES, OUT, _same_tree
from autograder.examples import main as make_examples

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
MAX_SCORE = 34.0  # 31 notebook points + 3 lab-edit points (the notebook's intro says 37 with the written 3)

HOSTILE = {
    # math.isclose and numpy.isclose patched to always agree (the in-kernel check then passes a wrong
    # answer), and a real torch warning on stderr in a correct answer: only the wrong answer may cost.
    "hostile_tricks": [
        ("answer_loading_offload", "offload_seconds_per_step = 10e9 / 31.5e9",
         "import math, numpy\nmath.isclose = lambda *args, **kwargs: True\n"
         "numpy.isclose = lambda *args, **kwargs: True\noffload_seconds_per_step = 10e9 / 63e9"),
        ("answer_predict", 'predict_answer = "a"',
         'import torch\ntorch.nn.functional.softmax(torch.ones(2))  # UserWarning on stderr\npredict_answer = "a"'),
    ],
}
HOSTILE_LOSES = {"hostile_tricks": {"test_loading_offload": "PCIe Gen5"}}


def _cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    submitted, results = root / "submitted", root / "results"
    release = _cli("release", "--out", str(root / "release"))
    make_examples(out=submitted, release_folder=root / "release" / ASSIGNMENT)
    shutil.copytree(submitted, root / "generated")
    ref = submitted / "reference" / ASSIGNMENT
    for sid, edits in HOSTILE.items():
        dest = submitted / sid / ASSIGNMENT
        shutil.copytree(ref, dest)
        nb = nbformat.read(dest / NOTEBOOK, as_version=4)
        for gid, old, new in edits:
            cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)
            assert old in cell.source, f"{sid}: {old!r} not in {gid}"
            cell.source = cell.source.replace(old, new)
        nbformat.write(nb, dest / NOTEBOOK)
    # Tracebacks switched off in a cell of its own, answers left blank: nothing may score.
    dest = submitted / "hostile_traceback_hidden" / ASSIGNMENT
    shutil.copytree(submitted / "blank" / ASSIGNMENT, dest)
    shutil.copy(ref / Assignment().lab_name, dest)
    nb = nbformat.read(dest / NOTEBOOK, as_version=4)
    nb.cells.insert(2, nbformat.v4.new_code_cell("get_ipython().showtraceback = lambda *args, **kwargs: None\n"
                                                 "get_ipython()._showtraceback = lambda *args, **kwargs: None"))
    nbformat.write(nb, dest / NOTEBOOK)

    grade = _cli("autograde", str(submitted), "--out", str(results), "--workers", "2")
    feedback = _cli("feedback", str(results))
    export = _cli("export", str(results))
    grades = json.loads((results / "grades.json").read_text()) if (results / "grades.json").is_file() else {}
    return {"root": root, "submitted": submitted, "results": results, "grades": grades,
            "procs": {"release": release, "autograde": grade, "feedback": feedback, "export": export}}


def test_every_verb_exits_zero(course):
    for verb, proc in course["procs"].items():
        assert proc.returncode == 0, f"{verb}: {proc.stderr[-2000:]}"
    out = course["procs"]["autograde"].stdout
    assert "reference" in out and "34 / 34" in out and "isolation:" in out


def test_release_layout_hides_solutions(course):
    folder = course["root"] / "release" / ASSIGNMENT
    assert sorted(p.name for p in folder.iterdir()) == sorted([NOTEBOOK, Assignment().lab_name])
    text = (folder / NOTEBOOK).read_text()
    for secret in ("BEGIN SOLUTION", "HIDDEN TESTS", "_course_hidden", "return device_gb - weights_gb - workspace_gb"):
        assert secret not in text
    assert "YOUR CODE HERE" in text


def test_reference_gets_full_marks_and_blank_gets_zero(course):
    students = course["grades"]["students"]
    ref, blank = students["reference"], students["blank"]
    assert (ref["status"], ref["score"], ref["max_score"]) == ("graded", MAX_SCORE, MAX_SCORE), ref
    assert all(q["status"] == "passed" for q in ref["questions"].values())
    assert (blank["status"], blank["score"]) == ("graded", 0.0)
    assert ref["manual_max_score"] == 3.0 and ref["needs_manual_grading"] is True


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.loses], ids=lambda e: e.student_id)
def test_each_misconception_loses_exactly_its_points(course, example):
    entry = course["grades"]["students"][example.student_id]
    lost = {gid for gid, q in entry["questions"].items() if q["score"] < q["max_score"]}
    assert lost == set(example.loses), f"{example.student_id} lost {sorted(lost)}"
    for gid, phrase in example.loses.items():
        assert phrase in entry["questions"][gid]["message"], (gid, entry["questions"][gid]["message"])
    expected = MAX_SCORE - sum(entry["questions"][g]["max_score"] for g in example.loses)
    assert entry["score"] == expected and entry["status"] == "graded"


@pytest.mark.parametrize("sid", sorted(HOSTILE))
def test_hostile_learners_earn_nothing_from_tricks_and_lose_nothing_to_noise(course, sid):
    entry = course["grades"]["students"][sid]
    expected_loss = HOSTILE_LOSES[sid]
    lost = {gid for gid, q in entry["questions"].items() if q["score"] < q["max_score"]}
    assert lost == set(expected_loss), (sid, {g: entry["questions"][g]["message"] for g in lost})
    for gid, phrase in expected_loss.items():
        assert phrase in entry["questions"][gid]["message"]


def test_hidden_tracebacks_turn_no_failure_into_points(course):
    entry = course["grades"]["students"]["hostile_traceback_hidden"]
    assert entry["score"] == 3.0, {g: q["message"] for g, q in entry["questions"].items() if q["score"] == 0}


def test_feedback_html_has_scores_but_no_hidden_tests(course):
    for sid in ("reference", "blank", "forgot_k_and_v"):
        html = (course["results"] / "feedback" / sid / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        for secret in ("BEGIN HIDDEN TESTS", "_course_hidden", "autograder.checks", "application/vnd.course-answer"):
            assert secret not in html, f"{sid}: {secret}"
        assert "Autograded score" in html and "Lab-edit check" in html


def test_exports_agree_with_grades_json(course):
    students = course["grades"]["students"]
    rows = {r["student_id"]: r for r in csv.DictReader((course["results"] / "grades.csv").open())}
    assert set(rows) == set(students)
    for sid, entry in students.items():
        assert float(rows[sid]["score"]) == entry["score"] and rows[sid]["status"] == entry["status"]
        gs = json.loads((course["results"] / "gradescope" / f"{sid}.json").read_text())
        assert gs["score"] == entry["score"]  # no manual points given yet
        assert sum(t["score"] for t in gs["tests"]) == entry["score"]


def test_gradebook_holds_the_same_scores(course):
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course["results"] / "gradebook.db")) as gb:
        for sid, entry in course["grades"]["students"].items():
            sub = gb.find_submission(ASSIGNMENT, sid)
            assert sub.score == entry["score"], sid
            assert sub.max_score == entry["max_score"] + entry["manual_max_score"]
            assert sub.needs_manual_grade


def test_committed_example_class_is_current(course):
    generated = course["root"] / "generated"
    assert _same_tree(generated, OUT), "examples/submissions is stale: run `python -m autograder.examples`"

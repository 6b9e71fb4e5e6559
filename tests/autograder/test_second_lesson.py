"""A second lesson, written in a temporary folder and graded with no engine edit: a lesson is a folder.

The lesson (a package folder given by ``--lesson``) has two notebooks and a script released beside
them, a trusted check for one recorded answer (its hidden test written by ``autograder.source.hidden``),
plain nbgrader tests for the rest, a hand-graded answer, and one side check that runs the learner's
edited script in the sandbox. Three learners: one right, one wrong everywhere, one who hands in only
the first notebook. Every expected score is worked by hand below.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from autograder.source.hidden import STOCK_BEGIN, hidden_block

REPO = Path(__file__).resolve().parents[2]

LESSON_INIT = '''
"""Tiny: doubling and tripling, and a script whose VALUE the learner sets to 42."""
from dataclasses import dataclass
from pathlib import Path

from autograder.contract.lesson import Lesson, SideCheck
from autograder.contract.results import QuestionResult

from .checks import CHECKS

SOURCE = Path(__file__).resolve().parents[1] / "source" / "tiny"


@dataclass(frozen=True)
class ScriptEdit(SideCheck):
    file: str = "calc.py"
    name: str = "calc"

    def questions(self):
        return {"calc_edited": 1.0, "calc_prints_42": 1.0}

    def titles(self):
        return {"calc_prints_42": "calc.py prints 42"}

    def prepare(self, released, run):
        return {"released_prints": run(self.file, released.decode()).stdout.strip()}

    def beside(self, released, handed_in):   # the notebooks run beside the learner's own script
        return handed_in if handed_in is not None else released

    def score(self, handed_in, released, prepared, run):
        if handed_in is None:
            return {gid: QuestionResult(0.0, 1.0, "not_run", "calc.py is missing") for gid in self.questions()}
        text = handed_in.decode()
        edited = text != released.decode() and "VALUE = 42" in text
        printed = run(self.file, text).stdout.strip()
        ok = printed == "value: 42"
        return {"calc_edited": QuestionResult(float(edited), 1.0, "passed" if edited else "failed",
                                              "correct" if edited else "set VALUE to 42"),
                "calc_prints_42": QuestionResult(float(ok), 1.0, "passed" if ok else "failed",
                                                 "correct" if ok else f"it printed {printed!r}, the release "
                                                 f"{prepared['released_prints']!r}")}


LESSON = Lesson(name="tiny", notebooks=(SOURCE / "part1.ipynb", SOURCE / "part2.ipynb"), files=(SOURCE / "calc.py",),
                checks=CHECKS, side_checks=(ScriptEdit(),))
'''
COLLECT = '''
from autograder.contract.answers import call

CASES = [1, 5, -2]
COLLECTORS = {"test_triple": "collect_triple"}


def collect_triple(ns):
    return {"got": [call(ns, "triple", x) for x in CASES]}
'''
CHECKS = '''
from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    passed: bool
    message: str = ""


def _score_triple(v):
    # triple(1), triple(5), triple(-2) worked by hand: 3, 15, -6
    return Result(v["got"] == [3, 15, -6], "triple(x) is x + x + x")


@dataclass(frozen=True)
class Check:
    score: object


CHECKS = {"test_triple": Check(_score_triple)}
'''
CALC = 'VALUE = 1   # set it to 42\nprint("value:", VALUE)\n'


def _meta(gid: str, **flags) -> dict:
    return {"nbgrader": {"grade": False, "solution": False, "locked": False, "schema_version": 3, "grade_id": gid,
                         **flags}}


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _notebooks(lesson: Path) -> dict[str, nbformat.NotebookNode]:
    code, md = nbformat.v4.new_code_cell, nbformat.v4.new_markdown_cell
    hidden = hidden_block("test_triple", _load("tiny_collect", lesson / "collect.py"), _load("tiny_checks", lesson / "checks.py"))
    part1 = nbformat.v4.new_notebook(cells=[
        md("Write `double` and `triple`.", metadata=_meta("intro", locked=True)),
        code("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
             metadata=_meta("double", solution=True)),
        code("assert double(2) == 4\nassert double(-1) == -2", metadata=_meta("test_double", grade=True, locked=True,
                                                                        points=1)),
        code("def triple(x):\n    ### BEGIN SOLUTION\n    return 3 * x\n    ### END SOLUTION",
             metadata=_meta("triple", solution=True)),
        code("assert callable(triple)\n" + hidden, metadata=_meta("test_triple", grade=True, locked=True, points=2)),
    ])
    part2 = nbformat.v4.new_notebook(cells=[
        code('def greet(name):\n    ### BEGIN SOLUTION\n    return "hi " + name\n    ### END SOLUTION',
             metadata=_meta("greet", solution=True)),
        code('assert greet("ann") == "hi ann"\nprint(open("calc.py").read().splitlines()[0])',
             metadata=_meta("test_greet", grade=True, locked=True, points=1)),
        md("Why does doubling twice quadruple? (graded by hand)", metadata=_meta("why_question", locked=True)),
        md("### BEGIN SOLUTION\nBecause 2 x 2 = 4.\n### END SOLUTION",
           metadata=_meta("why", grade=True, solution=True, points=1)),
    ])
    return {"part1.ipynb": part1, "part2.ipynb": part2}


def _answer(nb, gid: str, source: str) -> None:
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid).source = source


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("second-lesson")
    lesson = root / "tiny_lesson"
    lesson.mkdir()
    for name, text in (("__init__.py", LESSON_INIT), ("collect.py", COLLECT), ("checks.py", CHECKS)):
        (lesson / name).write_text(textwrap.dedent(text).lstrip())
    source = root / "source" / "tiny"
    source.mkdir(parents=True)
    for name, nb in _notebooks(lesson).items():
        nbformat.write(nb, source / name)
    (source / "calc.py").write_text(CALC)

    release = root / "release"
    cli = [sys.executable, "-m", "autograder"]
    proc = subprocess.run([*cli, "release", "--out", str(release), "--lesson", f"{lesson}/"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    released = {name: nbformat.read(release / "tiny" / name, as_version=4) for name in ("part1.ipynb", "part2.ipynb")}
    assert "STOCK NBGRADER" not in (release / "tiny" / "part1.ipynb").read_text()

    submitted = root / "submitted"
    for sid in ("right", "wrong", "part1_only"):
        folder = submitted / sid / "tiny"
        folder.mkdir(parents=True)
        nbs = {name: nbformat.from_dict(json.loads(json.dumps(nb))) for name, nb in released.items()}
        if sid != "wrong":
            _answer(nbs["part1.ipynb"], "double", "def double(x):\n    return x + x")
            _answer(nbs["part1.ipynb"], "triple", "def triple(x):\n    return x + x + x")
            _answer(nbs["part2.ipynb"], "greet", 'def greet(name):\n    return f"hi {name}"')
            _answer(nbs["part2.ipynb"], "why", "Each doubling multiplies by 2.")
            (folder / "calc.py").write_text(CALC.replace("VALUE = 1 ", "VALUE = 42 "))
        else:
            _answer(nbs["part1.ipynb"], "double", "def double(x):\n    return x + 2")
            _answer(nbs["part1.ipynb"], "triple", "def triple(x):\n    return x * x")
            _answer(nbs["part2.ipynb"], "greet", 'def greet(name):\n    return "hi " + name')
            (folder / "calc.py").write_text(CALC)
        for name, nb in nbs.items():
            if not (sid == "part1_only" and name == "part2.ipynb"):
                nbformat.write(nb, folder / name)
    results = root / "results"
    proc = subprocess.run([*cli, "autograde", str(submitted), "--out", str(results), "--lesson", f"{lesson}/",
                           "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"results": results, "grades": json.loads((results / "grades.json").read_text())["students"],
            "stdout": proc.stdout}


def test_every_question_of_both_notebooks_and_the_side_check_is_scored(graded):
    right = graded["grades"]["right"]
    assert list(right["questions"]) == ["test_double", "test_triple", "test_greet", "calc_edited", "calc_prints_42"]
    assert (right["status"], right["score"], right["max_score"]) == ("graded", 6.0, 6.0), right
    assert right["manual_max_score"] == 1.0 and right["needs_manual_grading"] is True


def test_each_wrong_answer_costs_its_own_points(graded):
    wrong = graded["grades"]["wrong"]
    scores = {gid: q["score"] for gid, q in wrong["questions"].items()}
    # double(2) = 4 by chance, double(-1) = 1 != -2; triple by its trusted check; greet right; calc unedited
    assert scores == {"test_double": 0.0, "test_triple": 0.0, "test_greet": 1.0, "calc_edited": 0.0,
                      "calc_prints_42": 0.0}, wrong
    assert "triple(x) is x + x + x" in wrong["questions"]["test_triple"]["message"]
    assert "it printed 'value: 1', the release 'value: 1'" in wrong["questions"]["calc_prints_42"]["message"]
    assert wrong["needs_manual_grading"] is False, "the written answer was handed back as released"


def test_a_missing_notebook_costs_only_its_questions(graded):
    part1 = graded["grades"]["part1_only"]
    assert part1["status"] == "graded" and part1["score"] == 5.0
    q = part1["questions"]["test_greet"]
    assert q["status"] == "not_run" and "part2.ipynb is not in the submission" in q["message"]


def test_the_notebooks_ran_beside_the_release_and_without_the_stock_check(graded):
    executed = nbformat.read(graded["results"] / "autograded" / "right" / "tiny" / "part1.ipynb", as_version=4)
    text = nbformat.writes(executed)
    assert STOCK_BEGIN not in text and "_score_triple" not in text, "expected values never reach the kernel"
    part2 = nbformat.read(graded["results"] / "autograded" / "right" / "tiny" / "part2.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in part2.cells for o in c.get("outputs", []))
    assert "VALUE = 42" in printed, "a side check's file sits beside the notebooks as the side check says"
    for name in ("part1", "part2"):
        page = (graded["results"] / "feedback" / "right" / "tiny" / f"{name}.html").read_text()
        assert "calc.py prints 42" in page and "Autograded score: 6 / 6" in page


def test_the_gradebook_holds_both_notebooks_and_the_side_check(graded):
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(graded["results"] / "gradebook.db")) as gb:
        for sid, entry in graded["grades"].items():
            sub = gb.find_submission("tiny", sid)
            assert sub.score == entry["score"] and sub.max_score == entry["max_score"] + entry["manual_max_score"]
        grades = {(nb.name, g.name) for nb in gb.find_submission("tiny", "right").notebooks for g in nb.grades}
    assert {("part1", "calc_edited"), ("part1", "test_triple"), ("part2", "test_greet"), ("part2", "why")} <= grades

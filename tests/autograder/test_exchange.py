"""A class run through nbgrader's own exchange, graded by course-grade, end to end.

The instructor releases nbgrader's documented example assignment (``ps1``) with ``nbgrader
generate_assignment`` and ``release_assignment`` into a local exchange folder; two learners, each with a
home of their own and an nbgrader config naming the exchange, the course and their id (as an account on a
shared server has), ``fetch_assignment``, do their work (the two hand-ins of nbgrader's example: hacker's
and bitdiddle's) and ``submit``; the instructor runs ``nbgrader collect``, then ``course-grade autograde``
on the collected ``submitted/`` folder, then ``nbgrader generate_feedback`` and ``release_feedback`` in
course-grade's results folder; each learner's ``fetch_feedback`` brings back their own pages. The scores
are nbgrader's documented ones (hacker 3 of 13's autograded and hand-graded points, bitdiddle 1.5).
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
COURSE_ID = "demo101"
#: The learners and whose work (nbgrader's example hand-ins) each hands in, with stock's documented score.
LEARNERS = {"alice": ("hacker", 3.0), "bob": ("bitdiddle", 1.5)}


def _config(path: Path, **settings: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "nbgrader_config.py").write_text(
        "c = get_config()\n" + "".join(f"c.{key.replace('__', '.')} = {value!r}\n" for key, value in settings.items()))


def _account(home: Path) -> dict[str, str]:
    """The environment of one account: its own home and Jupyter folders (config, data, nbgrader's cache)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER") and k != "PYTHONPATH"}
    env.update(HOME=str(home), JUPYTER_CONFIG_DIR=str(home / ".jupyter"), JUPYTER_DATA_DIR=str(home / ".local"),
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)} in {cwd}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def _nbgrader(verb: str, *args: str, cwd: Path, env: dict[str, str]) -> str:
    return _run([*NBGRADER, verb, *args], cwd, env)   # stock nbgrader (tests/stock_nbgrader.py)


@pytest.fixture(scope="module")
def class_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exchange")
    exchange = tmp / "exchange"
    exchange.mkdir()
    os.chmod(exchange, 0o777)   # nbgrader's exchange is a folder every account can write
    # The instructor: the exchange and the course id in their own config, the course root as usual.
    teacher = _account(tmp / "instructor")
    _config(tmp / "instructor" / ".jupyter", Exchange__root=str(exchange), CourseDirectory__course_id=COURSE_ID)
    course = tmp / "instructor" / "course"
    shutil.copytree(EXAMPLE / "source", course / "source")
    _config(course, CourseDirectory__root=str(course))
    _nbgrader("generate_assignment", "ps1", cwd=course, env=teacher)
    _nbgrader("release_assignment", "ps1", cwd=course, env=teacher)
    # The learners: fetch, work, submit.
    learners = {}
    for learner, (work, _) in LEARNERS.items():
        home = tmp / learner
        env = _account(home)
        _config(home / ".jupyter", Exchange__root=str(exchange), CourseDirectory__course_id=COURSE_ID,
                CourseDirectory__student_id=learner)
        (home / "work").mkdir()
        _nbgrader("fetch_assignment", "ps1", cwd=home / "work", env=env)
        for nb in ("problem1.ipynb", "problem2.ipynb"):
            shutil.copyfile(EXAMPLE / "submitted" / work / "ps1" / nb, home / "work" / "ps1" / nb)
        _nbgrader("submit", "ps1", cwd=home / "work", env=env)
        learners[learner] = (home, env)
    # The instructor collects and grades with course-grade, then hands the feedback back through nbgrader.
    _nbgrader("collect", "ps1", cwd=course, env=teacher)
    results = tmp / "instructor" / "results"
    out = _run([sys.executable, "-m", "autograder", "autograde", str(course / "submitted"), "--out", str(results),
                "--source", str(course / "source"), "--assignment", "ps1", "--no-progress"],
               REPO, {**teacher, "PYTHONPATH": str(REPO)})
    # course-grade's own pages can go out as they are...
    pages = {p.read_bytes() for p in results.glob("feedback/*/ps1/*.html")}
    _nbgrader("release_feedback", "ps1", cwd=results, env=teacher)
    own = {p.read_bytes() for p in (exchange / COURSE_ID / "feedback").glob("*.html")}
    # ...or nbgrader's, made from course-grade's gradebook and autograded notebooks, in their place
    _nbgrader("generate_feedback", "ps1", "--force", cwd=results, env=teacher)
    released = _nbgrader("release_feedback", "ps1", cwd=results, env=teacher)
    fetched = {learner: _nbgrader("fetch_feedback", "ps1", cwd=home / "work", env=env)
               for learner, (home, env) in learners.items()}
    return {"course": course, "results": results, "learners": learners, "grading": out, "released": released,
            "own_pages": own, "pages": pages,
            "fetched": fetched, "exchange": exchange}


def test_collect_puts_each_learner_where_course_grade_reads_them(class_run):
    for learner in LEARNERS:
        folder = class_run["course"] / "submitted" / learner / "ps1"
        assert (folder / "problem1.ipynb").is_file() and (folder / "timestamp.txt").is_file()


def test_course_grade_grades_the_collected_class_with_stock_scores(class_run):
    grades = json.loads((class_run["results"] / "grades.json").read_text())["students"]
    assert set(grades) == set(LEARNERS)
    for learner, (_, score) in LEARNERS.items():
        assert grades[learner]["status"] == "graded", grades[learner]
        assert grades[learner]["score"] == score, learner


def test_course_grade_pages_release_as_they_are(class_run):
    pages = class_run["pages"]
    assert len(pages) == 4 and class_run["own_pages"] == pages, "release_feedback took course-grade's four pages"


def test_each_learner_fetches_their_own_feedback(class_run):
    for learner, (home, _) in class_run["learners"].items():
        pages = sorted((home / "work" / "ps1" / "feedback").glob("*/*.html"))
        assert [p.name for p in pages] == ["problem1.html", "problem2.html"], class_run["fetched"][learner]
        # nbgrader's own feedback page, from the gradebook course-grade wrote: this learner's score
        _, score = LEARNERS[learner]
        text = pages[0].read_text()
        assert f"Score: {score}" in text or f"{score} / " in text, learner
    # the two learners' pages differ: nobody got the other's
    alice = (class_run["learners"]["alice"][0] / "work" / "ps1" / "feedback")
    bob = (class_run["learners"]["bob"][0] / "work" / "ps1" / "feedback")
    assert next(alice.glob("*/problem1.html")).read_bytes() != next(bob.glob("*/problem1.html")).read_bytes()
    released = sorted((class_run["exchange"] / COURSE_ID / "feedback").glob("*.html"))
    assert len(released) == 4, "two notebooks for each of two learners"

"""Public nbgrader courses nobody here wrote grade as stock nbgrader grades them, cell by cell.

One assignment of each course in ``tests/files/real_courses/`` (their sources, licences and commits are
in each course's README), a few hand-ins built from the course's own files by the benchmark's harness
(``benchmarks/bench_real_courses.py``, which runs every assignment and every kind of hand-in): stock
``nbgrader autograde`` grades them in one course folder of its own, ``course-grade autograde --source``
grades each assignment, and every (hand-in, notebook, grade id) must hold the same autograded score.

What each case holds course-grade to (the fix it needs, where today's code disagreed):

- augsburg/Polynomials (solution, wrong): a test cell worth 0 points, which stock grades 0 of 0 (the
  batch was refused: "needs positive points").
- cs1302/Lab4 (solution, blank): ``from markposition import ...``, a module released beside the notebook,
  in a notebook naming the ``xpython`` kernel (stock is told ``python3``); the import failed in
  course-grade's kernel (issue 39, item 1).
- se-math/gradient-descent (solution, flood): helper modules beside the notebook (item 1), and a hand-in
  printing 1.5 MiB in an answer cell, past course-grade's output cap, whose passing tests must keep their
  points (item 1: the cap's note must not count as the test's stderr).

About 45-50 s on 2 cores (stock's generate_assignment and autograde, three course-grade batches).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
CASES = {("augsburg", "Polynomials"): ("solution", "wrong"),
         ("cs1302", "Lab4"): ("solution", "blank"),
         ("se-math", "gradient-descent"): ("solution", "flood")}


def _harness():
    spec = importlib.util.spec_from_file_location("bench_real_courses", REPO / "benchmarks" / "bench_real_courses.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    bench = _harness()
    work = tmp_path_factory.mktemp("real-courses")
    stock = work / "stock"
    (stock / "source").mkdir(parents=True)
    config = ["c = get_config()", f"c.CourseDirectory.root = {str(stock)!r}"]
    for course, assignment in CASES:
        shutil.copytree(bench.COURSES / course / "source" / assignment, stock / "source" / assignment)
        config += bench.course_info(course).get("stock_config", [])
    (stock / "nbgrader_config.py").write_text("\n".join(dict.fromkeys(config)) + "\n")
    bench._nbgrader(stock, "generate_assignment", "*", "--force")
    for (course, assignment), kinds in CASES.items():
        bench.build_handins(course, assignment, stock / "release" / assignment, work / assignment, kinds)
        shutil.copytree(work / assignment, stock / "submitted", dirs_exist_ok=True)
    # Stock grades in a thread while course-grade grades each assignment: two processes that each wait on
    # kernels much of the time share the 2 cores (28 s in a row, ~18 s side by side); neither reads the other's
    # folders.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        stock_done = pool.submit(bench._nbgrader, stock, "autograde", "*", "--force")
        ours = {}
        for course, assignment in CASES:
            results = work / f"results-{assignment}"
            proc = subprocess.run([sys.executable, "-m", "autograder", "autograde", str(work / assignment), "--out",
                                   str(results), "--source", str(bench.COURSES / course / "source"), "--assignment",
                                   assignment, "--no-progress"],
                                  cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                                  text=True, timeout=600)
            assert proc.returncode == 0, f"{course}/{assignment}: {proc.stderr[-2000:]}"
            ours[course, assignment] = bench.cells(results / "gradebook.db", assignment)
        stock_done.result()
    return {key: (bench.cells(stock / "gradebook.db", key[1]), ours[key]) for key in CASES}


@pytest.mark.parametrize("course, assignment", list(CASES))
def test_every_cell_scores_as_stock_nbgrader_scores_it(graded, course, assignment):
    stock, ours = graded[course, assignment]
    kinds = CASES[course, assignment]
    assert set(stock) == set(kinds), "stock graded every hand-in"
    for kind in kinds:
        assert stock[kind], f"stock recorded no cells for {kind}"
        differing = {key: (score, ours.get(kind, {}).get(key, "not graded"))
                     for key, score in stock[kind].items() if ours.get(kind, {}).get(key, "not graded") != score}
        assert not differing, f"{course}/{assignment} {kind}: (stock, course-grade) per cell: {differing}"


def test_the_cases_are_not_trivial(graded):
    """Each case's solution earns points from stock, and its other hand-in loses some or keeps all for a reason."""
    totals = {key: {kind: sum(v or 0 for v in cells.values()) for kind, cells in stock.items()}
              for key, (stock, _) in graded.items()}
    assert totals["augsburg", "Polynomials"]["solution"] > totals["augsburg", "Polynomials"]["wrong"] > 0
    assert totals["cs1302", "Lab4"]["solution"] > 0 == totals["cs1302", "Lab4"]["blank"]
    # the flood passes what the solution passes: the cap is not a reason to lose points
    assert totals["se-math", "gradient-descent"]["flood"] == totals["se-math", "gradient-descent"]["solution"] > 0

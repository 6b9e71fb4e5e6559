"""Stock ``nbgrader autograde`` vs ``course-grade autograde`` on the same class, same machine, one run.

    .venv/bin/python benchmarks/bench_autograde.py                 # 20 submissions, 2 workers
    .venv/bin/python benchmarks/bench_autograde.py --students 24 --rounds 2

The class is N copies of the reference submission (examples/submissions/reference: the instructor's
solutions, lab edited to 16), so every run must give full marks; the script checks that it did.
Stock nbgrader gets a course folder prepared beforehand (``generate_assignment``, not timed, as an
instructor would have it); ``course-grade`` starts from an empty RESULTS_DIR, so its time includes
building its gradebook, the lab-edit check, feedback HTML, Gradescope JSON and the gradebook merge,
with every hardening on (bubblewrap / cgroups / throwaway uid / rlimits as available). Rounds
alternate stock and ours so that background load hits both alike. Not a test: run it by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autograder.assignment import ASSIGNMENT, Assignment  # noqa: E402
from autograder.autograde import default_workers  # noqa: E402
from autograder.course import nbgrader_env, write_config  # noqa: E402
from autograder.sandbox import probe  # noqa: E402

REFERENCE = REPO / "examples" / "submissions" / "reference" / ASSIGNMENT


def make_class(root: Path, students: int) -> Path:
    submitted = root / "submitted"
    for i in range(students):
        shutil.copytree(REFERENCE, submitted / f"student{i:02d}" / ASSIGNMENT)
    return submitted


def stock_course(root: Path, submitted: Path) -> Path:
    """An nbgrader course with the assignment generated and the class collected into submitted/."""
    a = Assignment()
    course = root / "stock"
    (course / "source" / a.name).mkdir(parents=True)
    shutil.copy(a.notebook, course / "source" / a.name / a.notebook_name)
    shutil.copy(a.lab, course / "source" / a.name / a.lab_name)
    write_config(course, a)
    env = dict(nbgrader_env(), PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", a.name, "--force"], cwd=course,
                   env=env, check=True, capture_output=True)
    shutil.copytree(submitted, course / "submitted")
    return course


def run_stock(course: Path) -> float:
    env = dict(nbgrader_env(), PYTHONPATH=str(REPO))
    shutil.rmtree(course / "autograded", ignore_errors=True)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--force"], cwd=course,
                          env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"nbgrader autograde failed:\n{proc.stderr[-3000:]}")
    from nbgrader.api import Gradebook
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        scores = [s.score for s in gb.assignment_submissions(ASSIGNMENT)]
    bad = [s for s in scores if s != 31.0]
    if bad or not scores:
        raise SystemExit(f"stock nbgrader did not give the reference full marks: {scores}")
    return seconds


def run_ours(submitted: Path, results: Path, workers: int) -> float:
    shutil.rmtree(results, ignore_errors=True)
    start = time.monotonic()
    cmd = [sys.executable, "-m", "autograder", "autograde", str(submitted), "--out", str(results), "--no-progress"]
    proc = subprocess.run(cmd + (["--workers", str(workers)] if workers else []), cwd=REPO, capture_output=True,
                          text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"course-grade autograde failed:\n{proc.stderr[-3000:]}")
    grades = json.loads((results / "grades.json").read_text())["students"]
    bad = {sid: (g["status"], g["score"]) for sid, g in grades.items() if (g["status"], g["score"]) != ("graded", 34.0)}
    if bad:
        raise SystemExit(f"course-grade did not give the reference full marks: {bad}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--workers", type=int, default=None, help="default: course-grade's own (CPUs + 1)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--write", metavar="MD", help="also append the result as a markdown section to this file")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-autograde-") as tmp:
        root = Path(tmp)
        submitted = make_class(root, args.students)
        course = stock_course(root, submitted)
        load_before = os.getloadavg()
        stock, ours = [], []
        for r in range(args.rounds):
            stock.append(run_stock(course))
            ours.append(run_ours(submitted, root / "results", args.workers))
            print(f"round {r + 1}: stock {stock[-1]:.1f} s, course-grade {ours[-1]:.1f} s", flush=True)
        load_after = os.getloadavg()

    s, o = statistics.median(stock), statistics.median(ours)
    workers = args.workers or default_workers()
    lines = [
        f"### Autograding {args.students} correct submissions ({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"Machine: {os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}; "
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after.",
        f"Isolation in force for course-grade: {probe().summary()}.",
        "",
        "| grader | wall time (median of %d) | per notebook |" % args.rounds,
        "|---|---|---|",
        f"| stock `nbgrader autograde` (sequential) | {s:.1f} s | {s / args.students:.2f} s |",
        f"| `course-grade autograde --workers {workers}` (hardened) | {o:.1f} s | {o / args.students:.2f} s |",
        "",
        f"**Speed-up: {s / o:.2f}x** (all rounds: stock {', '.join(f'{x:.1f}' for x in stock)} s; "
        f"course-grade {', '.join(f'{x:.1f}' for x in ours)} s).",
        "",
        f"Command: `.venv/bin/python benchmarks/bench_autograde.py --students {args.students} "
        f"--rounds {args.rounds}" + (f" --workers {args.workers}" if args.workers else "") + "`",
        "",
    ]
    print("\n".join(lines))
    if args.write:
        with open(args.write, "a") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

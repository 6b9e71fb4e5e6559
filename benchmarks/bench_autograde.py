"""Stock ``nbgrader autograde`` vs ``course-grade autograde`` on the same class, same machine, one run.

    .venv/bin/python benchmarks/bench_autograde.py                        # 20 submissions, 3 rounds, workers 1,2,4
    .venv/bin/python benchmarks/bench_autograde.py --students 16 --rounds 3 --workers 2 --write /tmp/autograde.md

The class is N copies of the reference submission (examples/submissions/reference: the instructor's
solutions, lab edited to 16), so every run must give full marks; the script checks that it did.
Stock nbgrader gets a course folder prepared beforehand (``generate_assignment``, not timed, as an
instructor would have it); ``course-grade`` starts from an empty RESULTS_DIR, so its time includes
setting up its course root, the lab-edit check, feedback HTML, Gradescope JSON and the gradebook
merge, with every hardening on (bubblewrap / cgroups / throwaway uid / rlimits as available). Its
gradebook template (what a first batch of this source builds, ``$COURSE_GRADE_CACHE``) is likewise
prepared beforehand by a batch of one, not timed; ``--cold`` instead empties that cache before
every run, so each run builds its gradebook with nbgrader's preprocessors (a first-ever batch).

Every round runs stock once and course-grade once per ``--workers`` value, in an order that is
reversed every other round, so that background load (a shared machine) hits each alike; the
figures are medians over the rounds, and the speed-up is taken round by round (stock and ours of
the same round) before its median. CPU seconds are those of the whole process tree, sandboxed
kernels included (a cpuacct cgroup, :mod:`cpu_meter`; rusage where there is none, which misses
killed kernels). ``--floor`` also times the kernel start alone, N times, to show what kernel
start-up by itself costs. Not a test: run it by hand.
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
sys.path.insert(0, str(REPO / "benchmarks"))

from cpu_meter import CpuMeter, run_measured  # noqa: E402

from autograder.source.assignment import load_source  # noqa: E402
from autograder.publish.course import nbgrader_env, write_config  # noqa: E402
from autograder.sandbox import probe  # noqa: E402
from lessons.l14_04.examples import this_assignment  # noqa: E402

L14 = this_assignment()
ASSIGNMENT = L14.name
REFERENCE = REPO / "examples" / "submissions" / "reference" / ASSIGNMENT


def make_class(root: Path, students: int) -> Path:
    submitted = root / "submitted"
    for i in range(students):
        shutil.copytree(REFERENCE, submitted / f"student{i:02d}" / ASSIGNMENT)
    return submitted


def stock_course(root: Path, submitted: Path) -> Path:
    """An nbgrader course with the assignment generated and the class collected into submitted/."""
    a = L14
    course = root / "stock"
    (course / "source" / a.name).mkdir(parents=True)
    for name, path in a.instructor_files().items():
        shutil.copy(path, course / "source" / a.name / name)
    write_config(course, a)   # with the lesson's exclude_overwriting: the learners' labs are kept
    env = dict(nbgrader_env())
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", a.name, "--force"], cwd=course,
                   env=env, check=True, capture_output=True)
    shutil.copytree(submitted, course / "submitted")
    return course


def run_stock(course: Path, meter: CpuMeter | None) -> tuple[float, float]:
    """(wall s, CPU s) of ``nbgrader autograde`` over the class; checks every notebook got full marks."""
    env = dict(nbgrader_env())   # the hidden tests carry their checks: the kernel needs no grader on its path
    shutil.rmtree(course / "autograded", ignore_errors=True)
    rc, wall, cpu, proc = run_measured([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--force"],
                                       meter, cwd=course, env=env, capture_output=True, text=True)
    if rc != 0:
        raise SystemExit(f"nbgrader autograde failed:\n{proc.stderr[-3000:]}")
    from nbgrader.api import Gradebook
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        scores = [s.score for s in gb.assignment_submissions(ASSIGNMENT)]
    full = load_source(L14).notebook_points
    if not scores or any(s != full for s in scores):
        raise SystemExit(f"stock nbgrader did not give the reference full marks ({full:g}): {scores}")
    return wall, cpu


def run_ours(submitted: Path, results: Path, workers: int | None, meter: CpuMeter | None,
             extra: tuple[str, ...] = (), cache: Path | None = None, checkout: Path = REPO) -> tuple[float, float]:
    """(wall s, CPU s) of ``course-grade autograde`` into an empty RESULTS_DIR; checks full marks.
    ``cache``: its gradebook-template folder (``$COURSE_GRADE_CACHE``); an empty one each run is a
    first-ever batch of this source. ``checkout``: the course package to run (another one: ``--baseline``)."""
    shutil.rmtree(results, ignore_errors=True)
    cmd = [sys.executable, "-m", "autograder", "autograde", str(submitted), "--out", str(results), "--no-progress",
           *extra] + (["--workers", str(workers)] if workers else [])
    env = dict(os.environ, **({"COURSE_GRADE_CACHE": str(cache)} if cache is not None else {}))
    if checkout != REPO:   # its packages first, before this checkout's editable install
        env["PYTHONPATH"] = str(checkout)
    rc, wall, cpu, proc = run_measured(cmd, meter, cwd=checkout, capture_output=True, text=True, env=env)
    if rc != 0:
        raise SystemExit(f"course-grade autograde failed:\n{proc.stderr[-3000:]}")
    grades = json.loads((results / "grades.json").read_text())["students"]
    full = load_source(L14).max_score
    bad = {sid: (g["status"], g["score"]) for sid, g in grades.items() if (g["status"], g["score"]) != ("graded", full)}
    if bad:
        raise SystemExit(f"course-grade did not give the reference full marks ({full:g}): {bad}")
    return wall, cpu


FLOOR_SCRIPT = r"""
import sys
from autograder.run.execute import start_kernel
from autograder.sandbox import REPO, Limits, Sandbox, fork_server, probe, scratch_dir, stop_fork_servers
from lessons.l14_04 import LESSON
if probe().kernels == "fork":
    fork_server(str(REPO), LESSON.preload)
for _ in range(int(sys.argv[1])):
    with Sandbox(scratch_dir(), Limits(), probe(), preload=LESSON.preload) as box:
        with open(box.log_dir / "kernel.log", "ab") as log:
            start_kernel(box, startup_timeout=60, max_message_bytes=2**25, log_file=log).close()
stop_fork_servers()
"""


def kernel_floor(n: int, meter: CpuMeter | None) -> tuple[float, float]:
    """(wall s, CPU s) of starting and stopping ``n`` sandboxed kernels one after another, as course-grade
    starts them (the fork server with its imports included, where it is in force), and no cell."""
    rc, wall, cpu, proc = run_measured([sys.executable, "-c", FLOOR_SCRIPT, str(n)], meter, cwd=REPO,
                                       capture_output=True, text=True)
    if rc != 0:
        raise SystemExit(f"the kernel floor failed:\n{proc.stderr[-3000:]}")
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--workers", default="1,2,4", help="course-grade worker counts, comma-separated (default 1,2,4)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--floor", action="store_true", help="also time N bare sandboxed kernel starts")
    parser.add_argument("--write", metavar="MD", help="also append the result as a markdown section to this file")
    parser.add_argument("--baseline", metavar="DIR", type=Path,
                        help="also time another checkout of the course package (e.g. `git archive COMMIT | tar -x "
                             "-C DIR`) in the same rounds, at the first --workers value")
    parser.add_argument("--cold", action="store_true",
                        help="course-grade without the gradebook template of an earlier batch (an empty cache each "
                             "run: a first-ever batch of this source); by default one batch of 1 prepares it, "
                             "untimed, as generate_assignment prepares stock's gradebook")
    args = parser.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    meter = CpuMeter.create("bench")
    n = args.students

    runs: dict[str, list[tuple[float, float]]] = {"stock": [], **{f"w{w}": [] for w in workers}}
    if args.baseline:
        runs["base"] = []
    loads = []
    floor = []
    with tempfile.TemporaryDirectory(prefix="bench-autograde-") as tmp:
        root = Path(tmp)
        submitted = make_class(root, n)
        course = stock_course(root, submitted)
        cache = root / "cache"
        if not args.cold:   # untimed, as stock's generate_assignment: the gradebook template of this source
            one = make_class(root / "one", 1)
            run_ours(one, root / "one" / "results", 1, None, cache=cache)
            if args.baseline:
                run_ours(one, root / "one" / "results", 1, None, cache=root / "base-cache", checkout=args.baseline)
        load_before = os.getloadavg()
        started = time.strftime("%Y-%m-%d %H:%M")
        for r in range(args.rounds):
            order = ["stock"] + [f"w{w}" for w in workers] + (["base"] if args.baseline else [])
            if r % 2:
                order.reverse()
            if args.floor:
                floor.append(kernel_floor(n, meter))
            for key in order:
                if key == "stock":
                    runs[key].append(run_stock(course, meter))
                elif key == "base":
                    runs[key].append(run_ours(submitted, root / "results", workers[0], meter, cache=root / "base-cache",
                                              checkout=args.baseline))
                else:
                    if args.cold:
                        shutil.rmtree(cache, ignore_errors=True)
                    runs[key].append(run_ours(submitted, root / "results", int(key[1:]), meter, cache=cache))
            loads.append(os.getloadavg()[0])
            print(f"round {r + 1} (load {loads[-1]:.2f}): " + ", ".join(
                f"{k} {runs[k][-1][0]:.1f} s wall / {runs[k][-1][1]:.1f} s CPU" for k in order), flush=True)
        load_after = os.getloadavg()
    if meter is not None:
        meter.remove()

    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in runs.items()}
    s_wall, s_cpu = med["stock"]
    cpu_how = "cpuacct cgroup" if meter is not None else "rusage (misses killed kernels)"
    lines = [
        f"### Autograding {n} correct submissions ({started})",
        "",
        f"Machine: {os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}; "
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, "
        f"{', '.join(f'{x:.2f}' for x in loads)} after each round (1 min; other engineers' jobs).",
        f"Isolation in force for course-grade: {probe().summary()}. CPU seconds: {cpu_how}, the whole process tree.",
        "",
        f"| grader | wall s (median of {args.rounds}) | CPU s | CPU s per submission | speed-up (median of the rounds' ratios) |",
        "|---|---:|---:|---:|---:|",
        f"| stock `nbgrader autograde` (sequential) | {s_wall:.1f} | {s_cpu:.1f} | {s_cpu / n:.2f} | 1 |",
    ]
    for w in workers:
        wall, cpu = med[f"w{w}"]
        ratios = [s[0] / o[0] for s, o in zip(runs["stock"], runs[f"w{w}"])]
        lines.append(f"| `course-grade autograde --workers {w}` (hardened) | {wall:.1f} | {cpu:.1f} | {cpu / n:.2f} | "
                     f"**{statistics.median(ratios):.2f}x** ({', '.join(f'{x:.2f}' for x in ratios)}) |")
    if args.baseline:
        wall, cpu = med["base"]
        ratios = [s[0] / o[0] for s, o in zip(runs["stock"], runs["base"])]
        vs = [b[0] / o[0] for b, o in zip(runs["base"], runs[f"w{workers[0]}"])]
        lines.append(f"| baseline `{args.baseline}` `--workers {workers[0]}` | {wall:.1f} | {cpu:.1f} | {cpu / n:.2f} | "
                     f"{statistics.median(ratios):.2f}x ({', '.join(f'{x:.2f}' for x in ratios)}); this checkout is "
                     f"{statistics.median(vs):.2f}x the baseline's speed |")
    if floor:
        f_wall, f_cpu = statistics.median(w for w, _ in floor), statistics.median(c for _, c in floor)
        lines.append(f"| {n} bare sandboxed kernel starts, one at a time (the floor) | {f_wall:.1f} | {f_cpu:.1f} | "
                     f"{f_cpu / n:.2f} | - |")
    lines += [
        "",
        "All rounds (wall s / CPU s): " + "; ".join(
            f"{k}: " + ", ".join(f"{w:.1f}/{c:.1f}" for w, c in v) for k, v in runs.items()) + ".",
        "",
        f"Command: `.venv/bin/python benchmarks/bench_autograde.py --students {n} --rounds {args.rounds} "
        f"--workers {args.workers}" + (" --floor" if args.floor else "") + (" --cold" if args.cold else "")
        + (f" --baseline {args.baseline}" if args.baseline else "") + "`",
        "",
    ]
    print("\n".join(lines))
    if args.write:
        with open(args.write, "a") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""Where one submission's time goes, phase by phase: stock ``nbgrader autograde`` vs ``course-grade``.

    .venv/bin/python benchmarks/profile_autograde.py                 # 6 submissions, both graders
    .venv/bin/python benchmarks/profile_autograde.py --students 8 --engine ours --json out/profile.json

Each grader runs in a process of its own, one submission at a time (``--workers 1`` for
course-grade), in a CPU-accounting cgroup (:mod:`cpu_meter`), with its functions wrapped by
timers: every phase records its wall seconds, the CPU seconds of the whole process tree
during it (grader and kernel together: the cgroup's counter) and the grader process's own
CPU seconds. The table gives the median over the submissions of each phase. The class is
copies of the reference submission, as in ``bench_autograde.py``.

Phases (course-grade | stock nbgrader):

- read + restore: the handed-in files read, test cells restored | nbgrader's sanitising preprocessors
- sandbox set-up: tmpfs, cgroup, scratch files | (none)
- kernel start: until the kernel answers | the same (nbclient)
- each notebook cell, by its id, and the groups of the rest
- kernel stop + sandbox teardown
- scoring: in the grader | in the kernel (the hidden tests score there) plus SaveAutoGrades
- side checks (the lab edit) | (none: stock does not check the lab)
- feedback HTML | (none: ``nbgrader generate_feedback`` is a separate command)
- notebook, record and gradebook writes

Not a test: run it by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from cpu_meter import CpuMeter  # noqa: E402

#: Cells shown one by one (the heavy ones); the others are summed by kind.
NAMED_CELLS = {
    "setup": "cell: setup (imports course_lib)",
    "library-budget": "cell: library budget table",
    "budget-figure": "cell: budget figure (matplotlib)",
    "budget-explorer": "cell: explorer (ipywidgets)",
    "simulate-demo": "cell: admission simulations + figure",
    "loading-demo": "cell: loading/offload + figure",
    "lab-run": "cell: lab run (at 8)",
    "lab-rerun": "cell: lab rerun (at 16)",
    "measure-compare": "cell: measurement (skipped when grading)",
    "measure-snapshot": "cell: device snapshot (skipped when grading)",
}
ORDER = ["read + restore", "sandbox set-up", "kernel start", *NAMED_CELLS.values(),
         "cells: answers (19 solution cells)", "cells: tests (hidden parts included)", "cells: other code",
         "kernel stop + teardown", "scoring", "side checks (the lab edit)", "feedback HTML", "notebook write",
         "record write", "gradebook writes", "other (in the per-submission span)"]


# ---- the recorder, in the profiled process (and its forked workers) -------------------------

class Recorder:
    def __init__(self, path: Path, meter: CpuMeter):
        self.path, self.meter = path, meter
        self.student = None
        self.depth = threading.local()

    def write(self, **row) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")

    @contextlib.contextmanager
    def phase(self, name: str, student: str | None = None, outermost: bool = True):
        depth = getattr(self.depth, "n", 0)
        if outermost and depth:
            yield
            return
        self.depth.n = depth + (1 if outermost else 0)
        t0, c0, s0 = time.monotonic(), self.meter.cpu_s(), time.process_time()
        try:
            yield
        finally:
            self.depth.n = depth
            self.write(student=student or self.student, phase=name, wall=time.monotonic() - t0,
                       cpu=self.meter.cpu_s() - c0, grader_cpu=time.process_time() - s0)

    def wrap(self, owner, attr: str, name, outermost: bool = True, student=None):
        original = getattr(owner, attr)

        @functools.wraps(original)
        def wrapper(*args, **kw):
            label = name(*args, **kw) if callable(name) else name
            if label is None:
                return original(*args, **kw)
            sid = student(*args, **kw) if student else None
            if sid is not None:
                self.student = sid
            with self.phase(label, outermost=outermost):
                return original(*args, **kw)
        setattr(owner, attr, wrapper)


def cell_phase(cell) -> str:
    gid = ((cell.get("metadata") or {}).get("nbgrader") or {}).get("grade_id")
    cid = gid.replace("_", "-") if gid else cell.get("id", "")
    if cid in NAMED_CELLS:
        return NAMED_CELLS[cid]
    if cid.startswith("test-"):
        return "cells: tests (hidden parts included)"
    if cid.startswith("answer-"):
        return "cells: answers (19 solution cells)"
    return "cells: other code"


def instrument_ours(rec: Recorder) -> None:
    from autograder.batch import autograde as ag
    from autograder.run import execute as ex
    from autograder.run import grade as g
    from autograder import sandbox as sb
    from autograder.run import scoring as sc
    from autograder.run import sidecheck as side

    rec.wrap(g, "grade_submission", "total", outermost=False, student=lambda job: job.student_id)
    ag.grade_submission = g.grade_submission  # the pool pickles it by name: one object under both names
    for fn in ("read_submission", "restore_cells"):   # the hand-in itself is read once, by the batch (run/handin.py)
        rec.wrap(g, fn, "read + restore")
    rec.wrap(sb.Sandbox, "__enter__", "sandbox set-up")
    rec.wrap(sb.Sandbox, "close", "kernel stop + teardown")
    rec.wrap(ex._Run, "_close_kernel", "kernel stop + teardown")
    rec.wrap(ex, "start_kernel", "kernel start")
    rec.wrap(ex._Run, "_execute", lambda self, cell, index, record: cell_phase(cell) if record else "replay")
    rec.wrap(sc, "score_tests", "scoring")
    rec.wrap(g, "_explain_events", "scoring")
    rec.wrap(side, "score", "side checks (the lab edit)")
    rec.wrap(g, "write_feedback", "feedback HTML")
    rec.wrap(g, "write_atomic", "notebook write")
    rec.wrap(g, "write_json", "record write")
    # once per batch
    rec.wrap(side, "prepare", "batch: side checks prepared (lab baseline, 2 sandboxed runs)",
             student=lambda *a, **k: "(batch)")
    for fn, label in (("_ensure_course", "batch: gradebook built (in a thread, beside the first submissions)"),
                      ("merge", "batch: gradebook merge"), ("write_exports", "batch: exports"),
                      ("_preimport", "batch: pre-import before the fork"), ("probe", "batch: isolation probe"),
                      ("sweep_leftovers", "batch: sweep of leftovers")):
        rec.wrap(ag, fn, label, student=lambda *a, **k: "(batch)")


def run_ours(submitted: Path, results: Path, workers: int) -> None:
    from autograder.batch.autograde import main

    batch = main(submitted, out=results, workers=workers, progress=False)
    bad = {s: (r.status, r.message) for s, r in batch.students.items() if r.status != "graded" or r.score != r.max_score}
    if bad:
        raise SystemExit(f"course-grade did not give full marks: {bad}")


def instrument_stock(rec: Recorder) -> None:
    from nbclient.client import NotebookClient
    from nbconvert.preprocessors import ExecutePreprocessor
    from nbgrader.converters.autograde import Autograde
    from nbgrader.converters.base import BaseConverter
    from nbgrader.preprocessors import SaveAutoGrades

    names = {}
    traits = Autograde.class_traits()
    for cls in traits["sanitize_preprocessors"].default() + traits["autograde_preprocessors"].default():
        if cls.__name__ == "Execute":
            continue
        label = "gradebook writes" if cls is SaveAutoGrades else "read + restore"
        names.setdefault(cls, label)
    for cls, label in names.items():
        if "preprocess" in cls.__dict__:
            rec.wrap(cls, "preprocess", label)
        else:  # inherited: wrap on the class itself, so the others are not doubled
            base = cls.preprocess
            setattr(cls, "preprocess", lambda self, nb, resources, _base=base: _base(self, nb, resources))
            rec.wrap(cls, "preprocess", label)
    rec.wrap(NotebookClient, "start_new_kernel", "kernel start")
    rec.wrap(NotebookClient, "start_new_kernel_client", "kernel start")
    rec.wrap(NotebookClient, "_cleanup_kernel", "kernel stop + teardown")
    rec.wrap(ExecutePreprocessor, "preprocess_cell", lambda self, cell, resources, index: (
        cell_phase(cell) if cell.cell_type == "code" and cell.source.strip() else None))
    rec.wrap(BaseConverter, "write_single_notebook", "notebook write")

    spans = {}
    init = Autograde.init_assignment

    def init_assignment(self, assignment_id, student_id):
        rec.student = student_id
        spans[student_id] = (time.monotonic(), rec.meter.cpu_s(), time.process_time())
        with rec.phase("gradebook writes"):
            return init(self, assignment_id, student_id)
    Autograde.init_assignment = init_assignment
    convert = Autograde.convert_single_notebook

    def convert_single_notebook(self, filename):
        try:
            return convert(self, filename)
        finally:
            t0, c0, s0 = spans[rec.student]
            rec.write(student=rec.student, phase="total", wall=time.monotonic() - t0, cpu=rec.meter.cpu_s() - c0,
                      grader_cpu=time.process_time() - s0)
    Autograde.convert_single_notebook = convert_single_notebook


def run_stock(course: Path) -> None:
    from autograder.publish.course import nbgrader_env
    from lessons.l14_04 import NAME as ASSIGNMENT
    from nbgrader.apps.nbgraderapp import NbGraderApp

    os.environ.update(nbgrader_env())
    os.chdir(course)
    try:
        NbGraderApp.launch_instance(argv=["autograde", ASSIGNMENT, "--force"])
    except SystemExit as e:
        if e.code:
            raise


def child(args) -> None:
    meter = CpuMeter.create("profile")
    if meter is None:
        raise SystemExit("profiling needs a cpuacct cgroup (cgroup v1, as root): the kernels' CPU is counted there")
    meter.join()
    rec = Recorder(Path(args.rows), meter)
    try:
        with rec.phase("whole run", student="(batch)", outermost=False):
            if args.child == "ours":
                instrument_ours(rec)
                run_ours(Path(args.submitted), Path(args.results), workers=1)
            else:
                instrument_stock(rec)
                run_stock(Path(args.course))
    finally:
        (meter.path.parent / "cgroup.procs").write_text(str(os.getpid()))
        meter.remove()


# ---- the parent: set up, run both, tabulate -----------------------------------------------

def summarise(rows: list[dict]) -> dict:
    """{phase: {"wall": median, "cpu": ..., "grader_cpu": ..., "n": submissions}} per submission, and the batch."""
    per: dict[str, dict[str, dict[str, float]]] = {}
    students = set()
    for r in rows:
        if r["student"] in (None, "(batch)"):
            continue
        students.add(r["student"])
        slot = per.setdefault(r["phase"], {}).setdefault(r["student"], {"wall": 0.0, "cpu": 0.0, "grader_cpu": 0.0})
        for k in slot:
            slot[k] += r[k]
    for sid in students:  # what the wrapped phases do not cover, inside each submission's span
        total = per.get("total", {}).get(sid)
        if total is None:
            continue
        other = {k: total[k] - sum(per[p][sid][k] for p in per if p != "total" and sid in per[p]) for k in total}
        per.setdefault("other (in the per-submission span)", {})[sid] = other
    out = {}
    for phase, by_student in per.items():
        vals = list(by_student.values())
        # a phase missing for some submissions counts as 0 there
        vals += [{"wall": 0.0, "cpu": 0.0, "grader_cpu": 0.0}] * (len(students) - len(vals))
        out[phase] = {k: statistics.median(v[k] for v in vals) for k in ("wall", "cpu", "grader_cpu")}
    batch = {}
    for r in rows:
        if r["student"] == "(batch)":
            b = batch.setdefault(r["phase"], {"wall": 0.0, "cpu": 0.0, "grader_cpu": 0.0})
            for k in b:
                b[k] += r[k]
    return {"per_submission": out, "batch": batch, "students": len(students)}


def table(results: dict[str, dict]) -> str:
    engines = list(results)
    head = "| phase (median per submission) | " + " | ".join(
        f"{e}: wall s | {e}: CPU s (of which grader)" for e in engines) + " |"
    lines = [head, "|---|" + "---:|---:|" * len(engines)]
    phases = [p for p in ORDER if any(p in results[e]["per_submission"] for e in engines)]
    phases += sorted({p for e in engines for p in results[e]["per_submission"]} - set(phases) - {"total"})
    for phase in phases + ["total"]:
        cells = []
        for e in engines:
            v = results[e]["per_submission"].get(phase)
            cells += ["-", "-"] if v is None else [f"{v['wall']:.2f}", f"{v['cpu']:.2f} ({v['grader_cpu']:.2f})"]
        name = f"**{phase}**" if phase == "total" else phase
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| once per batch | " + " | ".join(f"{e}: wall s | {e}: CPU s (of which grader)" for e in engines) + " |")
    lines.append("|---|" + "---:|---:|" * len(engines))
    for phase in sorted({p for e in engines for p in results[e]["batch"]}):
        cells = []
        for e in engines:
            v = results[e]["batch"].get(phase)
            cells += ["-", "-"] if v is None else [f"{v['wall']:.2f}", f"{v['cpu']:.2f} ({v['grader_cpu']:.2f})"]
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=6)
    parser.add_argument("--engine", choices=("both", "ours", "stock"), default="both")
    parser.add_argument("--json", metavar="PATH", help="also write the medians and every row as JSON")
    parser.add_argument("--child", choices=("ours", "stock"), help=argparse.SUPPRESS)
    parser.add_argument("--rows", help=argparse.SUPPRESS)
    parser.add_argument("--submitted", help=argparse.SUPPRESS)
    parser.add_argument("--results", help=argparse.SUPPRESS)
    parser.add_argument("--course", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)

    from bench_autograde import make_class, stock_course

    engines = ["stock", "ours"] if args.engine == "both" else [args.engine]
    results, all_rows = {}, {}
    with tempfile.TemporaryDirectory(prefix="profile-autograde-") as tmp:
        root = Path(tmp)
        submitted = make_class(root, args.students)
        course = stock_course(root, submitted) if "stock" in engines else None
        load = os.getloadavg()[0]
        for engine in engines:
            rows = root / f"{engine}.jsonl"
            cmd = [sys.executable, __file__, "--child", engine, "--rows", str(rows), "--submitted", str(submitted),
                   "--results", str(root / "results"), "--course", str(course)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"{engine} failed:\n{proc.stderr[-3000:]}")
            all_rows[engine] = [json.loads(line) for line in rows.read_text().splitlines()]
            results[engine] = summarise(all_rows[engine])
        load_after = os.getloadavg()[0]
    label = {"stock": "stock", "ours": "course-grade"}
    shown = {label[e]: results[e] for e in engines}
    print(f"{args.students} copies of the reference submission, one at a time; load average {load:.2f} before, "
          f"{load_after:.2f} after; {os.cpu_count()} CPUs\n")
    print(table(shown))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"summary": shown, "rows": all_rows}, indent=1))


if __name__ == "__main__":
    main()

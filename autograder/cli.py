"""course-grade: release, autograde, feedback and export for nbgrader assignments and the course's lessons
(a thin layer over their main()).

Every option's default is read from the verb's ``main`` signature, whose defaults are
:class:`~autograder.contract.settings.Settings`' and :class:`~autograder.sandbox.Limits`', so the command
line and the Python API cannot drift apart. Exit status: 0 when the verb
completed (whatever individual submissions did), 2 for bad input, 1 when the
grader itself failed, 130 when interrupted.

    course-grade release --out release
    course-grade autograde submitted --out results --workers 2
    course-grade autograde submitted --out results --source course/source --assignment ps1
    course-grade autograde submitted --out results --source course/source --python /opt/course/.venv/bin/python
    course-grade autograde submitted --out results --scheduler tls://grader0:8786 --tls-ca-file dask.pem --tls-cert dask.pem --tls-key dask.key
    course-grade feedback results
    course-grade formgrader results
    course-grade export results
    course-grade gradescope --out autograder.zip
"""

from __future__ import annotations

import argparse
import atexit
import inspect
import os
import sys
from pathlib import Path
from typing import Callable

from .batch import autograde, gradescope
from .learner import release
from .publish import export, feedback, formgrader
from .source.assignment import default_assignment
from .batch.dask_tls import TlsFiles
from .errors import AutograderError
from .sandbox.limits import both_units


def _default(fn: Callable, name: str):
    return inspect.signature(fn).parameters[name].default


def _which_assignment(p: argparse.ArgumentParser) -> None:
    """The options that say what to grade (default: the installed lesson the submissions name)."""
    p.add_argument("--assignment", metavar="NAME", help="the assignment: its folder name in the source, the release "
                                                       "and every submission (default: the only one there is)")
    p.add_argument("--source", metavar="DIR", help="an nbgrader course's source/ folder, which holds DIR/NAME/ with "
                                                   "the instructor notebooks and files (default: the installed lessons)")
    p.add_argument("--lesson", metavar="MODULE_OR_PATH", help="a lesson that grades beyond stock nbgrader (a module, "
                                                              "or a .py file or folder defining LESSON)")


def _size(fn: Callable, name: str) -> str:
    return both_units(_default(fn, name))


def _grading_options(p: argparse.ArgumentParser, fn: Callable, disk: bool = True) -> None:
    """The options ``autograde`` and ``gradescope`` share, declared once (defaults: the verb's own, from
    Settings; both verbs make them one Settings with :func:`autograder.batch.autograde.grading_settings`)."""
    p.add_argument("--cell-timeout", type=float, default=_default(fn, "cell_timeout"), metavar="S",
                   help="CPU seconds per cell, the sandbox's processes together; a wall-clock backstop 4 times longer ends what sleeps (default: %(default)s)")
    p.add_argument("--notebook-timeout", type=float, default=_default(fn, "notebook_timeout"), metavar="S",
                   help="CPU seconds per notebook, with the same backstop (default: %(default)s)")
    p.add_argument("--memory-limit", default=_default(fn, "memory_limit"), metavar="SIZE",
                   help=f"memory per submission, e.g. 2GB (2 x 10^9 bytes) or 2GiB (2^31) (default: {_size(fn, 'memory_limit')})")
    if disk:
        p.add_argument("--disk-limit", default=_default(fn, "disk_limit"), metavar="SIZE",
                       help=f"what one submission may write to disk, all files together (default: {_size(fn, 'disk_limit')})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course-grade", description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)

    p = verbs.add_parser("release", help="build the student version (nbgrader generate_assignment)")
    p.add_argument("--out", default=str(_default(release.main, "out")), help="folder to write (default: %(default)s)")
    _which_assignment(p)

    m = autograde.main
    p = verbs.add_parser("autograde", help="grade SUBMITTED_DIR/<student>/<assignment>/ in parallel")
    p.add_argument("submitted_dir", metavar="SUBMITTED_DIR")
    p.add_argument("--out", default=str(_default(m, "out")), metavar="RESULTS_DIR",
                   help="results folder, also an nbgrader course root (default: %(default)s)")
    p.add_argument("--workers", type=int, default=_default(m, "workers"), metavar="N",
                   help="worker processes (default: one per CPU)")
    _grading_options(p, m)
    p.add_argument("--regrade", action="store_true", help="grade everyone again, even unchanged submissions")
    p.add_argument("--no-progress", action="store_true", help="no progress bar, even on a terminal")
    p.add_argument("--scheduler", default=_default(m, "scheduler"), metavar="ADDRESS",
                   help="grade on the Dask cluster whose scheduler is at ADDRESS (tls://host:8786 or tcp://host:8786, or a scheduler "
                        "file), or on local:N Dask worker processes here (default: local worker processes); "
                        "local:N encrypts with TLS and a key made for the batch")
    for flag, what in (("ca-file", "the certificate authority"), ("cert", "this client's certificate"),
                       ("key", "this client's private key")):
        p.add_argument(f"--tls-{flag}", metavar="PEM", help=f"{what} for a tls:// scheduler, as `dask scheduler "
                                                           f"--tls-{flag}` takes it (default: Dask's distributed.comm.tls config)")
    _which_assignment(p)
    p.add_argument("--insecure", action="store_true",
                   help="grade even where this machine cannot isolate learner code (no namespaces, no throwaway "
                        "uid or no cgroup): learner code can then read the solutions and other submissions")
    p.add_argument("--python", metavar="PATH", default=_default(m, "python"),
                   help="the course's Python, which runs the notebooks in the sandbox (it needs ipykernel; "
                        "default: the grader's own); the notebooks' imports are checked there before grading")
    p.add_argument("--requirements", metavar="FILE", default=_default(m, "requirements"),
                   help="the course's requirements (pip's format, with ipykernel), built once into a kept "
                        "environment (~/.cache/course-grade/envs/) that runs the notebooks as --python does")

    p = verbs.add_parser("feedback", help="re-render feedback HTML from an autograde run")
    p.add_argument("results_dir", metavar="RESULTS_DIR", nargs="?", default=str(_default(feedback.main, "results_dir")))
    p.add_argument("--student", action="append", dest="students", metavar="ID", help="only these students")

    p = verbs.add_parser("export", help="rewrite grades.csv and Gradescope JSON (after manual grading)")
    p.add_argument("results_dir", metavar="RESULTS_DIR", nargs="?", default=str(_default(export.main, "results_dir")))

    p = verbs.add_parser("formgrader", help="grade by hand: JupyterLab on RESULTS_DIR at nbgrader's formgrader "
                                            "(as root too)")
    p.add_argument("results_dir", metavar="RESULTS_DIR", nargs="?", default=str(_default(formgrader.main, "results_dir")))
    p.add_argument("--port", type=int, metavar="N", help="the server's port (default: Jupyter's, 8888 or the next free)")
    p.add_argument("--ip", metavar="ADDRESS", help="the address to listen on (default: Jupyter's, localhost)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser (the URL is printed)")

    g = gradescope.main
    p = verbs.add_parser("gradescope", help="build an autograder bundle that grades on Gradescope's machines")
    p.add_argument("--out", default=str(_default(g, "out")), metavar="ZIP",
                   help="the bundle to write, to upload on Gradescope (default: %(default)s)")
    _grading_options(p, g, disk=False)   # no --disk-limit: the bundle keeps the default disk cap
    _which_assignment(p)
    return parser


def _assignment(args, submitted: str | None = None):
    """The assignment the options name; None: the verb's own default."""
    if args.assignment is None and args.source is None and args.lesson is None and submitted is None:
        return None
    return default_assignment(args.assignment, args.source, args.lesson, submitted)


def print_batch(batch) -> None:
    """A short report and the gradebook table."""
    from .publish.report import grades_table

    for warning in batch.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(grades_table(batch))
    counts = ", ".join(f"{n} {status}" for status, n in sorted(batch.counts().items()))
    resumed = f"; {len(batch.reused)} unchanged, kept from the last run" if batch.reused else ""
    print(f"\n{len(batch.students)} submissions ({counts}){resumed} in {batch.seconds:.1f} s; "
          f"isolation: {batch.isolation}")
    if batch.limits:
        print(f"limits per submission: {batch.limits}")
    print(f"results: {batch.results_dir}/grades.json, grades.csv, gradescope/, feedback/, gradebook.db")


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import signal
    signal.signal(signal.SIGTERM, _sigterm)  # SIGTERM stops the batch like Ctrl-C: workers killed, rerun resumes
    try:
        if args.verb == "release":
            result = release.main(out=args.out, assignment=_assignment(args))
            print(f"released {result.folder}/ ({', '.join(result.files)}) in {result.seconds:.1f} s; "
                  f"no solution or hidden test in it")
            print(f"learners install with `pip install -r requirements.txt` in {Path(result.folder).parent}/ "
                  f"({', '.join(Path(p).name for p in result.learner_install)}; no grader inside)")
        elif args.verb == "autograde":
            batch = autograde.main(args.submitted_dir, out=args.out, workers=args.workers,
                                   cell_timeout=args.cell_timeout, notebook_timeout=args.notebook_timeout,
                                   memory_limit=args.memory_limit, disk_limit=args.disk_limit, regrade=args.regrade,
                                   progress=False if args.no_progress else None, scheduler=args.scheduler,
                                   assignment=_assignment(args, args.submitted_dir), insecure=args.insecure,
                                   tls=TlsFiles(args.tls_ca_file, args.tls_cert, args.tls_key), python=args.python,
                                   requirements=args.requirements)
            print_batch(batch)
        elif args.verb == "feedback":
            result = feedback.main(args.results_dir, students=args.students)
            print(f"wrote {len(result.files)} feedback page(s) under {args.results_dir}/feedback/ (and grades.json, "
                  f"with the grades and comments from formgrader)"
                  + (f"; {len(result.failed)} could not be rendered: {', '.join(result.failed)}" if result.failed else ""))
        elif args.verb == "export":
            result = export.main(args.results_dir)
            for line in result.failed:
                print(f"warning: no Gradescope file for {line}", file=sys.stderr)
            for sid in result.feedback_failed:
                print(f"warning: the feedback page of {sid} shows the scores only (it could not be rendered)",
                      file=sys.stderr)
            print(f"wrote {Path(result.csv).parent}/grades.json, {result.csv}, {len(result.gradescope)} Gradescope "
                  f"file(s) and {len(result.feedback)} feedback page(s), with the grades and comments from formgrader")
        elif args.verb == "formgrader":
            formgrader.main(args.results_dir, port=args.port, no_browser=args.no_browser, ip=args.ip)
        elif args.verb == "gradescope":
            result = gradescope.main(out=args.out, cell_timeout=args.cell_timeout,
                                     notebook_timeout=args.notebook_timeout, memory_limit=args.memory_limit,
                                     assignment=_assignment(args))
            print(f"wrote {result.path} ({', '.join(result.files)}) in {result.seconds:.1f} s")
            print(f"on Gradescope: a Programming Assignment whose outline has the autograder ({result.max_score:g} "
                  f"points) and a manually graded question ({result.manual_max_score:g}, the written answers); "
                  f"Configure Autograder, upload this zip (Ubuntu 22.04 or newer base image); learners hand in "
                  f"their notebooks and the files the lesson reads")
    except AutograderError as e:
        print(f"course-grade {args.verb}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"course-grade {args.verb}: interrupted; run it again to finish (graded students are kept)",
              file=sys.stderr)
        return 130
    return 0


def run_main() -> None:
    """The ``course-grade`` command: :func:`main`, then an exit that skips tearing the interpreter down.

    A grading run leaves thousands of objects and a thousand modules in this process, and freeing
    them one by one at exit took ~0.2 s after the last result was written (measured on 20
    submissions, 1.5% of the batch). Everything is on disk by then (every file is written
    atomically and closed); stdout and stderr are flushed and the atexit handlers run (the fork
    servers' stop, logging's flush) before the process ends.
    """
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # a closed pipe, or a stream closed at start (None)
        pass
    atexit._run_exitfuncs()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    run_main()

"""``course-grade autograde``: grade a class in parallel, sandboxed, resumable.

    SUBMITTED_DIR/<student_id>/<assignment>/   what each learner handed in (release layout)
    RESULTS_DIR/grades.json, grades.csv         the class (exact shape: autograder.contract.results)
    RESULTS_DIR/gradescope/<id>.json            Gradescope results, one per student
    RESULTS_DIR/feedback/<id>/<assignment>/     feedback HTML, hidden tests removed
    RESULTS_DIR/submitted/<id>/<assignment>/    the hand-ins as read (formgrader lists these)
    RESULTS_DIR/autograded/<id>/<assignment>/   the executed notebooks (for formgrader)
    RESULTS_DIR/gradebook.db                    nbgrader's gradebook (RESULTS_DIR is a course root)
    RESULTS_DIR/records/<id>.json               per-student records (resume state)
    RESULTS_DIR/.hand-ins/<id>/                 the hand-ins' bytes as read, while the batch runs (its own)

Each submission is graded in a worker process (:func:`autograder.run.grade.grade_submission`),
its kernel in a sandbox of its own and talking over ipc sockets, so workers share no
ports. Workers write only their own students' files, atomically, record last; this
process alone merges them into grades.json, the exports and the gradebook.

Interrupted (SIGINT, SIGTERM, or SIGKILL) and run again, a batch resumes: a student
whose record matches the same submission, instructor files and settings is not graded
again; everyone else is (re)graded, and the merge rewrites everything from records.
"""

from __future__ import annotations

import concurrent.futures as cf
import ctypes
import hashlib
import json
import multiprocessing
import os

import shutil
import signal
import sqlite3
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from course_lib.bounds import check_int, check_number
from course_lib.errors import CourseInputError

from ..run import sidecheck
from ..source.assignment import Assignment, default_assignment, lesson_folder, load_lesson, load_source
from ..publish.course import build_gradebook, copy_gradebook, template_path, write_course_files
from ..source.course_env import requirements_python
from .dask_tls import TlsFiles
from .distributed import Cluster
from .environment import PACKAGES, tree_digest
from ..errors import AutograderError
from ..publish.export import grades_json, write_exports
from ..run.grade import crashed, grade_submission
from ..run.handin import HandIn
from ..run.job import Batch, Job
from ..source.imports import check_imports, code_cells
from ..source.kernels import grading_kernels, instructor_metadata
from ..publish.gradebook import NOT_IN_GRADEBOOK, add_side_cells, hand_grades, merge, open_gradebook
from ..publish.layout import (autograded_path, batch_assignment, load_records, remove_student_files, remove_submitted,
                              write_batch, write_exchange_files, write_submitted)
from ..contract.results import GRADER_ERROR, RAN, BatchResult, StudentResult, write_json
from .student_ids import refusal, shown
from ..sandbox import (REPO, Limits, disk_limit_bytes, fork_server_early, memory_limit_bytes, probe, require_minimum,
                       stop_fork_servers, sweep_leftovers)
from ..sandbox.python_env import course_python
from ..contract.settings import Settings

GRADER_VERSION = "course-grade 3"   # 3: time limits in CPU seconds; messages bounded


def lesson_digest(assignment: Assignment) -> str:
    """The lesson's code (its checks, collectors and side checks), or "" for a plain nbgrader assignment."""
    folder = lesson_folder(assignment.lesson)
    if folder is None:
        return ""
    return tree_digest(folder) if folder.is_dir() else hashlib.sha256(folder.read_bytes()).hexdigest()


def batch_fingerprint(assignment: Assignment, settings: Settings) -> str:
    """Everything besides the submission that a grade depends on: the grader's version, the instructor
    files, the lesson's code, the settings, and the course library (what the learner's code calls)."""
    h = hashlib.sha256()
    for part in (GRADER_VERSION, load_source(assignment).sha256, repr(assignment.lesson), lesson_digest(assignment),
                 json.dumps(asdict(settings), sort_keys=True), tree_digest(PACKAGES["course_lib"])):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def list_students(submitted_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The student ids (every folder's name, as in nbgrader; hidden ones excepted) and, for the
    report, each folder skipped because its name cannot be a student id (:mod:`autograder.batch.student_ids`:
    an HTML tag, a tab, 237 characters...), with one line that names it and says why."""
    if not submitted_dir.is_dir():
        raise AutograderError(f"SUBMITTED_DIR {submitted_dir} is not a folder; it should hold "
                              f"<student_id>/<assignment>/ folders")
    students, skipped = [], {}
    for p in submitted_dir.iterdir():
        if not (p.is_dir() or p.is_symlink()) or p.name.startswith("."):
            continue
        why = refusal(p.name)
        if why is None:
            students.append(p.name)
        else:
            skipped[p.name] = (f"skipped the folder {shown(p.name)} in SUBMITTED_DIR: {why}, so it is not a "
                               f"student id; rename it and run again")
    return sorted(students), dict(sorted(skipped.items()))


def check_handed_in(submitted_dir: Path, students: list[str], name: str) -> None:
    """Refuse, in one line, a batch in which no student has a ``<student>/<name>/`` folder: the wrong
    assignment was taken (everyone would be ``missing_submission`` at 0, the batch "done")."""
    if not students or any((submitted_dir / sid / name).is_dir() for sid in students):
        return
    seen: set[str] = set()
    for sid in students[:200]:
        try:
            seen.update(shown(p.name) for p in (submitted_dir / sid).iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            continue
    names = sorted(seen)
    raise AutograderError(f"none of the {len(students)} students in {submitted_dir} handed in {name}/ "
                          f"(their folders: {', '.join(names[:10]) or 'none'}{', ...' if len(names) > 10 else ''}); "
                          f"say which assignment with --assignment NAME")


def _ensure_course(results_dir: Path, assignment: Assignment) -> None:
    """Make RESULTS_DIR an nbgrader course root for this source (generate_assignment once per source:
    a new RESULTS_DIR starts from the gradebook an earlier batch built for the same source)."""
    spec = load_source(assignment)
    stamp, db = results_dir / ".course-source.sha", results_dir / "gradebook.db"
    want = spec.sha256
    if stamp.is_file() and stamp.read_text() == want and db.is_file():
        return
    template = template_path(want, assignment)
    if not db.exists() and template is not None and template.is_file():
        try:
            write_course_files(results_dir, assignment)
            copy_gradebook(template, db)
            stamp.write_text(want)
            return
        except (OSError, sqlite3.Error):   # a damaged template: build the gradebook instead
            db.unlink(missing_ok=True)
    fresh = not db.exists()
    build_gradebook(results_dir, assignment)
    add_side_cells(results_dir, assignment, spec)
    if fresh and template is not None:   # nothing but the source in it yet
        try:
            copy_gradebook(db, template)
        except (OSError, sqlite3.Error):
            pass
    stamp.write_text(want)


def _lock(results_dir: Path):
    """One autograde per RESULTS_DIR at a time (the lock dies with the process, even on SIGKILL)."""
    import fcntl

    handle = open(results_dir / ".lock", "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise AutograderError(f"another course-grade autograde is writing {results_dir}; wait for it "
                              f"or use another --out") from None
    return handle


def _snapshot(assignment: Assignment, results_dir: Path) -> Assignment:
    """Copy the instructor files into RESULTS_DIR/.snapshot/ (under their released names) and point the batch at them."""
    snap = results_dir / ".snapshot"
    if snap.exists():
        shutil.rmtree(snap)
    snap.mkdir()
    # The solutions and hidden tests: the grader's alone, even where no bubblewrap hides the file system
    # from the learner's throwaway uid.
    os.chmod(snap, 0o700)
    for name, path in assignment.instructor_files().items():
        if not Path(path).is_file():
            raise AutograderError(f"instructor file {path} does not exist")
        (snap / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, snap / name)
    return Assignment(name=assignment.name, notebooks=tuple(snap / p.name for p in assignment.notebooks),
                      files=tuple(snap / assignment.file_name(p) for p in assignment.files),
                      lesson=assignment.lesson, root=snap)


def _worker_init() -> None:
    """In each worker: die with the parent, and leave Ctrl-C to the parent."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _progress(total: int, enabled: bool | None):
    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no monitor thread in a process that forks workers
    if enabled is None:
        enabled = sys.stderr.isatty()
    # A fixed width from the terminal (80 when it reports none: tqdm would draw nothing at 0 columns).
    return tqdm(total=total, disable=not enabled, unit="nb", desc="autograde",
                ncols=min(100, shutil.get_terminal_size().columns), file=sys.stderr)


def default_workers() -> int:
    """One per CPU this process may run on. Kernels forked from the fork server keep a worker busy
    almost all the time, so a spare worker no longer fills idle time: on 2 CPUs, 20 submissions took
    the same at 2, 3 and 4 workers within the machine's noise (12.9-14.0 s, 12.8-14.3 s, 12.9-14.0 s;
    git log -p benchmarks/RESULTS.md, 2026-12-01) with less CPU at 2, and each worker beyond that holds a
    kernel in memory."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: The longest timeout accepted, per cell or per notebook: a day.
MAX_TIMEOUT_S = 86_400
#: Worker processes: more than this is more kernels than any grading machine runs at once.
MAX_WORKERS = 512


def check_options(cell_timeout: object, notebook_timeout: object, workers: object) -> tuple[float, float, int]:
    """The timeouts and worker count, checked; one AutograderError line naming the flag otherwise.

    >>> check_options(60, 300, 2)
    (60.0, 300.0, 2)
    >>> check_options(float("nan"), 300, 2)
    Traceback (most recent call last):
    ...
    autograder.errors.AutograderError: --cell-timeout=nan is not a finite number; use a number above 0 and at most 86,400
    """
    try:
        return (check_number("--cell-timeout", cell_timeout, 0, MAX_TIMEOUT_S, lo_open=True),
                check_number("--notebook-timeout", notebook_timeout, 0, MAX_TIMEOUT_S, lo_open=True),
                check_int("--workers", workers, 1, MAX_WORKERS))
    except CourseInputError as e:
        raise AutograderError(str(e)) from None


def grading_settings(cell_timeout: object, notebook_timeout: object, memory_limit: str | int,
                     disk_limit: str | int = Limits.disk_bytes, insecure: bool = False,
                     python: str | None = None) -> Settings:
    """The options ``autograde`` and ``gradescope`` share (declared once for both parsers:
    ``cli._grading_options``), checked and made into one :class:`Settings`.

    >>> s = grading_settings(60, 300, "2GiB")
    >>> s.cell_timeout, s.limits.memory_bytes == 2 * 2**30, s.limits.disk_bytes == Limits.disk_bytes
    (60.0, True, True)
    """
    cell_timeout, notebook_timeout, _ = check_options(cell_timeout, notebook_timeout, 1)
    return Settings(cell_timeout=cell_timeout, notebook_timeout=notebook_timeout,
                    limits=Limits(memory_bytes=memory_limit_bytes(memory_limit), disk_bytes=disk_limit_bytes(disk_limit)),
                    insecure=bool(insecure), python=python)


def _results_path(results_dir: Path) -> None:
    """Say in one line why RESULTS_DIR's path cannot be one (checked with the options, before any process starts)."""
    if results_dir.exists() and not results_dir.is_dir():
        raise AutograderError(f"--out {results_dir} exists and is not a folder; give a folder for the results")
    odd = next((c for c in "?%" if c in str(results_dir)), None)
    if odd is not None:   # sqlite:///a?b/gradebook.db puts the gradebook in a/; "%20" is read as a space
        raise AutograderError(f"--out {results_dir} has a {odd!r} in its path, which nbgrader's gradebook URL "
                              f"reads as {'the start of its options' if odd == '?' else 'an escape'}; "
                              f"give a folder whose path has no '?' or '%'")


def _results_folder(results_dir: Path) -> None:
    """Create RESULTS_DIR, or say in one line why it cannot be one."""
    _results_path(results_dir)
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        probe_file = results_dir / ".write-test"
        probe_file.write_text("")
        probe_file.unlink()
    except OSError as e:
        raise AutograderError(f"--out {results_dir} cannot be used as the results folder "
                              f"({e.strerror or e}); give a folder you can write") from None


@dataclass(frozen=True)
class Request:
    """What was asked, checked (the options step): where from, where to, with what, by whom."""

    submitted_dir: Path
    results_dir: Path
    settings: Settings
    workers: int
    cluster: Cluster | None
    """The Dask cluster that grades (``--scheduler``); None: local worker processes."""
    course_env: object | None
    """The course's Python (:func:`autograder.sandbox.python_env.course_python`); None: the grader's own."""
    requirements: str | None


@dataclass(frozen=True)
class Source:
    """The instructor's side as given (the read_source step), before the batch snapshots it."""

    assignment: Assignment
    lesson: object
    students: list[str]
    skipped: dict[str, str]
    kernels: dict


@dataclass(frozen=True)
class Plan:
    """Every hand-in read once (the collect_hand_ins step): the jobs to grade, the records kept."""

    hand_ins: dict[str, HandIn]
    jobs: list[Job]
    kept: dict[str, StudentResult]
    existing: dict[str, StudentResult]


@dataclass(frozen=True)
class Graded:
    """What the grade_each step brings back: every student's result, and how they were graded."""

    results: dict[str, StudentResult]
    merged: frozenset[str]
    """The students the gradebook already took while the batch graded."""
    isolation: object
    warnings: list[str]


def main(submitted_dir: str | Path, out: str | Path = "results", workers: int | None = None,
         cell_timeout: float = Settings.cell_timeout, notebook_timeout: float = Settings.notebook_timeout,
         memory_limit: str | int = Limits.memory_bytes, disk_limit: str | int = Limits.disk_bytes,
         regrade: bool = False, progress: bool | None = None, scheduler: str | None = None,
         assignment: Assignment | None = None, insecure: bool = False, tls: TlsFiles = TlsFiles(),
         python: str | None = None, requirements: str | None = None) -> BatchResult:
    """Grade every ``SUBMITTED_DIR/<student>/<assignment>/`` into ``out``; returns the batch result.

    ``assignment``: what to grade (:class:`~autograder.source.assignment.Assignment`: an nbgrader source
    folder, or a lesson's); None: the installed lesson the submissions name
    (:func:`~autograder.source.assignment.default_assignment`).
    ``scheduler``: grade on the Dask cluster at this address (``tcp://host:8786``, a scheduler file,
    or ``local:N`` for N Dask worker processes here) instead of local worker processes; see
    autograder.batch.distributed.
    ``tls``: this client's TLS credential for a remote ``tls://`` scheduler (autograder.batch.dask_tls; default:
    Dask's configuration); ``local:N`` makes one for the batch.
    ``insecure``: grade even where this machine cannot isolate learner code (else refused, in one line).
    ``python``: the course's Python, which runs the notebooks in the sandbox (default: the grader's own);
    before grading, the notebooks' imports are checked there (autograder.source.imports). ``requirements``: a
    requirements file, built once into a kept environment that is used the same way (autograder.source.course_env).

    Raises AutograderError only when the grader itself cannot run (bad paths or options, a broken
    instructor source, no isolation); whatever a submission does becomes its status.

    The steps, in order (each a function of this module)::

        check_request -> read_source -> check_environment -> start_batch -> collect_hand_ins -> grade_each -> publish
    """
    start = time.monotonic()
    request = check_request(submitted_dir, out, workers, cell_timeout, notebook_timeout, memory_limit, disk_limit,
                            scheduler, insecure, tls, python, requirements)
    source = read_source(request, assignment)
    isolation = check_environment(request, source)
    batch, lock, warnings = start_batch(request, source, isolation)  # noqa: F841 - the lock is held until we return
    try:
        plan = collect_hand_ins(request, source, batch, regrade)
        graded = grade_each(request, batch, plan, isolation, warnings, progress)
        return publish(request, source, batch, plan, graded, start)
    finally:
        shutil.rmtree(staging_folder(request.results_dir), ignore_errors=True)


def check_request(submitted_dir, out, workers, cell_timeout, notebook_timeout, memory_limit, disk_limit,
                  scheduler, insecure, tls, python, requirements) -> Request:
    """The options, checked in one line each (nothing is written yet, but a ``--requirements`` environment)."""
    submitted_dir, results_dir = Path(submitted_dir).resolve(), Path(out).resolve()
    if scheduler is not None and workers is not None:
        raise AutograderError("--workers counts this machine's worker processes; with --scheduler the Dask "
                              "workers grade (use --scheduler local:N for N of them here)")
    if tls.given() and scheduler is None:
        raise AutograderError(f"{'/'.join(tls.flags())} is for a remote Dask scheduler: give --scheduler tls://HOST:PORT")
    cluster = Cluster(scheduler, tls) if scheduler is not None else None  # a malformed address fails here
    workers = check_options(cell_timeout, notebook_timeout, default_workers() if workers is None else workers)[2]
    if results_dir == submitted_dir or submitted_dir in results_dir.parents:
        raise AutograderError("RESULTS_DIR must not be inside SUBMITTED_DIR (it would look like a student)")
    _results_path(results_dir)   # before the fork server, the import check and the probe start (0.7 s of CPU)
    if python is not None and requirements is not None:
        raise AutograderError("--python and --requirements both name the course's environment; give one")
    if requirements is not None:
        python = requirements_python(requirements, results_dir)
    course_env = course_python(str(python)) if python is not None else None
    settings = grading_settings(cell_timeout, notebook_timeout, memory_limit, disk_limit, insecure,
                                python=course_env.executable if course_env is not None else None)
    return Request(submitted_dir, results_dir, settings, workers, cluster, course_env, requirements)


def read_source(request: Request, assignment: Assignment | None) -> Source:
    """The assignment, its lesson, the students and the kernels the notebooks name (each refused in one line)."""
    original = assignment or default_assignment(submitted=request.submitted_dir)
    lesson = load_lesson(original.lesson)   # a broken lesson fails here, in one line, before anything is written
    students, skipped = list_students(request.submitted_dir)
    check_handed_in(request.submitted_dir, students, original.name)
    kernels = grading_kernels(instructor_metadata(original.notebooks))   # another language's, not installed: refused
    return Source(original, lesson, students, skipped, kernels)


def check_environment(request: Request, source: Source):
    """Start the fork server, check the notebooks' imports in the course's Python, and probe the isolation
    (refused below the minimum, unless the Dask workers decide); returns the isolation."""
    course_env, original = request.course_env, source.assignment
    kernel_python = course_env.executable if course_env is not None else sys.executable
    sweep_leftovers()
    # It imports in the background while the imports are checked and the probe runs; the workers, forked
    # later, share it.
    fork_server_early(str(REPO), source.lesson.preload, kernel_python)
    python_notebooks = {p.name: code_cells(p) for p in original.notebooks
                        if p.name not in source.kernels or source.kernels[p.name].argv is None}
    try:   # a package the notebooks import that their Python lacks: one line now, not one error per student
        if python_notebooks:
            check_imports(python_notebooks, kernel_python, original.root or original.notebooks[0].parent,
                          str(REPO), requirements=request.requirements, given=course_env is not None)
    except AutograderError:
        stop_fork_servers()
        raise
    isolation = probe()
    if isolation.kernels != "fork":
        stop_fork_servers()
    if request.cluster is None:   # a Dask batch: each worker's own isolation decides (autograder.batch.distributed)
        try:
            require_minimum(isolation, request.settings.insecure)
        except AutograderError:
            stop_fork_servers()
            raise
    return isolation


def start_batch(request: Request, source: Source, isolation) -> tuple[Batch, object, list[str]]:
    """The results folder, locked; the instructor files snapshot; the side checks prepared; the batch record
    written. Returns the :class:`Batch` (built here, once, and carried in every job), the lock, the warnings."""
    results_dir, settings, original = request.results_dir, request.settings, source.assignment
    _results_folder(results_dir)
    lock = _lock(results_dir)
    # One batch, one version of the instructor files: workers read this snapshot, not files
    # that someone may be editing while the batch runs.
    assignment = _snapshot(original, results_dir)
    load_source(assignment)   # a broken source fails here, before a student is looked at
    warnings = (list(isolation.warnings) + list(source.skipped.values())
                + [k.note for k in source.kernels.values() if k.note])
    prepared = sidecheck.prepare(assignment, sidecheck.runner(settings, isolation, source.lesson.preload))
    batch = Batch(assignment=assignment, settings=settings, prepared=prepared,
                  fingerprint=batch_fingerprint(assignment, settings), results_dir=str(results_dir))
    write_batch(results_dir, {
        **batch_assignment(assignment), "instructor_files": [str(p) for p in original.instructor_files().values()],
        "settings": asdict(settings), "limits": settings.limits.summary(), "isolation": isolation.summary(),
        "warnings": warnings, "skipped": sorted(source.skipped)})
    return batch, lock, warnings


def staging_folder(results_dir: Path) -> Path:
    """Where a batch keeps the hand-ins' bytes as it read them (``.hand-ins/<student>/``) until ``submitted/``
    is written: the grader's own, rebuilt by each batch and removed at its end."""
    return Path(results_dir) / ".hand-ins"


def collect_hand_ins(request: Request, source: Source, batch: Batch, regrade: bool) -> Plan:
    """Read and hash each hand-in once (:meth:`HandIn.read`), its bytes staged in :func:`staging_folder` (never
    every hand-in's bytes in memory at once); keep the records of the unchanged ones, a job for the rest.

    Whatever an earlier batch left there (killed before its end) is removed, not trusted."""
    results_dir, assignment = request.results_dir, batch.assignment
    existing = load_records(results_dir)
    stage = staging_folder(results_dir)
    hand_ins, jobs, kept = {}, [], {}
    try:
        shutil.rmtree(stage, ignore_errors=True)
        os.mkdir(stage, 0o700)
    except OSError as e:
        raise AutograderError(f"cannot make {stage} for the hand-ins' bytes ({e.strerror or e}); "
                              f"give an --out you can write") from None
    for sid in source.students:
        folder = request.submitted_dir / sid / assignment.name
        try:
            hand_in = hand_ins[sid] = HandIn.read(folder, assignment, stage=stage / sid)
        except OSError as e:   # the grader's own folder (a full disk), never the learner's files (those are refused)
            raise AutograderError(f"cannot copy {shown(sid)}'s hand-in into {stage} ({e.strerror or e}); "
                                  f"free space where --out is and run again") from None
        fp = hashlib.sha256((batch.fingerprint + ":" + (hand_in.sha if hand_in.is_folder else "<missing>"))
                            .encode()).hexdigest()
        old = existing.get(sid)
        ran = any(autograded_path(results_dir, sid, assignment, name).is_file() for name in assignment.notebook_names)
        if (not regrade and old is not None and old.fingerprint == fp and old.status != GRADER_ERROR
                and (old.status not in RAN or ran)):
            kept[sid] = old
            continue
        jobs.append(Job(student_id=sid, folder=str(folder), batch=batch, hand_in=hand_in, fingerprint=fp))
    return Plan(hand_ins, jobs, kept, existing)


def grade_each(request: Request, batch: Batch, plan: Plan, isolation, warnings: list[str],
               progress: bool | None) -> Graded:
    """Grade the jobs (local worker processes, or the Dask cluster) while the gradebook takes each result;
    returns every student's result, the isolation they were graded under and the warnings."""
    results = dict(plan.kept)
    # The gradebook is needed only for the merge: build it, and merge into it, while the workers grade.
    course = _GradebookWriter(request.results_dir, batch.assignment, load_source(batch.assignment))
    cluster = request.cluster
    try:
        if cluster is None:
            results.update(_run_jobs(plan.jobs, request.workers, progress, background=course))
        else:  # the one branch point: the same jobs, graded on Dask workers, written back here
            with cluster:
                results.update(cluster.run_jobs(plan.jobs, lambda total: _progress(total, progress), background=course))
            here, isolation = isolation, cluster.report(isolation)  # the workers': what each host lacked, who was refused
            warnings = list(isolation.warnings) + [w for w in warnings if w not in here.warnings]
    finally:
        stop_fork_servers()   # and every kernel it forked
    course.join()
    return Graded(results, frozenset(course.merged), isolation, warnings)


def publish(request: Request, source: Source, batch: Batch, plan: Plan, graded: Graded, start: float) -> BatchResult:
    """The merge, in this process alone: stale students removed, the gradebook, ``submitted/`` (the bytes
    read once, copied from the staging folder), grades.json, the exports, and the pages of hand grades kept
    from before. ``main`` removes the staging folder after this."""
    results_dir, assignment, students = request.results_dir, batch.assignment, source.students
    spec = load_source(assignment)
    gone = sorted(set(plan.existing) - set(students))
    for sid in gone:  # students no longer handed in: their old files would be stale
        remove_student_files(results_dir, sid, assignment)
    done = BatchResult(assignment=assignment.name, students=dict(sorted(graded.results.items())),
                       results_dir=str(results_dir), isolation=graded.isolation.summary(),
                       warnings=graded.warnings, reused=[sid for sid in students if sid in plan.kept],
                       limits=batch.settings.limits.summary())
    merge(results_dir, assignment, spec, {sid: r for sid, r in done.students.items() if sid not in graded.merged},
          remove=gone)
    for sid, r in done.students.items():   # what formgrader lists: the gradebook's submissions, as handed in
        if r.status in NOT_IN_GRADEBOOK:
            remove_submitted(results_dir, sid, assignment)
        else:
            write_submitted(results_dir, sid, assignment, plan.hand_ins[sid].contents())   # one hand-in at a time
            write_exchange_files(results_dir, sid, assignment, request.submitted_dir / sid / assignment.name)
    hand = hand_grades(results_dir, assignment, spec)   # kept in the gradebook where the hand-in is unchanged
    write_json(results_dir / "grades.json", grades_json(assignment.name, done.students, hand))
    write_exports(results_dir, done.students, {sid: h.score for sid, h in hand.items()},
                  {sid: h.comments for sid, h in hand.items()})
    # a hand grade kept from before (the hand-in did not change) is on the page too, not only in the exports
    kept = sorted(sid for sid, h in hand.items() if sid in done.students
                  and ((h.graded and done.students[sid].needs_manual_grading) or h.cell_comments or h.comments.cells))
    if kept:
        from ..publish.feedback import main as write_pages

        write_pages(results_dir, students=kept, hand=hand)
    done.seconds = round(time.monotonic() - start, 2)
    return done


class _GradebookWriter:
    """The gradebook, in a thread beside the workers: built first (``_ensure_course``), then each
    result merged as it arrives, whatever has queued up in one session, so that a large class's
    merge is not a serial step after the last notebook (~13 ms a student).

    start() runs it (the workers must exist: no thread of ours may run while we fork); add() queues
    a result; join() merges what is queued, stops the thread and re-raises its exception here.
    Results added after join() are left to the final merge, which takes every student not in
    :attr:`merged`.
    """

    def __init__(self, results_dir: Path, assignment: Assignment, spec):
        import queue
        import threading

        self.merged: set[str] = set()
        self._args = (results_dir, assignment, spec)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._open = True
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import queue

        results_dir, assignment, spec = self._args
        try:
            _ensure_course(results_dir, assignment)
            with open_gradebook(results_dir) as gradebook:   # one for the whole batch
                done = False
                while not done:
                    first = self._queue.get()
                    batch = [first]
                    while True:
                        try:
                            batch.append(self._queue.get_nowait())
                        except queue.Empty:
                            break
                    done = None in batch
                    results = dict(item for item in batch if item is not None)
                    if results:
                        merge(results_dir, assignment, spec, results, gradebook=gradebook)
                        self.merged.update(results)
        except BaseException as e:  # noqa: BLE001 - re-raised in join()
            self._error = e

    def start(self) -> None:
        if self._thread.ident is None:
            self._thread.start()

    def add(self, student_id: str, result: StudentResult) -> None:
        if self._open:
            self._queue.put((student_id, result))

    def join(self) -> None:
        self.start()
        if self._open:
            self._open = False
            self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error


def _run_jobs(jobs: list[Job], workers: int, progress: bool | None,
              background: _GradebookWriter | None = None) -> dict[str, StudentResult]:
    """Grade jobs across worker processes; a worker that crashes is replaced, its job retried once.

    ``background`` starts once the workers exist, and is joined before any new fork
    (no thread of ours may run while we fork).
    """
    results: dict[str, StudentResult] = {}
    if not jobs:
        return results
    attempts: dict[str, int] = {}
    pending = list(jobs)
    # fork: workers start in milliseconds with everything imported, and never re-run __main__
    # (forkserver/spawn would re-import the CLI's __main__). Workers are forked before any thread
    # of ours exists: the progress bar is created after the first submit, without its monitor thread.
    context = multiprocessing.get_context("fork")
    _preimport()
    bar = None
    try:
        while pending:
            retry = []
            if background is not None and bar is not None:  # a retry round: fork only without threads
                background.join()
            executor = cf.ProcessPoolExecutor(max_workers=min(workers, len(pending)), mp_context=context,
                                              initializer=_worker_init)
            try:
                futures = {executor.submit(grade_submission, job): job for job in pending}
                bar = bar or _progress(len(jobs), progress)
                if background is not None:
                    background.start()
                for future in cf.as_completed(futures):
                    job = futures[future]
                    try:
                        results[job.student_id] = future.result()
                        if background is not None:
                            background.add(job.student_id, results[job.student_id])
                        bar.update(1)
                    except cf.process.BrokenProcessPool:
                        attempts[job.student_id] = attempts.get(job.student_id, 0) + 1
                        retry.append(job)
                    except Exception as e:  # noqa: BLE001
                        results[job.student_id] = crashed(job, f"the grading worker failed: {e}")
                        bar.update(1)
            except BaseException:
                _kill_workers(executor)
                raise
            finally:
                executor.shutdown(wait=False, cancel_futures=True)
            pending = []
            for job in retry:
                if attempts[job.student_id] >= 2:
                    results[job.student_id] = crashed(job, "the grading worker crashed twice on this submission")
                    bar.update(1)
                else:
                    pending.append(job)
    finally:
        if bar is not None:
            bar.close()
    return results


def _preimport() -> None:
    """Import what every worker needs once, here, so forked workers start with it (~1 s each)."""
    import jupyter_client.blocking  # noqa: F401
    import nbclient  # noqa: F401
    import zmq  # noqa: F401

    from ..run import execute, scoring  # noqa: F401
    from ..publish.feedback import _highlighter, _markdown, sanitize

    _markdown(), _highlighter(), sanitize("")


def _kill_workers(executor: cf.ProcessPoolExecutor) -> None:
    """On Ctrl-C: kill the workers now (their kernels die with them), don't wait for notebooks.

    A sandbox caught starting up at that instant can miss bubblewrap's die-with-parent, so the
    cgroups and scratch folders of the dead workers are then swept as well.
    """
    procs = list(getattr(executor, "_processes", {}).values())
    for proc in procs:
        try:
            proc.kill()
        except (OSError, AttributeError):
            pass
    for proc in procs:
        try:
            proc.join(timeout=5)
        except (OSError, AttributeError, AssertionError):
            pass
    sweep_leftovers()

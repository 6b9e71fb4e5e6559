"""Grading a class on a Dask cluster: ``course-grade autograde SUBMITTED --out RESULTS --scheduler ADDRESS``.

What runs where::

    client: course-grade autograde       scheduler: Dask's               workers: dask worker
    reads each hand-in's bytes   ------> one task per submission  -----> grade it in the sandbox
    writes RESULTS, record last  <------ on an admitted worker    <----- (grade.grade_submission),
    then merges (autograde.py)                                           return plain values

- The **client** is this process. It reads every hand-in by the grader's own rules (autograder.run.handin:
  each file's bytes, or why it was refused) and puts it in the task, so a worker needs neither
  SUBMITTED_DIR nor RESULTS_DIR: no shared filesystem is assumed. It alone writes RESULTS_DIR, in
  grade.py's order: a student's old record (then notebook and feedback) is removed before the task
  is sent, the returned notebook and feedback page are written when it comes back, the record
  last. The merge (grades.json, exports, gradebook) is autograde.py's, as for local workers.
- The **scheduler** is Dask's: ``dask scheduler`` on some machine, or one in this process for
  ``local:N`` (a ``LocalCluster`` of N worker processes here).
- The **comms** (client, scheduler, workers; :mod:`autograder.batch.dask_tls`): ``local:N`` talks TLS with
  a key and certificate made for the batch (Dask's ``Security.temporary()``, held in memory), so no
  one without it reaches the scheduler, which runs whatever a client sends. A remote ``tls://``
  scheduler is reached with ``--tls-ca-file/--tls-cert/--tls-key`` or Dask's TLS configuration (none:
  one line). A remote ``tcp://`` scheduler is plain: allowed only because every worker admitted gives
  learner code an empty network namespace (below; ``--insecure`` aside), so learner code cannot reach it.
- A **worker** is admitted before it gets any task: the client asks for its environment
  (:mod:`autograder.batch.environment`) and refuses, with a warning that names the part, a worker whose
  course_lib, autograder or Python differs from the client's, or that cannot run the grader at all.
  An admitted worker gets the instructor files once (in a private folder, removed at the batch's
  end) and the Dask resource, one per batch, that every task of the batch requires, so the scheduler
  never places a task on a worker that was not admitted -- one that joined late or restarted is
  admitted as it appears -- and two batches sharing a cluster never mix their files.
  The resource is 1 per worker process: one submission at a time each, as a local worker process
  grades (start workers with ``--nthreads 1 --nworkers <cores>``).
- A **task** (:func:`grade_task`) checks again that its worker holds the batch's environment and
  instructor files (else it refuses, and the client sends it elsewhere), and grades the hand-in's
  files as the client read them, once (the job carries them), in a scratch folder of its own with the batch's settings: same sandbox, same
  limits; a worker without bubblewrap uses the strongest isolation it has, and the student's
  record says which (``worker``, ``isolation``). It returns the record, the autograded notebook and
  the feedback page, and removes its folder.

Faults. A worker that dies mid-task: Dask runs the task again on another worker (past
``distributed.scheduler.allowed-failures``, 3 by default, the student is a grader_error: the
submission itself kills workers); a task is pure, and the client writes a student once, when
the answer arrives. A client killed mid-batch: records exist only for students written whole,
and a rerun resumes (autograde.py). A scheduler that cannot be reached or is lost mid-batch
(:meth:`Cluster.lost_scheduler`: what to restart), a batch with no admissible worker, or none left
for :data:`WORKERLESS_S`: :class:`AutograderError`, one line; what was graded is kept.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import socket
import time
import uuid
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path


from ..source.assignment import Assignment, is_lesson_path, load_source
from .dask_tls import TlsFiles, batch_security, file_address, remote_security, scheme
from .environment import differences, digest, digest_bytes, environment
from ..errors import AutograderError
from ..run.grade import blank_result, crashed, grade_submission
from ..run.handin import HandIn
from ..run.job import Batch, Job
from ..publish.layout import autograded_path, feedback_path, record_path, student_files
from ..contract.results import GRADER_ERROR, StudentResult, write_atomic, write_json
from ..sandbox import probe, scratch_dir, stop_fork_servers, sweep_leftovers

log = logging.getLogger(__name__)

#: ``local:N``: N worker processes on this machine, at most this many.
MAX_LOCAL_WORKERS = 512
#: Seconds a batch waits without an admitted worker (none started yet, or all gone) before it stops.
WORKERLESS_S = 120.0
#: Tasks in flight per admitted worker: one grading, one waiting (so no worker idles between two).
#: Not more: every task in flight on a worker that dies counts as one of its allowed failures.
IN_FLIGHT_PER_WORKER = 2
#: How often the client looks for workers to admit (s), and for workers that left.
ADMIT_EVERY_S = 1.0
#: Dask settings for a LocalCluster (local:N): no statistical profiler sampling every worker's stack
#: each 10 ms, and a calmer event-loop watchdog. Grading needs neither; a worker started elsewhere
#: can take the same (DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False ...).
LOCAL_CONFIG = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
                "distributed.admin.system-monitor.interval": "2s"}
#: Tries of one task that came back ungraded (refused by its worker, dropped by the scheduler) before it
#: is the student's grader_error.
MAX_REFUSALS = 3
LOCAL = re.compile(r"local:(\d+)")


def parse_scheduler(text: str) -> tuple[str, str | int]:
    """What ``--scheduler`` names: ``("local", N)``, ``("file", path)`` (a Dask scheduler file, as
    dask-jobqueue and ``dask scheduler --scheduler-file`` write) or ``("address", address)``.

    >>> parse_scheduler("local:2"), parse_scheduler("tls://10.0.0.5:8786")
    (('local', 2), ('address', 'tls://10.0.0.5:8786'))
    >>> parse_scheduler("10.0.0.5")
    Traceback (most recent call last):
    ...
    autograder.errors.AutograderError: --scheduler '10.0.0.5' is not a Dask scheduler address (missing port number in address '10.0.0.5'); give tls:// or tcp://HOST:PORT (dask scheduler listens on 8786), a scheduler file, or local:N
    """
    text = str(text).strip()
    m = LOCAL.fullmatch(text)
    if m:
        n = int(m[1])
        if not 1 <= n <= MAX_LOCAL_WORKERS:
            raise AutograderError(f"--scheduler local:{n} asks for {n} worker processes; use 1 to {MAX_LOCAL_WORKERS}")
        return "local", n
    if text.startswith("local"):
        raise AutograderError(f"--scheduler {text!r}: write local:N for N worker processes on this machine, e.g. local:4")
    if text.endswith(".json") or Path(text).is_file():
        if not Path(text).is_file():
            raise AutograderError(f"--scheduler {text}: no such scheduler file (dask scheduler --scheduler-file writes it)")
        return "file", text
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        _, location = parse_address(text)
        parse_host_port(location)
    except (ValueError, TypeError) as e:
        raise AutograderError(f"--scheduler {text!r} is not a Dask scheduler address ({e}); give tls:// or tcp://HOST:PORT "
                              f"(dask scheduler listens on 8786), a scheduler file, or local:N") from None
    return "address", text


# ---- what a task carries, and what it brings back ---------------------------------------------

@dataclass(frozen=True)
class Instructor:
    """The instructor files a batch grades against, as bytes (sent to each worker once)."""

    name: str
    notebook_names: tuple[str, ...]
    files: tuple[tuple[str, bytes], ...]
    """Every instructor file (the notebooks, then the others) by its released name."""
    lesson: str | None
    """A module name (part of the installed packages, so of the environment), a lesson file's name, or None."""
    lesson_files: tuple[tuple[str, bytes], ...] = ()
    """A lesson given by path: its file, or its package folder's files, by name (under ``lesson/``)."""

    @classmethod
    def of(cls, assignment: Assignment) -> Instructor:
        files = tuple((name, Path(path).read_bytes()) for name, path in assignment.instructor_files().items())
        lesson, lesson_files = assignment.lesson, ()
        if lesson is not None and is_lesson_path(lesson):
            path = Path(lesson)
            if path.is_dir():
                lesson_files = tuple((f"{path.name}/{p.relative_to(path).as_posix()}", p.read_bytes())
                                     for p in sorted(path.rglob("*.py")) if "__pycache__" not in p.parts)
                lesson = f"{path.name}/"
            else:
                lesson_files, lesson = ((path.name, path.read_bytes()),), path.name
        return cls(assignment.name, assignment.notebook_names, files, lesson, lesson_files)

    @property
    def digest(self) -> str:
        parts = [self.name.encode(), "\0".join(self.notebook_names).encode(), (self.lesson or "").encode()]
        for name, data in (*self.files, *self.lesson_files):
            parts += [name.encode(), data]
        return digest_bytes(*parts)

    def install(self, folder: Path) -> Assignment:
        """Write the files into ``folder``; the Assignment that reads them there."""
        for name, data in (*self.files, *(("lesson/" + n, d) for n, d in self.lesson_files)):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        lesson = str(folder / "lesson" / self.lesson) if self.lesson_files else self.lesson
        names = [name for name, _ in self.files]
        return Assignment(name=self.name, notebooks=tuple(folder / n for n in self.notebook_names),
                          files=tuple(folder / n for n in names if n not in self.notebook_names),
                          lesson=lesson, root=folder)


@dataclass(frozen=True)
class Task:
    """One submission to grade on a worker: everything :func:`grade_task` needs, as plain values."""

    student_id: str
    hand_in: HandIn
    """The hand-in as the batch read it, once (:class:`autograder.run.handin.HandIn`)."""
    batch: Batch
    """The batch's :class:`autograder.run.job.Batch`; the worker grades against its own copy of the instructor files."""
    fingerprint: str
    environment_digest: str
    """The client's :func:`autograder.batch.environment.digest`: the worker must have the same."""
    instructor_digest: str
    """:attr:`Instructor.digest` of the batch: the worker must hold those files."""
    tag: str
    """The batch's resource tag, under which the worker keeps its copy of the instructor files."""


@dataclass(frozen=True)
class Graded:
    """What a task brings back: plain values only; the client writes them."""

    record: dict
    """StudentResult.to_json() of the student."""
    notebooks: dict[str, str]
    """The autograded notebooks (nbformat JSON) that ran, by name."""
    feedback: dict[str, bytes]
    """The feedback pages, by notebook name."""
    worker: str
    host: str
    isolation: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Refusal:
    """A task that its worker would not run (not this batch's environment or files)."""

    worker: str
    host: str
    message: str


@dataclass(frozen=True)
class WorkerReport:
    """What a worker says about itself when asked to join a batch."""

    environment: dict
    host: str
    pid: int
    isolation: str
    warnings: tuple[str, ...]
    missing: tuple[str, ...] = ()
    """What of the isolation minimum it lacks (:meth:`autograder.sandbox.Isolation.missing`)."""


# ---- on the worker ---------------------------------------------------------------------------

#: Instructor files installed in this worker process, by batch tag: (their digest, where, the Assignment).
_INSTALLED: dict[str, tuple[str, Path, Assignment]] = {}


def _report() -> WorkerReport:
    """Run on a worker (Client.run): its environment and isolation."""
    iso = probe()
    return WorkerReport(environment(), socket.gethostname(), os.getpid(), iso.summary(), tuple(iso.warnings),
                        iso.missing())


async def _admit(instructor: Instructor, tag: str, dask_worker=None) -> str:
    """Run on a worker the client has checked: sweep what dead graders left on this machine, install the
    instructor files for this batch (removed by :func:`_forget` at its end), then take its resource."""
    sweep_leftovers()  # sandboxes and cgroups of a worker killed here (engine's names)
    if tag not in _INSTALLED:
        folder = scratch_dir("instructor")  # 0700: the grader's alone; swept by sweep_leftovers if we die
        atexit.register(shutil.rmtree, folder, True)
        _INSTALLED[tag] = (instructor.digest, folder, instructor.install(folder))
    await dask_worker.set_resources(**{tag: 1})
    return dask_worker.address


async def _forget(tag: str, dask_worker=None) -> None:
    """Run on a worker at the end of a batch: no more of its tasks, and its instructor files removed."""
    await dask_worker.set_resources(**{tag: 0})
    installed = _INSTALLED.pop(tag, None)
    if installed is not None:
        shutil.rmtree(installed[1], ignore_errors=True)
    stop_fork_servers()  # the kernel fork server this worker started for the batch (started again by the next)


async def _retire(tag: str, dask_worker=None) -> None:
    """Run on a worker: take away the batch's resource (it gets no more tasks of it)."""
    await dask_worker.set_resources(**{tag: 0})


def grade_task(task: Task) -> Graded | Refusal:
    """Run on a worker, one at a time per worker process: grade one submission, return plain values."""
    from distributed import get_worker

    address, host = get_worker().address, socket.gethostname()
    installed = _INSTALLED.get(task.tag)
    if digest(environment()) != task.environment_digest:
        return Refusal(address, host, "its course package or Python is not the batch's (it changed after admission?)")
    if installed is None or installed[0] != task.instructor_digest:
        return Refusal(address, host, f"it holds no instructor files of digest {task.instructor_digest[:12]}...")
    assignment = installed[2]
    root = scratch_dir("task")  # swept by the leftover sweep if we die
    try:
        folder = task.hand_in.lay_out(root / "submitted", task.student_id, assignment.name)
        results = root / "results"
        job = Job(student_id=task.student_id, folder=str(folder), hand_in=task.hand_in, fingerprint=task.fingerprint,
                  batch=replace(task.batch, assignment=assignment, results_dir=str(results)))
        result = grade_submission(job)
        notebooks = {name: autograded_path(results, task.student_id, assignment, name) for name in assignment.notebook_names}
        pages = {name: feedback_path(results, task.student_id, assignment.name, name) for name in assignment.notebook_names}
        iso = probe()
        return Graded(record=result.to_json(),
                      notebooks={n: p.read_text(encoding="utf-8") for n, p in notebooks.items() if p.is_file()},
                      feedback={n: p.read_bytes() for n, p in pages.items() if p.is_file()},
                      worker=address, host=host, isolation=iso.summary(), warnings=tuple(iso.warnings))
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---- on the client ---------------------------------------------------------------------------

class Cluster:
    """The Dask cluster a batch grades on. Connects on :meth:`connect`, closes on ``__exit__``."""

    def __init__(self, scheduler: str, tls: TlsFiles = TlsFiles()):
        self.scheduler = str(scheduler)
        self.kind, self.target = parse_scheduler(self.scheduler)
        if self.kind == "local":
            if tls.given():
                raise AutograderError(f"{'/'.join(tls.flags())} is for a remote TLS scheduler; --scheduler "
                                      f"{self.scheduler} makes a TLS credential of its own for the batch")
            self.security = None
            """Dask's Security of the batch: made in :meth:`connect` for ``local:N`` (dask_tls.batch_security)."""
            self.remote_tls = False
        else:
            address = (self.target if self.kind == "address" else file_address(self.target)) or "tcp://"
            self.security = remote_security(address, tls)   # a tls:// address and no credential: one line, here
            self.remote_tls = scheme(address) == "tls"
            """Whether workers joining need the --tls-* flags (a remote TLS scheduler)."""
        self.warnings: list[str] = []
        """Refused workers and the isolation each worker lacked, one line each, for the batch report."""
        self.isolation: set[str] = set()
        """Isolation summaries of the workers that graded."""
        self._client = None
        self._local = None

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def connect(self):
        """The Dask client: a LocalCluster started for ``local:N``, else the scheduler reached."""
        if self._client is not None:
            return self._client
        import dask
        from distributed import Client, LocalCluster

        if self.kind == "local":
            # memory_limit=0: the sandbox's cgroup caps each notebook; Dask's own monitor would only
            # see the worker process and restart it for what its kernels use.
            # TLS with a credential made for this batch: tls://127.0.0.1, and only its holders connect.
            self.security = batch_security()
            with dask.config.set(LOCAL_CONFIG):  # the nannies hand it to every worker they (re)start
                self._local = LocalCluster(n_workers=int(self.target), threads_per_worker=1, processes=True,
                                           memory_limit=0, dashboard_address=None, silence_logs=logging.ERROR,
                                           security=self.security, protocol="tls://",
                                           scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})  # no fixed port, this host only
            self._client = Client(self._local, security=self.security, set_as_default=False)
            return self._client
        timeout = dask.config.get("distributed.comm.timeouts.connect")
        quiet = logging.getLogger("distributed")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)  # the one line below says it; no retry log on the terminal
        try:
            if self.kind == "file":
                self._client = Client(scheduler_file=str(self.target), security=self.security, set_as_default=False)
            else:
                self._client = Client(str(self.target), security=self.security, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as e:
            why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise AutograderError(f"cannot reach the Dask scheduler at {self.scheduler} within {timeout} ({why[:200]}); "
                                  f"start one there (`dask scheduler`), check the address, or set "
                                  f"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT to wait longer") from None
        finally:
            quiet.setLevel(level)
        # A batched stream whose scheduler dies mid-send logs "Batched Comm Closed" with a traceback from
        # Dask's own thread (distributed/batched.py), before or while the batch says it in one line
        # (lost_scheduler): that logger is quiet for the client's life.
        batched = logging.getLogger("distributed.batched")
        self._batched_level = batched.level
        batched.setLevel(logging.CRITICAL)
        return self._client

    def tls_flags(self) -> str:
        """What a ``dask worker`` command joining this cluster adds for TLS."""
        return " --tls-ca-file CA.pem --tls-cert CERT.pem --tls-key KEY.pem" if self.remote_tls else ""

    def report(self, here):
        """The isolation to report for the batch: the workers' (those that graded), with their
        warnings and the refused workers; this machine's (``here``, a sandbox.Isolation) if none graded."""
        if not self.isolation:
            return _Report(here.summary(), tuple(here.warnings) + tuple(self.warnings))
        return _Report("Dask workers: " + " | ".join(sorted(self.isolation)), tuple(self.warnings))

    def close(self) -> None:
        client, local, self._client, self._local = self._client, self._local, None, None
        # A client whose scheduler is gone logs its cancelled reconnect as a traceback when it closes;
        # the batch has said it in one line (lost_scheduler).
        # (each of Dask's loggers may carry its own level: the client's, the stream's and the parent's are set)
        dask_logs = [logging.getLogger(name) for name in ("distributed", "distributed.client", "distributed.batched")]
        levels = [one.level for one in dask_logs]
        if client is not None and client.status != "running":
            for one in dask_logs:
                one.setLevel(logging.CRITICAL)   # its client, its batched stream, its core: all say the same
        try:
            for thing in (client, local):
                if thing is not None:
                    try:
                        thing.close(timeout=10)
                    except Exception:  # noqa: BLE001 - closing a cluster that is already gone
                        pass
        finally:
            for one, level in zip(dask_logs, levels):
                one.setLevel(level)
            if getattr(self, "_batched_level", None) is not None:
                logging.getLogger("distributed.batched").setLevel(self._batched_level)
                self._batched_level = None

    def lost_scheduler(self, graded: int | None = None, total: int | None = None) -> str:
        """The one line for a scheduler lost mid-batch (what to restart; what was graded is kept)."""
        count = f" ({graded} of {total} graded in this run)" if graded is not None else ""
        return (f"lost the Dask scheduler at {self.scheduler} mid-batch{count}; graded students are kept: restart "
                f"the scheduler (`dask scheduler`) and its workers (they exit with it), then run the same command "
                f"again to grade the rest")

    def run_jobs(self, jobs: list[Job], make_bar, background=None) -> dict[str, StudentResult]:
        """Grade ``jobs`` on the cluster; write each student's files here; return the results.

        ``make_bar(total)`` makes the progress bar; ``background`` (autograde._GradebookWriter) starts once
        a worker is admitted, and is given each result as it arrives.
        """
        results: dict[str, StudentResult] = {}
        if not jobs:
            return results
        from distributed import wait
        from distributed.client import FuturesCancelledError

        client = self.connect()
        batch = _Batch(client, self, jobs[0].assignment, insecure=jobs[0].settings.insecure)
        batch.wait_for_a_worker()
        if background is not None:
            background.start()
        bar = make_bar(len(jobs))
        bar.set_postfix_str(batch.workers_text(), refresh=False)
        queue = deque((job, 0) for job in jobs)
        running: dict = {}
        last_admit = time.monotonic()
        try:
            while queue or running:
                while queue and len(running) < batch.window():
                    job, refusals = queue.popleft()
                    future = batch.submit(job, refusals)
                    running[future] = (job, refusals)
                if time.monotonic() - last_admit >= ADMIT_EVERY_S:  # workers that joined, or left
                    batch.admit_new()
                    batch.check_workers_left(len(results), len(jobs))
                    bar.set_postfix_str(batch.workers_text())
                    last_admit = time.monotonic()
                try:
                    with client.as_current():  # wait() asks for the current client; ours is not the default
                        finished, _ = wait(list(running), timeout=ADMIT_EVERY_S, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    continue
                except FuturesCancelledError:   # Dask cancels every future when the scheduler goes
                    if client.status == "running":
                        raise
                    raise AutograderError(self.lost_scheduler(len(results), len(jobs))) from None
                for future in finished:
                    job, refusals = running.pop(future)
                    outcome = batch.outcome(future, job)
                    future.release()
                    if isinstance(outcome, Refusal):
                        batch.retire(outcome)
                        if refusals + 1 < MAX_REFUSALS:
                            queue.appendleft((job, refusals + 1))
                            continue
                        outcome = crashed(job, f"not graded: sent {MAX_REFUSALS} times, never graded "
                                                f"(last: {outcome.message})")
                    results[job.student_id] = outcome
                    if background is not None:
                        background.add(job.student_id, outcome)
                    bar.update(1)
        except BaseException:
            try:  # tasks already running finish on their workers; their answers are dropped
                client.cancel(list(running), force=True)
            except Exception:  # noqa: BLE001 - the scheduler may be the thing that failed
                pass
            raise
        finally:
            bar.close()
            batch.forget()
        self.warnings.extend(batch.warnings)
        return results


@dataclass(frozen=True)
class _Report:
    """Isolation as the batch report reads it (sandbox.Isolation's summary() and warnings)."""

    text: str
    warnings: tuple[str, ...]

    def summary(self) -> str:
        return self.text


class _Batch:
    """One batch's view of the cluster: admitted and refused workers, and the resource tag."""

    def __init__(self, client, cluster: Cluster, assignment: Assignment, insecure: bool = False):
        self.client, self.cluster = client, cluster
        self.insecure = insecure
        self.env = environment()
        self.env_digest = digest(self.env)
        self.instructor = Instructor.of(assignment)
        self.spec = load_source(assignment)
        # One tag per batch: two batches on one cluster (even of one assignment) never share a worker's files.
        self.tag = f"course-grade-{uuid.uuid4().hex[:16]}"
        self.admitted: dict[str, WorkerReport] = {}
        self.refused: dict[str, str] = {}
        self.live: set[str] = set()
        self.warnings: list[str] = []
        self._seen_warnings: set[str] = set()
        self._workerless_since: float | None = None

    # -- workers
    def admit_new(self) -> None:
        """Check every worker not seen yet; admit those whose environment is the client's."""
        workers = self._workers()
        self.live = set(workers)
        new = [a for a in workers if a not in self.admitted and a not in self.refused]
        if not new:
            return
        try:
            reports = self.client.run(_report, workers=new, on_error="return")
        except (OSError, ValueError, KeyError):
            return  # one of them left while asked: all are asked again at the next look
        ok = []
        for address in new:
            report = reports.get(address)
            if report is None:
                continue  # gone again before it answered
            if isinstance(report, BaseException):
                self._refuse(address, f"refused the Dask worker {address}: it cannot run this grader "
                                      f"({type(report).__name__}: {str(report)[:200]}); install this course package "
                                      f"there and restart the worker")
                continue
            differ = differences(self.env, report.environment)
            if differ:
                self._refuse(address, f"refused the Dask worker {address} (host {report.host}): {'; '.join(differ)}; "
                                      f"install this course package version there and restart the worker")
                continue
            if report.missing and not self.insecure:
                self._refuse(address, f"refused the Dask worker {address} (host {report.host}): it cannot isolate "
                                      f"learner code, it lacks {'; and '.join(report.missing)} (or pass --insecure)")
                continue
            ok.append(address)
        if ok:
            try:
                answers = self.client.run(_admit, self.instructor, self.tag, workers=ok, on_error="return")
            except (OSError, ValueError, KeyError):
                answers = {}
            for address in ok:
                if isinstance(answers.get(address), BaseException) or address not in answers:
                    continue  # gone, or it failed to take the files: asked again at the next look
                report = reports[address]
                self.admitted[address] = report
                for line in report.warnings:
                    self._warn(f"Dask workers on host {report.host}: {line}")
        self.live = set(self._workers())

    def _workers(self) -> dict:
        """The workers the scheduler has now; AutograderError if the scheduler is gone."""
        try:
            return self.client.scheduler_info(n_workers=-1).get("workers", {})
        except (OSError, TimeoutError) as e:
            raise AutograderError(f"lost the Dask scheduler at {self.cluster.scheduler} ({type(e).__name__}); "
                                  f"run again to finish: graded students are kept") from None

    def wait_for_a_worker(self) -> None:
        """Admit the workers there are; wait (up to WORKERLESS_S) for one when there are none yet."""
        start = time.monotonic()
        while True:
            self.admit_new()
            if self.admitted_live():
                return
            if self.live and all(a in self.refused for a in self.live):
                raise AutograderError(f"no Dask worker at {self.cluster.scheduler} can grade this batch: "
                                      + " | ".join(self.refused[a] for a in sorted(self.live)))
            if time.monotonic() - start > WORKERLESS_S:
                raise AutograderError(f"the Dask scheduler at {self.cluster.scheduler} has had no worker for "
                                      f"{WORKERLESS_S:g} s; start some (`dask worker {self.cluster.scheduler} "
                                      f"--nthreads 1{self.cluster.tls_flags()}`) and run again")
            time.sleep(0.2)

    def admitted_live(self) -> list[str]:
        return [a for a in self.admitted if a in self.live]

    def check_workers_left(self, graded: int, total: int) -> None:
        if self.admitted_live():
            self._workerless_since = None
            return
        self._workerless_since = self._workerless_since or time.monotonic()
        if time.monotonic() - self._workerless_since > WORKERLESS_S:
            raise AutograderError(f"no admitted Dask worker at {self.cluster.scheduler} for {WORKERLESS_S:g} s "
                                  f"({graded} of {total} graded and kept); start workers and run again to finish")

    def window(self) -> int:
        return max(IN_FLIGHT_PER_WORKER, IN_FLIGHT_PER_WORKER * len(self.admitted_live()))

    def workers_text(self) -> str:
        n = len(self.admitted_live())
        return f"{n} Dask worker{'s' * (n != 1)}"

    def retire(self, refusal: Refusal) -> None:
        if not refusal.worker:
            return  # no worker to blame: the task is simply sent again
        self.admitted.pop(refusal.worker, None)
        self._refuse(refusal.worker, f"the Dask worker {refusal.worker} (host {refusal.host}) refused a task: "
                                     f"{refusal.message}; it gets no more tasks of this batch")
        self.client.run(_retire, self.tag, workers=[refusal.worker], on_error="ignore")

    def forget(self) -> None:
        """At the end: every admitted worker drops this batch's resource and instructor files."""
        try:
            self.client.run(_forget, self.tag, workers=self.admitted_live(), on_error="ignore")
        except Exception:  # noqa: BLE001 - a worker or the scheduler already gone: nothing left to drop there
            pass

    def _refuse(self, address: str, message: str) -> None:
        self.refused[address] = message
        self._warn(message)

    def _warn(self, line: str) -> None:
        if line not in self._seen_warnings:
            self._seen_warnings.add(line)
            self.warnings.append(line)
            log.info("%s", line)  # the batch report prints it (cli.print_batch), not over the progress bar

    # -- tasks
    def submit(self, job: Job, refusals: int):
        """Remove the student's old files (record first), then send the task."""
        if refusals == 0:
            for stale in student_files(job.results_dir, job.student_id, job.assignment):   # the record first
                stale.unlink(missing_ok=True)
        # The bytes, read back from the batch's staging folder now, for this task alone (the window bounds how many)
        task = Task(student_id=job.student_id, hand_in=job.hand_in.loaded(), batch=job.batch, fingerprint=job.fingerprint,
                    environment_digest=self.env_digest, instructor_digest=self.instructor.digest, tag=self.tag)
        key = f"grade-{job.student_id[:60]}-{digest_bytes(job.student_id.encode(), job.fingerprint.encode())[:16]}"
        return self.client.submit(grade_task, task, key=key + (f"-again{refusals}" if refusals else ""),
                                  resources={self.tag: 1}, pure=False)

    def outcome(self, future, job: Job) -> StudentResult | Refusal:
        """The student's result written into RESULTS_DIR (record last), or the worker's refusal."""
        from distributed import KilledWorker

        if future.status == "finished":
            answer = future.result()
            if isinstance(answer, Refusal):
                return answer
            return self._write(job, answer)
        if future.status == "cancelled":
            if self.client.status != "running":
                raise AutograderError(self.cluster.lost_scheduler())
            return Refusal("", "", "the Dask scheduler dropped the task (was it restarted?)")
        error = future.exception()
        if isinstance(error, KilledWorker):
            return crashed(job, f"the Dask workers grading this submission died "
                                 f"{error.allowed_failures + 1} times (it was moved to another worker each time)")
        return crashed(job, f"the grading worker failed: {type(error).__name__}: {str(error)[:300]}")

    def _write(self, job: Job, answer: Graded) -> StudentResult:
        result = StudentResult.from_json(answer.record)
        result.worker = f"{answer.worker} (host {answer.host})"
        result.isolation = answer.isolation
        self.cluster.isolation.add(answer.isolation)
        results_dir = Path(job.results_dir)
        try:
            for name, text in answer.notebooks.items():
                if name in job.assignment.notebook_names:
                    write_atomic(autograded_path(results_dir, job.student_id, job.assignment, name), text)
            for name, page in answer.feedback.items():
                if name in job.assignment.notebook_names:
                    write_atomic(feedback_path(results_dir, job.student_id, job.assignment.name, name), page)
        except OSError as e:
            result = blank_result(job, self.spec, GRADER_ERROR, f"could not write the results: {e}")
        write_json(record_path(results_dir, job.student_id), result.to_json())
        return result

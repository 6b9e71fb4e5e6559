"""Costly setups that depend on nothing else, started in the background when the session starts.

The suite uses about one of the machine's two cores on average: most of its time is spent waiting on kernels,
browsers and wall-clock limits. A few setups need only CPU and nothing the tests before them make: the walk over
every decoder transformers registers, the three live vLLM engines, the learner's own Python for the browser tests.
Each is declared by the module that needs it (:func:`background`). Once pytest has collected the session (under
xdist, at a worker's first test: tests/lanes.py), one runner process (this file run as a script) works through the
ones the selected tests will use, one at a time, in a session of its own at :data:`RUNNER_NICE` (its session too:
:func:`lower_priority`), as a lane of its own beside the workers' (tests/lanes.py). The fixture then reads the job's
result (:func:`result`), waiting for it if it is still running. A job nobody has started yet when its fixture asks
is run by the fixture itself, in the foreground, as it was before this module existed; so is every job under
``COURSE_TESTS_PREFETCH=0``, ``--collect-only``, or when the runner cannot be started. Nothing the tests check
changes: a job runs the same code on the same inputs, only earlier.

A job is a module-level function ``f(folder: Path) -> value`` whose value is JSON (the runner runs it in a fresh
Python and writes the value down). It is tied to a fixture of the same module by name::

    @prefetch.background("walked")
    def _walk(folder: Path) -> list[dict]:
        return [asdict(r) for r in every_decoder.walk()]

    @pytest.fixture(scope="module")
    def walked(request, tmp_path_factory):
        return prefetch.result(request, _walk, tmp_path_factory.mktemp("walk"))

A job raises to fail: its traceback becomes the fixture's error. The runner is stopped, and its folder removed, when
the session ends (``pytest_sessionfinish``). Timings: benchmarks/results/suite-time.md.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
#: How long a fixture waits for a job the runner has started, and how long the runner lets a job run.
JOB_TIMEOUT_S = 1200
ENV_SWITCH = "COURSE_TESTS_PREFETCH"
#: The runner's nice value (and its session's). 0: the runner is one more lane, as much as a worker's. At 19, where the
#: machine had cores to spare (one pytest process), it used only those; beside three workers on two cores it got almost
#: nothing, and the library's lane, the longest, waited 114 s on the walk over every decoder (45 s alone), 36 s on the
#: live vLLM engines, even with the waiting test lending the runner its priority (:func:`hurry`).
RUNNER_NICE = 0


@dataclass(frozen=True)
class Job:
    """A background job: ``fixture`` in ``file`` needs ``func``'s value; skipped when ``unless(config)`` is true."""
    fixture: str
    file: str              # the defining module's file, resolved
    func: str              # its name in that module
    unless: Callable[[Any], bool] | None = None

    @property
    def name(self) -> str:
        return f"{Path(self.file).stem}.{self.func}"


#: Every job declared by the modules imported so far, by name.
JOBS: dict[str, Job] = {}


def background(fixture: str, unless: Callable[[Any], bool] | None = None):
    """Declare ``func`` as the background job behind ``fixture`` (a fixture of the same module); returns ``func``.

    ``unless(config)`` true: the runner does not start it (e.g. its result is in pytest's cache already)."""
    def declare(func: Callable[[Path], Any]) -> Callable[[Path], Any]:
        job = Job(fixture, str(Path(func.__code__.co_filename).resolve()), func.__name__, unless)
        JOBS[job.name] = job
        return func
    return declare


# ----------------------------------------------------------------------------- the session's side

class _Runner:
    """The runner process of this session and its folder (one per session, on ``config``)."""

    def __init__(self, folder: Path, proc: subprocess.Popen, names: list[str]):
        self.folder, self.proc, self.names = folder, proc, names

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def _claim(folder: Path, name: str, who: str) -> bool:
    """Take job ``name`` for ``who`` (atomically); False when someone already has."""
    try:
        fd = os.open(folder / f"{name}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    os.write(fd, who.encode())
    os.close(fd)
    return True


def _wanted(config, items) -> list[str]:
    """The jobs ``items`` use, in the order the first of them will want each."""
    wanted: list[str] = []
    for item in items:
        path = str(Path(str(item.fspath)).resolve())
        for job in JOBS.values():
            if job.name not in wanted and job.file == path and job.fixture in getattr(item, "fixturenames", ()):
                if job.unless is None or not job.unless(config):
                    wanted.append(job.name)
    return wanted


def pytest_collection_modifyitems(config, items) -> None:
    """The modules with a job go last (their order kept), so the runner has the rest of the session to do it."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return
    files = {job.file for job in JOBS.values()}
    items[:] = sorted(items, key=lambda item: str(Path(str(item.fspath)).resolve()) in files)


def pytest_collection_finish(session) -> None:
    """Start the runner on the jobs the selected tests use. Under xdist (tests/lanes.py) a worker learns which
    lane it runs only from its first test, so it starts a runner then, on the jobs of that lane and of the lanes it
    will run next (its unit of ``lanes.PLANS``), and another at the first test of any other lane it is given."""
    config = session.config
    config._course_prefetch = []
    if os.environ.get(ENV_SWITCH, "1") == "0" or config.option.collectonly or not session.items:
        return
    if hasattr(config, "workerinput"):
        config._course_prefetch_items, config._course_prefetch_lanes = list(session.items), set()
        return
    runner = start(_wanted(config, session.items))
    if runner is not None:
        config._course_prefetch.append(runner)


def pytest_runtest_setup(item) -> None:
    items = getattr(item.config, "_course_prefetch_items", None)
    if not items:
        return
    from lanes import lane, unit_of, workers

    mine = lane(item)
    if mine in item.config._course_prefetch_lanes:
        return
    unit = unit_of(mine, workers(item.config))
    ahead = unit[unit.index(mine):]            # this lane and those this worker will run after it
    item.config._course_prefetch_lanes.update(ahead)
    runner = start(_wanted(item.config, [i for i in items if lane(i) in ahead]))
    if runner is not None:
        item.config._course_prefetch.append(runner)


def start(names: list[str], nice: int = RUNNER_NICE) -> _Runner | None:
    """A runner working through the jobs ``names`` in that order at nice ``nice``, or None when there are none or it
    cannot start."""
    if not names:
        return None
    folder = Path(tempfile.mkdtemp(prefix="course-prefetch-"))
    plan = [{"name": n, "file": JOBS[n].file, "func": JOBS[n].func} for n in names]
    (folder / "plan.json").write_text(json.dumps(plan))
    try:
        with open(folder / "runner.log", "wb") as log:
            proc = subprocess.Popen([sys.executable, __file__, "--run", str(folder), str(nice)], cwd=REPO,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                    start_new_session=True)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return _Runner(folder, proc, list(names))


def pytest_sessionfinish(session) -> None:
    for runner in getattr(session.config, "_course_prefetch", ()):
        runner.stop()


class JobFailed(Exception):
    """A background job raised or died; the message carries its traceback or the runner's last words."""


def result(request, func: Callable[[Path], Any], folder: Path | Callable[[], Path]) -> Any:
    """``func(folder)``'s value: the runner's, when it took the job (waiting for it), else computed here now.

    ``folder`` may be a function that makes it, called only when the job is computed here (a folder made outside
    pytest's own temporary tree would otherwise be left behind, empty, whenever the runner did the job). The runner's
    value is read back from JSON; a value computed here goes through JSON too, so a fixture sees the same types
    either way."""
    job = JOBS.get(f"{Path(func.__code__.co_filename).stem}.{func.__name__}")
    runner = next((r for r in getattr(request.config, "_course_prefetch", ()) if job and job.name in r.names), None)
    if job is None or runner is None or _claim(runner.folder, job.name, "pytest"):
        return json.loads(json.dumps(func(folder() if callable(folder) else folder)))
    done = runner.folder / f"{job.name}.done.json"
    if not done.exists():
        hurry(runner)
    deadline = time.monotonic() + JOB_TIMEOUT_S + 60
    while not done.exists():
        if runner.proc.poll() is not None and not done.exists():
            log = (runner.folder / "runner.log").read_text(errors="replace")[-3000:]
            raise JobFailed(f"the background runner ended (rc {runner.proc.returncode}) before {job.name} was done:\n"
                            f"{log}")
        if time.monotonic() > deadline:
            raise JobFailed(f"background job {job.name} not done after {JOB_TIMEOUT_S + 60} s")
        time.sleep(0.1)
    outcome = json.loads(done.read_text())
    if "error" in outcome:
        raise JobFailed(f"background job {job.name} failed:\n{outcome['error']}")
    return outcome["value"]


def hurry(runner: _Runner) -> bool:
    """A test now waits on the runner's job: the runner, its job and their session get this process's priority, where
    the machine lets a process raise one (root may); True when it did. The runner lowers itself again before its next
    job (:func:`_run`).

    A job still running when its fixture asks would otherwise go on at the runner's nice (at 19 beside three busy
    lanes: the walk over every decoder, 45 s when it runs alone, kept its fixture waiting 135 s)."""
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PGRP, runner.proc.pid, mine)      # the runner leads its own group and session
        autogroup = Path(f"/proc/{runner.proc.pid}/autogroup")
        if autogroup.exists():
            autogroup.write_text(str(mine))
    except (OSError, ProcessLookupError):
        return False
    return True


# ----------------------------------------------------------------------------- the runner's side

def _load(file: str):
    """Import the module at ``file`` as pytest's rootdir-relative imports do: its folder, tests/ and the repo first."""
    here = Path(file).parent
    for entry in (str(REPO), str(TESTS), str(here)):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    spec = importlib.util.spec_from_file_location(Path(file).stem, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _one(folder: Path, name: str, file: str, func: str) -> None:
    """Run one job in this process; write ``NAME.value.json`` or raise."""
    value = getattr(_load(file), func)(folder / name)
    tmp = folder / f"{name}.value.tmp"
    tmp.write_text(json.dumps(value))
    tmp.rename(folder / f"{name}.value.json")


def _write_done(folder: Path, name: str, outcome: dict) -> None:
    tmp = folder / f"{name}.done.tmp"
    tmp.write_text(json.dumps(outcome))
    tmp.rename(folder / f"{name}.done.json")


def lower_priority(level: int = 19) -> None:
    """nice ``level`` (19: the lowest) for this process and its children, and for the session they are in.

    Where the kernel groups processes by session (``CONFIG_SCHED_AUTOGROUP``, on in most distributions: Debian's
    kernels, this machine), a nice value weighs only against the same session's processes, and each session gets an
    equal share of the CPU: a runner at nice 19 in a session of its own took as much CPU as the whole pytest session
    (two spinning loops in the foreground ran 3x slower beside two such runners, and 1.0x once the session's own nice,
    ``/proc/self/autogroup``, was 19 too; see sched(7), "The autogroup feature")."""
    os.nice(max(0, level - os.nice(0)))
    try:
        Path("/proc/self/autogroup").write_text(str(level))
    except OSError:
        pass                              # no autogroups here: nice alone is enough


def _run(folder: Path, nice: int) -> None:
    """Each planned job not yet claimed, one at a time, each in a fresh Python, at nice ``nice``."""
    for entry in json.loads((folder / "plan.json").read_text()):
        name = entry["name"]
        lower_priority(nice)             # again: a fixture waiting on the last job may have raised it (hurry)
        if not _claim(folder, name, "runner"):
            continue                     # the fixture came first and runs it itself
        (folder / name).mkdir()
        err = folder / f"{name}.stderr"
        with open(err, "wb") as fh:
            try:
                proc = subprocess.run([sys.executable, __file__, "--one", str(folder), name, entry["file"],
                                       entry["func"]], cwd=REPO, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh,
                                      timeout=JOB_TIMEOUT_S)
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                rc = None
        value = folder / f"{name}.value.json"
        if rc == 0 and value.exists():
            _write_done(folder, name, {"value": json.loads(value.read_text())})
        else:
            why = "timed out" if rc is None else f"exited {rc}"
            _write_done(folder, name, {"error": f"{why}:\n" + err.read_text(errors="replace")[-6000:]})


if __name__ == "__main__":
    if sys.argv[1] == "--run":
        _run(Path(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "--one":
        try:
            _one(Path(sys.argv[2]), *sys.argv[3:6])
        except BaseException:
            traceback.print_exc()
            sys.exit(1)

"""tests/prefetch.py: a job's value is the same from the background runner as from the fixture itself.

The jobs here are written to a module of their own (as a test module declares its own) and run by a real runner
process: its value, its priority, its failure, and a job the fixture claimed first, which the runner must skip.
"""

from __future__ import annotations

import importlib.util
import os
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import prefetch

JOBS_SOURCE = '''
import os
from pathlib import Path

import prefetch


@prefetch.background("made")
def made(folder: Path) -> dict:
    """Writes a file into its folder and says where it ran and at what priority."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "made.txt").write_text("made")
    autogroup = Path("/proc/self/autogroup")
    return {"pid": os.getpid(), "nice": os.nice(0),
            "session_nice": autogroup.read_text().split()[-1] if autogroup.exists() else None,
            "files": sorted(p.name for p in folder.iterdir()),
            "numbers": (1, 2)}


@prefetch.background("broken")
def broken(folder: Path) -> None:
    raise ValueError("this job cannot be done")


@prefetch.background("waits")
def waits(folder: Path) -> dict:
    """Runs until someone raises its priority (10 s at most), then says at what priority it ended."""
    import time
    deadline = time.monotonic() + 10
    while os.nice(0) == 19 and time.monotonic() < deadline:
        time.sleep(0.05)
    autogroup = Path("/proc/self/autogroup")
    return {"nice": os.nice(0), "session_nice": autogroup.read_text().split()[-1] if autogroup.exists() else None}


@prefetch.background("slow")
def slow(folder: Path) -> int:
    import time
    time.sleep(1.5)
    return os.getpid()
'''


@pytest.fixture
def jobs(tmp_path):
    """The module of jobs above, imported here (so its jobs are declared), and a way to make a fake request."""
    file = tmp_path / "prefetch_jobs_probe.py"
    file.write_text(textwrap.dedent(JOBS_SOURCE))
    spec = importlib.util.spec_from_file_location("prefetch_jobs_probe", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    for name in [n for n in prefetch.JOBS if n.startswith("prefetch_jobs_probe.")]:
        del prefetch.JOBS[name]


def _request(runner):
    return SimpleNamespace(config=SimpleNamespace(_course_prefetch=[runner] if runner else []))


def _started(names: list[str]):
    """A runner on ``names`` at nice 19 (the suite's runs at prefetch.RUNNER_NICE), once it has claimed the first (a fixture asking sooner would run the job itself)."""
    runner = prefetch.start(names, nice=19)
    deadline = time.monotonic() + 300          # a hang detector: the runner may be starved by a busy machine
    while not (runner.folder / f"{names[0]}.claim").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return runner


def _finished(runner, name: str) -> None:
    """Wait until the runner has done job ``name`` (a fixture asking sooner would lend it its priority: hurry)."""
    deadline = time.monotonic() + 300
    while not (runner.folder / f"{name}.done.json").exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_the_runners_value_is_the_fixtures_and_it_ran_apart_at_the_lowest_priority(jobs, tmp_path):
    runner = _started(["prefetch_jobs_probe.made"])
    try:
        _finished(runner, "prefetch_jobs_probe.made")
        made = []
        background = prefetch.result(_request(runner), jobs.made, lambda: made.append(1) or tmp_path / "here")
        assert not made and not (tmp_path / "here").exists()   # the runner's folder: the fixture's is never made
        assert background["pid"] != os.getpid()
        assert background["nice"] == 19
        if Path("/proc/self/autogroup").exists():          # its session weighs as little as it does
            assert background["session_nice"] == "19"
        assert background["files"] == ["made.txt"] and background["numbers"] == [1, 2]
    finally:
        runner.stop()
    assert not runner.folder.exists() and runner.proc.poll() is not None
    # without a runner, the fixture computes it itself, through JSON as the runner's value comes
    here = prefetch.result(_request(None), jobs.made, tmp_path / "here")
    assert here["pid"] == os.getpid() and here["numbers"] == [1, 2]
    assert {k: here[k] for k in ("files", "numbers")} == {k: background[k] for k in ("files", "numbers")}


def test_a_fixture_waiting_on_the_runner_lends_it_its_priority_for_that_job_only(jobs, tmp_path):
    """Beside three busy lanes a job at nice 19 crawls; the test waiting on it raises it to its own priority (where the
    machine lets a process raise one: root), and the runner lowers itself again before its next job."""
    runner = _started(["prefetch_jobs_probe.waits", "prefetch_jobs_probe.made"])
    try:
        waited = prefetch.result(_request(runner), jobs.waits, tmp_path / "waits")
        _finished(runner, "prefetch_jobs_probe.made")
        after = prefetch.result(_request(runner), jobs.made, tmp_path / "made")
    finally:
        runner.stop()
    mine = os.nice(0)
    if os.geteuid() == 0:
        assert waited["nice"] == mine
        if Path("/proc/self/autogroup").exists():
            assert waited["session_nice"] == str(mine)
    else:
        assert waited["nice"] == 19              # nobody may raise it: it waits as before
    assert after["nice"] == 19 and after["pid"] != os.getpid()
    if Path("/proc/self/autogroup").exists():
        assert after["session_nice"] == "19"


def test_a_failed_job_fails_its_fixture_with_the_traceback(jobs, tmp_path):
    runner = _started(["prefetch_jobs_probe.broken"])
    try:
        with pytest.raises(prefetch.JobFailed, match=r"(?s)failed:.*ValueError: this job cannot be done"):
            prefetch.result(_request(runner), jobs.broken, tmp_path)
    finally:
        runner.stop()


def test_a_job_the_fixture_claims_first_is_skipped_by_the_runner(jobs, tmp_path):
    runner = _started(["prefetch_jobs_probe.slow", "prefetch_jobs_probe.made"])
    try:
        # the runner is busy with "slow" for 1.5 s; the fixture asks for "made" now and runs it here
        here = prefetch.result(_request(runner), jobs.made, tmp_path / "here")
        assert here["pid"] == os.getpid()
        assert prefetch.result(_request(runner), jobs.slow, tmp_path / "slow") != os.getpid()
        deadline = time.monotonic() + 300
        while runner.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert runner.proc.returncode == 0
        assert not (runner.folder / "prefetch_jobs_probe.made.done.json").exists()
        assert (runner.folder / "prefetch_jobs_probe.made.claim").read_text() == "pytest"
    finally:
        runner.stop()


def test_a_runner_that_dies_fails_the_fixture_waiting_on_it(jobs, tmp_path):
    runner = _started(["prefetch_jobs_probe.slow"])
    try:
        runner.proc.kill()
        with pytest.raises(prefetch.JobFailed, match="the background runner ended"):
            prefetch.result(_request(runner), jobs.slow, tmp_path)
    finally:
        runner.stop()


def test_the_suites_jobs_are_declared_by_the_modules_that_use_them():
    """Each job the suite declares names a fixture of its own module (else the runner would never start it)."""
    import ast

    tests = Path(prefetch.__file__).parent
    declared = {}
    for file in tests.rglob("test_*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.FunctionDef):
                for dec in node.decorator_list:
                    if isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "background":
                        declared[(file.name, node.name)] = dec.args[0].value
    assert len(declared) == 5, declared
    for (file, func), fixture in declared.items():
        source = next(tests.rglob(file)).read_text()
        assert f"def {fixture}(" in source and f"prefetch.result(request, {func}," in source, (file, func)

"""Shared fixtures: where the repo, the test files and the reference data are.

Generic on purpose; add your own fixtures below, one per need.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import sys
from pathlib import Path

import pytest

# The costly setups that need nothing else start in a background runner once the session is collected
# (tests/prefetch.py: the walk over every decoder, the live vLLM engines, the browser's learner Python); under
# `make test` three workers run the lanes of tests, each a kind, side by side (tests/lanes.py).
pytest_plugins = ("prefetch", "lanes")

REPO_ROOT = Path(__file__).resolve().parents[1]
# No test goes online: a --model ORG/NAME (a Hub id, course_lib/model/hub.py) drawn by a fuzzer or typed in a test reads
# the Hub cache only; the tests of the online path (test_hub_ids.py) lift it for themselves, with the network
# answered locally.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
FILES_DIR = Path(__file__).resolve().parent / "files"

# The published facts (HF configs + expected.json). In the course workspace the repo is
# /work/main and the facts are /work/shared/reference; in CI the repo is cloned elsewhere
# with shared/ copied beside it. tests/files/reference/ holds a copy so the tests that
# need the facts run (never skip) when shared/ is absent.
SHARED_REFERENCE_MODELS = REPO_ROOT.parent / "shared" / "reference" / "models"
COPIED_REFERENCE_MODELS = FILES_DIR / "reference"


def find_reference_models_dir() -> Path:
    for candidate in (SHARED_REFERENCE_MODELS, COPIED_REFERENCE_MODELS):
        if (candidate / "expected.json").is_file():
            return candidate
    raise FileNotFoundError(
        f"no reference data: neither {SHARED_REFERENCE_MODELS} nor {COPIED_REFERENCE_MODELS} has expected.json"
    )


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root (the folder holding course_lib/)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def files_dir() -> Path:
    """tests/files/: fixture configs and other test inputs."""
    return FILES_DIR


@pytest.fixture(scope="session")
def reference_models_dir() -> Path:
    """Folder with the published HF configs and expected.json (shared/, else the copy)."""
    return find_reference_models_dir()


def load_reference_models() -> list[dict]:
    """expected.json's entries, each with ``config_path`` (a Path) added."""
    folder = find_reference_models_dir()
    entries = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    return [dict(e, config_path=folder / e["config"]) for e in entries]


@pytest.fixture(scope="session")
def reference_models() -> list[dict]:
    """All of expected.json's entries (see :func:`load_reference_models`)."""
    return load_reference_models()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes ``reference_model`` runs once per entry of expected.json."""
    if "reference_model" in metafunc.fixturenames:
        entries = load_reference_models()
        metafunc.parametrize("reference_model", entries, ids=[e["model"] for e in entries])


@pytest.fixture(scope="session")
def python_env() -> dict[str, str]:
    """os.environ for a child Python: the repo importable, no stray PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.pop("PYTHONSTARTUP", None)
    return env


@pytest.fixture(scope="session")
def python_exe() -> str:
    """The interpreter running the tests (the venv's python under .venv/bin/pytest)."""
    return sys.executable


#: How long a test's subprocess may run before the test calls it hung. A guard against a hang, never a speed check
#: (speed targets live in benchmarks/): long, because ``make test`` runs three lanes on two cores, and the grader's
#: lane fills both at times on purpose (its CPU hogs), so a process that needs 2 s of CPU may wait a minute for it.
HANG_S = 300


class Hang(Exception):
    """Code under :func:`guarded` ran past its time: some bound lets the work grow too far."""


@contextlib.contextmanager
def guarded(seconds: float, extra_bytes: int, *, wall: float | None = None):
    """Fail the code inside that spends more than ``seconds`` of CPU time (Hang), waits more than ``wall`` seconds
    (Hang; five times ``seconds`` unless given), or grows the address space by more than ``extra_bytes``
    (MemoryError), instead of letting it hang or swap the machine. Main thread only.

    The bound on work is CPU time (``ITIMER_PROF``: this process's user and system time, every thread), so a test
    that waits its turn on a busy machine (``make test`` runs three lanes on two cores, setitimer(2)) is not failed
    for a bound it keeps; the wall-clock bound catches a wait that never ends (a FIFO nobody writes).

    >>> with guarded(1, 2**28):
    ...     sum(range(1000))
    499500
    """
    def alarm(signum, frame):
        what = f"{seconds} s of CPU time" if signum == signal.SIGPROF else f"{wall} s of wall-clock time"
        raise Hang(f"ran past {what}: a bound lets the work grow too far")

    wall = 5 * seconds if wall is None else wall
    with open("/proc/self/statm") as fh:
        held = int(fh.read().split()[0]) * resource.getpagesize()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = held + extra_bytes if hard == resource.RLIM_INFINITY else min(held + extra_bytes, hard)
    previous = {sig: signal.signal(sig, alarm) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, wall)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@pytest.fixture(scope="session")
def resource_guard():
    """:func:`guarded`: ``with resource_guard(seconds, extra_bytes): ...`` fails a hang or a memory blow-up."""
    return guarded


@pytest.fixture(scope="session")
def example_class_local(tmp_path_factory):
    """The committed example class (examples/submissions) graded once per session by local worker
    processes, default settings: the grades the Dask and Gradescope graders must reproduce.
    Returns (BatchResult, RESULTS_DIR)."""
    from autograder.batch.autograde import main as autograde

    example_class = REPO_ROOT / "examples" / "submissions"
    results = tmp_path_factory.mktemp("example-class-local") / "results"
    batch = autograde(example_class, out=results, workers=2, progress=False)
    students = {p.name for p in example_class.iterdir() if p.is_dir()}
    assert set(batch.students) == students and all(r.status == "graded" for r in batch.students.values()), \
        batch.counts()
    return batch, results

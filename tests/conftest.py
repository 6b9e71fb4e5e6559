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


class Hang(Exception):
    """Code under :func:`guarded` ran past its time: some bound lets the work grow too far."""


@contextlib.contextmanager
def guarded(seconds: float, extra_bytes: int):
    """Fail the code inside that runs past ``seconds`` (Hang) or grows the address space by more than
    ``extra_bytes`` (MemoryError), instead of letting it hang or swap the machine. Main thread only."""
    def alarm(signum, frame):
        raise Hang(f"ran past {seconds} s: a bound lets the work grow too far")

    with open("/proc/self/statm") as fh:
        held = int(fh.read().split()[0]) * resource.getpagesize()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = held + extra_bytes if hard == resource.RLIM_INFINITY else min(held + extra_bytes, hard)
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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


#: Session fixtures that cost tens of seconds and serve several files: under ``pytest -n 2`` (pytest-xdist,
#: ``--dist loadgroup``) every file that uses one runs in the same worker, so it is built once, not once per worker.
SHARED_SESSION_FIXTURES = ("example_class_local",)

#: The costliest units of work, by file name, costliest first (``--durations`` of a whole run, 2 cores): a worker
#: takes these before the many short files, so the two workers end together. A stale order costs time, never a result.
COSTLIEST_FIRST = (
    "test_notebook.py", "test_distributed.py", "test_hardening.py", "test_browser.py", "test_exchange.py",
    "test_real_courses.py", "test_every_decoder.py", "test_autograde.py", "test_execute.py",
    "test_vllm_scheduler_oracle.py", "test_course_shapes.py", "test_formgrader_hostile.py", "test_nbgrader_example.py",
    "test_vllm_oracle.py", "test_sandbox_hostile.py", "test_clock.py", "test_formgrader.py", "test_second_lesson.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test file is one unit of work for pytest-xdist (its module fixtures are built once), the files that
    share a costly session fixture are one unit together (:data:`SHARED_SESSION_FIXTURES`), and the costliest units
    come first (:data:`COSTLIEST_FIRST`; ``make test`` passes ``--no-loadscope-reorder`` to keep this order). Within
    a file the order stays as written."""
    group_of_file: dict[str, str] = {}
    for item in items:
        for name in SHARED_SESSION_FIXTURES:
            if name in getattr(item, "fixturenames", ()):
                group_of_file.setdefault(item.nodeid.split("::")[0], name)

    def group(item: pytest.Item) -> str:
        path = item.nodeid.split("::")[0]
        return group_of_file.get(path, path)

    def cost_rank(name: str) -> int:
        files = [p.rsplit("/", 1)[-1] for p, g in group_of_file.items() if g == name] or [name.rsplit("/", 1)[-1]]
        ranks = [COSTLIEST_FIRST.index(f) for f in files if f in COSTLIEST_FIRST]
        return min(ranks, default=len(COSTLIEST_FIRST))

    first_seen = {}
    for item in items:
        first_seen.setdefault(group(item), len(first_seen))
    rank = {g: (cost_rank(g), seen) for g, seen in first_seen.items()}
    items.sort(key=lambda item: rank[group(item)])      # stable: a file keeps its own order
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group(item)))

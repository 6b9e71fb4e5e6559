"""tests/lanes.py: the lanes, the plans that give each worker its lanes, and this worker's own lanes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import lanes

TESTS = Path(__file__).resolve().parent


def test_each_test_file_has_the_lane_of_its_kind():
    def at(*parts):
        return lanes.lane(SimpleNamespace(fspath=TESTS.joinpath(*parts)))

    assert at("autograder", "test_hardening.py") == at("autograder", "test_real_courses.py") == lanes.CLASSES
    assert at("autograder", "test_execute.py") == at("autograder", "test_lane.py") == lanes.GRADER
    assert at("lesson", "test_notebook.py") == at("lesson", "test_lesson_lane.py") == lanes.LESSON
    assert at("lesson", "test_browser.py") == lanes.BROWSER
    assert at("course_lib", "model", "test_every_decoder.py") == at("test_docs.py") == lanes.LIBRARY
    assert at("..", "benchmarks", "x.py") == lanes.LIBRARY
    # the scheduler's side: the path part of a node id under tests/
    assert lanes.lane_of("autograder/test_gradescope.py") == lanes.CLASSES
    assert lanes.lane_of("course_lib/cli/test_cli.py") == lanes.lane_of("test_docs.py") == lanes.LIBRARY


def test_every_whole_class_file_exists():
    """A file renamed away from :data:`lanes.CLASSES_FILES` would silently move to the grader's lane."""
    assert {p.name for p in (TESTS / "autograder").glob("test_*.py")} >= lanes.CLASSES_FILES


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_every_plan_gives_each_lane_to_one_worker(workers):
    plan = lanes.units(workers)
    flat = [name for unit in plan for name in unit]
    assert sorted(flat) == sorted(lanes.LANES)
    assert len(plan) == (workers if workers in lanes.PLANS else len(lanes.LANES))
    for name in lanes.LANES:
        assert name in lanes.unit_of(name, workers)


def test_this_worker_ran_only_its_units_lanes(request):
    """Under xdist: the library's worker has run no test of another unit, and is in a session of its own (the failure
    when xdist's own groups broke: both workers took tests of every lane)."""
    lanes.check_this_worker(request.config, lanes.LIBRARY)


def test_a_pytest_without_xdist_still_runs_the_suite(tmp_path):
    """The scheduler is a hook of xdist's; declared optional, so a pytest without xdist loads tests/lanes.py."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                           f"--basetemp={tmp_path / 'inner'}", str(TESTS / "test_lanes.py"),
                           "-k", "of_its_kind"], capture_output=True, text=True, timeout=300,
                          cwd=TESTS.parent)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout

"""tests/lanes.py: under ``make test`` the library's tests run in a worker of their own, at nice 10."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import lanes

TESTS = Path(__file__).resolve().parent


def test_the_grader_and_the_lesson_are_a_lane_each_and_everything_else_the_library():
    def at(*parts):
        return lanes.lane(SimpleNamespace(fspath=TESTS.joinpath(*parts)))

    assert at("autograder", "test_hardening.py") == lanes.GRADER
    assert at("lesson", "test_browser.py") == lanes.LESSON
    assert at("course_lib", "model", "test_every_decoder.py") == at("test_docs.py") == lanes.LIBRARY
    assert at("..", "benchmarks", "x.py") == lanes.LIBRARY
    # the scheduler's side: the path part of a node id under tests/
    assert (lanes.lane_of("autograder/test_x.py"), lanes.lane_of("lesson/test_y.py")) == (lanes.GRADER, lanes.LESSON)
    assert lanes.lane_of("course_lib/cli/test_cli.py") == lanes.lane_of("test_docs.py") == lanes.LIBRARY


def test_this_lane_runs_at_its_priority(request):
    """Run by the library's worker under xdist: its process and its session at nice 10; alone, untouched."""
    autogroup = Path("/proc/self/autogroup")
    if hasattr(request.config, "workerinput"):
        assert os.nice(0) == lanes.LIBRARY_NICE
        if autogroup.exists():
            assert autogroup.read_text().split()[-1] == str(lanes.LIBRARY_NICE)
            assert os.getsid(0) == os.getpid()          # a session of its own: its nice is its own
    else:
        assert not lanes._lowered



def test_a_pytest_without_xdist_still_runs_the_suite(tmp_path):
    """The scheduler is a hook of xdist's; declared optional, so a pytest without xdist loads tests/lanes.py."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                           f"--basetemp={tmp_path / 'inner'}", str(TESTS / "test_lanes.py"),
                           "-k", "grader_and_the_lesson"], capture_output=True, text=True, timeout=300,
                          cwd=TESTS.parent)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout

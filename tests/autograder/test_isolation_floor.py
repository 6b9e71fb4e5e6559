"""No isolation, no grading: below the minimum (namespaces, a throwaway uid that can run the kernel's
Python, a memory and pids cap) every verb that grades refuses in one line saying what is missing and how
to get it, unless the instructor passes --insecure; a Gradescope bundle never grades below it."""

from __future__ import annotations

import dataclasses
import shutil
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "files" / "autograder"))
import hostile  # noqa: E402
FULL_SCORE = 5 + hostile.LAB_POINTS  # the fixture notebook's 5 points and the lab check's

from autograder.batch import autograde as autograde_module  # noqa: E402
from autograder import cli  # noqa: E402
from autograder.errors import AutograderError  # noqa: E402
from autograder.sandbox import CgroupVersion, Isolation, Network, probe, require_minimum  # noqa: E402
from autograder.sandbox.isolation import HOW  # noqa: E402

FULL = Isolation(bubblewrap=True, cgroup=CgroupVersion.V2, drop_uid=True, network=Network.BUBBLEWRAP)


@pytest.mark.parametrize("lacks, field, value", [
    ("namespaces", "bubblewrap", False),
    ("uid", "drop_uid", False),
    ("cgroup", "cgroup", None),
])
def test_each_missing_piece_is_named_with_how_to_get_it(lacks, field, value):
    weak = dataclasses.replace(FULL, **{field: value})
    assert weak.missing() == (HOW[lacks],)
    with pytest.raises(AutograderError) as info:
        require_minimum(weak)
    line = str(info.value)
    assert "\n" not in line and HOW[lacks] in line and "--insecure" in line
    require_minimum(weak, insecure=True)   # asked for: no refusal
    assert "BELOW THE MINIMUM" in weak.summary() and "BELOW" not in FULL.summary()


def test_this_machine_is_above_the_minimum():
    # the suite runs where grading is allowed (make test installs bubblewrap, runs as root with cgroups)
    assert probe().missing() == (), probe().warnings


def _weak(monkeypatch):
    """This machine as one without bubblewrap (the probe finds no bwrap on PATH)."""
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "bwrap" else real_which(name, *a, **k))
    probe.cache_clear()


@pytest.fixture
def without_bubblewrap(monkeypatch):
    _weak(monkeypatch)
    yield
    monkeypatch.undo()
    probe.cache_clear()


def test_autograde_refuses_below_the_minimum_and_writes_nothing(tmp_path, without_bubblewrap):
    (tmp_path / "sub").mkdir()
    with pytest.raises(AutograderError, match="cannot isolate learner code, so nothing is graded; it lacks namespaces"):
        autograde_module.main(tmp_path / "sub", out=tmp_path / "r", assignment=hostile.assignment())
    assert not (tmp_path / "r").exists(), "nothing is written: not even the results folder"


def test_the_cli_says_it_in_one_line_and_exits_2(tmp_path, capsys, without_bubblewrap):
    (tmp_path / "sub").mkdir()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        assert cli.main(["autograde", str(tmp_path / "sub"), "--out", str(tmp_path / "r")]) == 2
    finally:
        signal.signal(signal.SIGTERM, previous)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "apt-get install bubblewrap" in err and "--insecure" in err, err


@pytest.mark.slow
def test_insecure_grades_anyway_and_says_so(tmp_path, without_bubblewrap):
    submitted = tmp_path / "submitted"
    folder = submitted / "amy" / hostile.ASSIGNMENT
    folder.mkdir(parents=True)
    import nbformat
    nbformat.write(hostile.learner_notebook(), folder / hostile.NOTEBOOK)
    (folder / hostile.LAB.name).write_text(hostile.lab_text(16))
    batch = autograde_module.main(submitted, out=tmp_path / "r", workers=1, progress=False,
                                  assignment=hostile.assignment(), insecure=True)
    amy = batch.students["amy"]
    assert (amy.status, amy.score) == ("graded", FULL_SCORE), amy.message
    assert batch.isolation.startswith("no bubblewrap") and "BELOW THE MINIMUM (--insecure)" in batch.isolation
    assert any("apt-get install bubblewrap" in w for w in batch.warnings)

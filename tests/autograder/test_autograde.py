"""Batch behaviour of ``autograde``: re-grading, resuming after SIGKILL/SIGINT, bad options, and
that parallel workers merge into one gradebook. Uses the small fixture notebook (about 1 s each).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "files" / "autograder"))
import hostile  # noqa: E402
FULL = 5 + hostile.LAB_POINTS  # the fixture notebook's 5 points and the lab check's

from autograder.batch.autograde import main as autograde  # noqa: E402
from autograder.errors import AutograderError  # noqa: E402

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
FIXTURE = hostile.assignment()


def _hand_in(submitted: Path, sid: str, nb=None, raw: bytes | None = None, lab: int = 16) -> None:
    folder = submitted / sid / hostile.ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    if raw is not None:
        (folder / hostile.NOTEBOOK).write_bytes(raw)
    else:
        nbformat.write(nb if nb is not None else hostile.learner_notebook(), folder / hostile.NOTEBOOK)
    (folder / hostile.LAB.name).write_text(hostile.lab_text(lab))


def _grade(submitted, results, **kw):
    return autograde(submitted, out=results, workers=2, cell_timeout=20, notebook_timeout=60, progress=False,
                     assignment=FIXTURE, **kw)


def _gradebook_scores(results: Path) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(results / "gradebook.db")) as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(hostile.ASSIGNMENT)}


def test_regrade_never_keeps_a_stale_score(tmp_path):
    submitted, results = tmp_path / "submitted", tmp_path / "results"
    _hand_in(submitted, "alice")
    _hand_in(submitted, "bob")
    first = _grade(submitted, results)
    assert first.students["alice"].score == FULL and _gradebook_scores(results)["alice"] == FULL
    assert not (results / ".hand-ins").exists()   # the batch's staged copies of the hand-ins: removed at its end

    # Unchanged submissions are kept as they were (and say so); nothing is graded twice.
    again = _grade(submitted, results)
    assert sorted(again.reused) == ["alice", "bob"] and again.students["alice"].score == FULL

    # A manual score from formgrader survives an unchanged re-run...
    from nbgrader.api import Gradebook
    with Gradebook("sqlite:///" + str(results / "gradebook.db")) as gb:
        gb.find_grade("explain_budget", hostile.ASSIGNMENT, hostile.ASSIGNMENT, "alice").manual_score = 2.0
        gb.db.commit()
    _grade(submitted, results)
    assert _gradebook_scores(results)["alice"] == FULL + 2.0

    # ...but alice hands in a wrong answer and one that kills its kernel: no earlier point survives.
    changed = hostile.set_answer(hostile.set_answer(hostile.learner_notebook(), "kv_per_token", hostile.WRONG_KV),
                                 "weights", "import os; os._exit(1)")
    _hand_in(submitted, "alice", nb=changed)
    died = _grade(submitted, results)
    alice = died.students["alice"]
    assert (alice.status, alice.score) == ("kernel_died", 2 + hostile.LAB_POINTS)  # test_max_sequences (2), the lab
    assert _gradebook_scores(results)["alice"] == 2 + hostile.LAB_POINTS, "no stale auto or manual score"
    assert died.reused == ["bob"]

    # A corrupt hand-in: no submission in the gradebook, no stale feedback or notebook on disk.
    _hand_in(submitted, "alice", raw=b"\x00not a notebook")
    bad = _grade(submitted, results)
    assert (bad.students["alice"].status, bad.students["alice"].score) == ("invalid_submission", 0.0)
    assert "alice" not in _gradebook_scores(results)
    assert not (results / "autograded" / "alice").joinpath(hostile.ASSIGNMENT, hostile.NOTEBOOK).exists()
    grades = json.loads((results / "grades.json").read_text())
    assert grades["students"]["alice"]["status"] == "invalid_submission"

    # bob leaves the class: his files and gradebook entry go too.
    shutil.rmtree(submitted / "bob")
    gone = _grade(submitted, results)
    assert set(gone.students) == {"alice"} and "bob" not in _gradebook_scores(results)
    assert not (results / "records" / "bob.json").exists()


def _sandbox_processes() -> list[int]:
    """Learner processes of this checkout that outlived their grader (tests/sandbox_support.py)."""
    from sandbox_support import leftover_sandbox_processes

    return leftover_sandbox_processes()


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_interrupted_batch_resumes_with_nothing_lost_or_duplicated(tmp_path, how):
    submitted, results = tmp_path / "submitted", tmp_path / "results"
    # 1 s a hand-in (it was 2 s) keeps kernels at work when the signal comes, which is 0.2 s
    # after the first record, with 2 workers: at most 2 are done then and at least 2 not started.
    slow = hostile.insert_after(hostile.learner_notebook(), "test_kv_per_token", "import time; time.sleep(1)")
    students = [f"s{i}" for i in range(6)]
    for sid in students:
        _hand_in(submitted, sid, nb=slow)
    # Ctrl-C as a terminal delivers it: a suite started in the background by a shell without job control
    # (``make test &``, nohup) passes SIGINT down as ignored, and Python then installs no handler at all, so the
    # grader would (rightly) go on to the end. That was the "flaky" SIGINT case: it failed only under nohup.
    script = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
              "from autograder.batch.autograde import main; " + hostile.ASSIGNMENT_CODE +
              f"main({str(submitted)!r}, out={str(results)!r}, workers=2, progress=False, cell_timeout=20, notebook_timeout=60, "
              f"assignment=fixture)")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not list(results.glob("records/*.json")):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.2)
    proc.send_signal(how)
    proc.wait(timeout=60)
    time.sleep(2)
    if how == signal.SIGINT:  # the grader sweeps up after itself; after SIGKILL the next run does
        assert _sandbox_processes() == [], "kernels outlived the interrupted grader"
    done_before = {p.stem for p in (results / "records").glob("*.json")}
    assert 0 < len(done_before) < len(students), {p.stem: json.loads(p.read_text())["status"]
                                                  for p in (results / "records").glob("*.json")}

    batch = _grade(submitted, results)
    assert set(batch.students) == set(students) and set(batch.reused) >= done_before
    assert all(r.status == "graded" and r.score == FULL for r in batch.students.values())
    rows = (results / "grades.csv").read_text().splitlines()[1:]
    assert sorted(r.split(",")[0] for r in rows) == students, "each student exactly once"
    assert _gradebook_scores(results) == {sid: FULL for sid in students}
    dead = [d for d in Path("/tmp").glob("cg-*-*") if d.name.split("-")[-2].isdigit()
            and not psutil.pid_exists(int(d.name.split("-")[-2]))]
    assert dead == [], "scratch folders of killed workers are swept"
    assert _sandbox_processes() == [], "no kernel of the killed grader is left"


def test_results_reach_the_gradebook_while_the_batch_still_grades(tmp_path):
    """The merge is not a serial step after the last notebook: a student graded early is in the
    gradebook while a slow one still runs (then both are, once, with their scores)."""
    submitted, results = tmp_path / "submitted", tmp_path / "results"
    _hand_in(submitted, "fast")
    _hand_in(submitted, "slow", nb=hostile.insert_after(hostile.learner_notebook(), "test_kv_per_token",
                                                        "import time; time.sleep(8)"))
    script = ("from autograder.batch.autograde import main; " + hostile.ASSIGNMENT_CODE +
              f"main({str(submitted)!r}, out={str(results)!r}, workers=2, progress=False, cell_timeout=20, "
              f"notebook_timeout=60, assignment=fixture)")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen_early, deadline = None, time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if (results / "gradebook.db").is_file() and not (results / "records" / "slow.json").exists():
            try:
                seen_early = _gradebook_scores(results)
            except Exception:  # noqa: BLE001 - the writer may hold the database for a moment
                seen_early = None
            if seen_early and seen_early.get("fast") == FULL:   # (nbgrader commits a submission, then its grades)
                break
        time.sleep(0.1)
    assert proc.wait(timeout=120) == 0, proc.communicate()[1][-2000:]
    assert seen_early == {"fast": FULL}, "the fast student was merged before the slow one finished"
    assert _gradebook_scores(results) == {"fast": FULL, "slow": FULL}


def test_parallel_workers_each_grade_in_their_own_sandbox(tmp_path):
    submitted, results = tmp_path / "submitted", tmp_path / "results"
    probe_cell = "import os; print('WHERE', os.getcwd(), os.getuid())"
    for sid in ("a", "b", "c", "d"):
        _hand_in(submitted, sid, nb=hostile.insert_after(hostile.learner_notebook(), "intro", probe_cell))
    batch = _grade(submitted, results)
    assert all(r.score == FULL for r in batch.students.values())
    seen = set()
    for sid in batch.students:
        nb = nbformat.read(results / "autograded" / sid / hostile.ASSIGNMENT / hostile.NOTEBOOK, as_version=4)
        text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
        seen.add(text.split("WHERE ")[1].split()[0])
    assert len(seen) == 4, "every submission ran in a scratch folder of its own"


def test_bad_input_is_one_clear_error(tmp_path):
    with pytest.raises(AutograderError, match="not a folder"):
        autograde(tmp_path / "nope", out=tmp_path / "r", assignment=FIXTURE)
    (tmp_path / "sub").mkdir()
    with pytest.raises(AutograderError, match="size"):
        autograde(tmp_path / "sub", out=tmp_path / "r", memory_limit="lots", assignment=FIXTURE)
    with pytest.raises(AutograderError, match="no trusted check"):   # the fixture notebook with L14.4's checks
        autograde(tmp_path / "sub", out=tmp_path / "r", assignment=hostile.assignment(lesson="lessons.l14_04"))


@pytest.mark.parametrize("args, why", [
    (["--cell-timeout", "nan"], "--cell-timeout=nan is not a finite number"),
    (["--cell-timeout", "0"], "--cell-timeout=0 is below the bound 0"),
    (["--notebook-timeout", "nan"], "--notebook-timeout=nan is not a finite number"),
    (["--notebook-timeout", "inf"], "--notebook-timeout=inf is not a finite number"),
    (["--workers", "0"], "--workers=0 is below the bound 1"),
    (["--memory-limit", "infG"], "--memory-limit='infG' is not a finite size"),
    (["--memory-limit", "1e400G"], "'G' alone is ambiguous"),
    (["--memory-limit", "1K"], "'K' alone is ambiguous"),
    (["--disk-limit", "1MB"], "--disk-limit='1MB' is 1.00 MB"),
    (["--out", "/etc/passwd"], "--out /etc/passwd exists and is not a folder"),
    (["--out", "/tmp/results?2"], "--out /tmp/results?2 has a '?' in its path"),
    (["--out", "/tmp/results%202"], "--out /tmp/results%202 has a '%' in its path, which nbgrader's gradebook URL reads as an escape"),
])
def test_bad_options_exit_2_with_one_line(tmp_path, capsys, args, why):
    from autograder import cli

    (tmp_path / "sub").mkdir()
    argv = ["autograde", str(tmp_path / "sub"), "--out", str(tmp_path / "r")] + args
    previous = signal.getsignal(signal.SIGTERM)
    try:
        assert cli.main(argv) == 2
    finally:
        signal.signal(signal.SIGTERM, previous)
    err = capsys.readouterr().err
    assert why in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "r" / "batch.json").exists()


@pytest.mark.parametrize("out", ["/etc/passwd", "/tmp/results?2", "/tmp/results%202"])
def test_a_bad_out_is_refused_before_any_process_starts(tmp_path, monkeypatch, out):
    """A typo in --out was refused only after the fork server (0.7 s of CPU of imports), the notebooks' import
    check and the isolation probe had started; now with the other options."""
    from autograder.batch import autograde as batch

    def started(what):
        def start(*args, **kwargs):
            raise AssertionError(f"the {what} started before --out {out} was refused")
        return start
    monkeypatch.setattr(batch, "fork_server_early", started("fork server"))
    monkeypatch.setattr(batch, "check_imports", started("import check"))
    monkeypatch.setattr(batch, "probe", started("isolation probe"))
    (tmp_path / "sub" / "alice" / hostile.ASSIGNMENT).mkdir(parents=True)
    with pytest.raises(AutograderError, match=f"--out {re.escape(out)} "):
        autograde(tmp_path / "sub", out=out, assignment=FIXTURE)


def test_one_batch_per_results_dir(tmp_path):
    from autograder.batch.autograde import _lock
    (tmp_path / "sub").mkdir()
    (tmp_path / "r").mkdir()
    held = _lock(tmp_path / "r")
    try:
        with pytest.raises(AutograderError, match="another course-grade autograde"):
            autograde(tmp_path / "sub", out=tmp_path / "r", assignment=FIXTURE)
    finally:
        held.close()


def test_cli_exit_status(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "autograder", *a], cwd=REPO, capture_output=True, text=True)
    proc = run("autograde", str(tmp_path / "missing"), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "not a folder" in proc.stderr
    proc = run("--help")
    assert proc.returncode == 0 and "autograde" in proc.stdout
    script = Path(sys.executable).with_name("course-grade")   # the console script pip installed
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "autograde" in proc.stdout
    # the console script ends with os._exit: its status and its last line still come out
    proc = subprocess.run([str(script), "autograde", str(tmp_path / "missing"), "--out", str(tmp_path / "r")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip().endswith("<student_id>/<assignment>/ folders"), proc.stderr

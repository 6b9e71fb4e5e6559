"""Hardening: every hostile case in tests/files/autograder/hostile.py gets its status and score.

One batch grades the whole crafted class once (module fixture, ~1 minute on 2 cores); each test
reads its case from the results. The fixture notebook is small (no torch), so the time goes to
the cases themselves (a 5 s cell timeout, a 12 s notebook timeout, a 512 MiB memory cap).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "files" / "autograder"))
import hostile  # noqa: E402

from autograder.assignment import Assignment  # noqa: E402
from autograder.autograde import main as autograde  # noqa: E402
from autograder.collect import ANSWER_MIME  # noqa: E402
from autograder.sandbox import Limits, probe  # noqa: E402

pytestmark = pytest.mark.slow
CASES = {c.student_id: c for c in hostile.CASES}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    # Instructor files and results live in tmp: a failed isolation test must not damage the repo.
    notebook = root / "instructor" / "fixture.ipynb"
    notebook.parent.mkdir()
    shutil.copy(hostile.FIXTURE, notebook)
    assignment = Assignment(notebook=notebook, checks=str(hostile.FIXTURE_CHECKS))
    submitted, results = root / "submitted", root / "results"
    results.mkdir()
    (results / "grades.json").write_text("{}")

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    threading.Thread(target=lambda: [server.accept()[0].close() for _ in range(8)], daemon=True).start()

    targets = {"other_learner": str(submitted / "ref" / hostile.ASSIGNMENT / hostile.NOTEBOOK),
               "results": str(results / "grades.json"), "instructor": str(notebook)}
    hostile.write_class(submitted, {"port": server.getsockname()[1], "targets": targets})
    before = {name: _sha(Path(p)) for name, p in targets.items()}
    batch = autograde(submitted, out=results, workers=2, cell_timeout=5, notebook_timeout=12,
                      memory_limit="512MiB", progress=False, assignment=assignment)
    server.close()
    after = {name: _sha(Path(p)) for name, p in targets.items() if name != "results"}
    return {"batch": batch, "results": results, "before": before, "after": after, "assignment": assignment}


def _out_text(graded, sid: str) -> str:
    nb = nbformat.read(graded["results"] / "autograded" / sid / hostile.ASSIGNMENT / hostile.NOTEBOOK, as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


@pytest.mark.parametrize("sid", sorted(CASES))
def test_case_gets_its_status_score_and_question_statuses(graded, sid):
    case, r = CASES[sid], graded["batch"].students[sid]
    assert r.status == case.status, f"{sid}: {r.status} ({r.message})"
    if case.score is not None:
        assert r.score == case.score, f"{sid}: {r.score} != {case.score}: " + "; ".join(
            f"{g}={q.status} {q.message}" for g, q in r.questions.items())
    for gid, status in case.questions.items():
        assert r.questions[gid].status == status, f"{sid}/{gid}: {r.questions[gid]}"
    assert r.max_score == 8.0 and set(r.questions) == {
        "test_kv_per_token", "test_weights_bytes", "test_max_sequences",
        "lab_edit_only_active_sequences", "lab_reports_not_fit", "lab_only_kv_doubled"}
    if r.status != "graded":
        assert r.message, f"{sid}: a failure must say what happened"


def test_failures_never_look_like_a_plain_zero(graded):
    data = json.loads((graded["results"] / "grades.json").read_text())
    for sid in ("corrupt_json", "missing_notebook", "missing_folder", "symlinked_notebook"):
        entry = data["students"][sid]
        assert entry["status"] in ("invalid_submission", "missing_submission")
        assert entry["needs_manual_grading"] is False
        assert all(q["status"] == "not_run" and q["message"].startswith("not graded:")
                   for q in entry["questions"].values())
    rows = (graded["results"] / "grades.csv").read_text().splitlines()
    assert rows[0].startswith("student_id,status,score,max_score")
    assert any(r.startswith("kernel_dies,kernel_died,5.0,8.0") for r in rows)


def test_kernel_death_keeps_earlier_points_and_says_so(graded):
    r = graded["batch"].students["kernel_dies"]
    assert "kernel died" in r.message
    assert "kernel died" in r.questions["test_weights_bytes"].message
    gs = json.loads((graded["results"] / "gradescope" / "kernel_dies.json").read_text())
    assert gs["score"] == 5.0 and gs["extra_data"]["status"] == "kernel_died"


def test_memory_cap_is_enforced_by_the_os(graded):
    r = graded["batch"].students["memory_hog"]
    assert r.status == "memory_limit" and "memory" in r.message
    if probe().cgroup:  # the cgroup OOM-kills the kernel: later answers are not run
        assert r.score == 5.0 and r.questions["test_weights_bytes"].status == "not_run"
    else:  # RLIMIT_AS: the allocation fails with MemoryError, later cells still run
        assert r.score == 8.0


def test_cell_and_notebook_timeouts(graded):
    assert "5 s limit per cell" in graded["batch"].students["infinite_loop"].message
    assert "12 s time limit" in graded["batch"].students["slow_notebook"].message


def test_process_cap(graded):
    out = _out_text(graded, "fork_bomb")
    forks = int(out.split("FORKS")[1].split()[0])
    assert 0 < forks < Limits().max_processes, out[:200]


def test_no_learner_process_outlives_the_batch(graded):
    time.sleep(1)
    ours = str(Path(sys.executable).parent)   # this checkout's sandboxes, not another suite's on this machine
    leftovers = [p.info for p in psutil.process_iter(["pid", "uids", "cmdline", "environ"])
                 if p.info["uids"] and p.info["uids"].real >= 1_000_000
                 and ((p.info["cmdline"] or [""])[0].startswith(ours)
                      or (p.info["environ"] or {}).get("PATH", "").startswith(ours))]
    assert leftovers == []


def test_no_network(graded):
    out = _out_text(graded, "network")
    if probe().network == "none":
        pytest.skip("no network namespace on this machine (the grader warned about it)")
    assert "NETWORK False" in out


def test_output_is_capped(graded):
    path = graded["results"] / "autograded" / "output_flood" / hostile.ASSIGNMENT / hostile.NOTEBOOK
    assert path.stat().st_size < 3 * 2**20
    assert "output truncated" in _out_text(graded, "output_flood")


def test_submission_cannot_touch_other_files(graded):
    report = json.loads(_out_text(graded, "isolation").split("ISOLATION ")[1].splitlines()[0])
    iso = probe()
    if iso.drop_uid or iso.bubblewrap:
        assert not any(v for k, v in report.items() if k.endswith(":write")), report
    if iso.bubblewrap:
        assert not any(v for k, v in report.items() if k.endswith(":read")), report
    assert graded["after"] == {k: v for k, v in graded["before"].items() if k != "results"}


def test_edited_and_deleted_test_cells_are_restored(graded):
    notes = graded["batch"].students["tamper_edit"].notes
    assert any("test_kv_per_token was edited" in n for n in notes), notes
    notes = graded["batch"].students["tamper_delete"].notes
    assert any("test_max_sequences was deleted" in n for n in notes), notes
    nb = nbformat.read(graded["results"] / "autograded" / "tamper_delete" / hostile.ASSIGNMENT / hostile.NOTEBOOK,
                       as_version=4)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    assert ids.index("weights") < ids.index("test_weights_bytes") < ids.index("max_sequences") \
        < ids.index("test_max_sequences"), "re-inserted where the instructor's notebook has them"


def test_trusted_scoring_ignores_tricks(graded):
    students = graded["batch"].students
    assert "list of integers" in students["always_equal"].questions["test_weights_bytes"].message
    assert "conflicting" in students["conflicting_answers"].questions["test_kv_per_token"].message
    assert "another test" in students["wrong_id_answers"].questions["test_kv_per_token"].message
    assert "bonus" not in students["invented_grade_cell"].questions


def test_feedback_hides_hidden_tests_and_answers(graded):
    for sid in ("ref", "kernel_dies", "tamper_edit"):
        html = (graded["results"] / "feedback" / sid / hostile.ASSIGNMENT / "l14-04-model-memory.html").read_text()
        for secret in ("BEGIN HIDDEN TESTS", "_course_hidden", ANSWER_MIME, "327680", "4015000000"):
            assert secret not in html, f"{sid} feedback shows {secret!r}"
        assert "Autograded score" in html


def test_gradebook_matches_and_failed_submissions_have_no_stale_entry(graded):
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook("sqlite:///" + str(graded["results"] / "gradebook.db")) as gb:
        assert gb.find_submission(hostile.ASSIGNMENT, "ref").score == 8.0
        assert gb.find_submission(hostile.ASSIGNMENT, "kernel_dies").score == 5.0
        with pytest.raises(MissingEntry):
            gb.find_submission(hostile.ASSIGNMENT, "corrupt_json")


def test_grades_json_has_exactly_the_documented_shape(graded):
    data = json.loads((graded["results"] / "grades.json").read_text())
    assert set(data) == {"assignment", "students"} and data["assignment"] == hostile.ASSIGNMENT
    for entry in data["students"].values():
        assert set(entry) == {"status", "score", "max_score", "manual_max_score", "needs_manual_grading", "questions"}
        for q in entry["questions"].values():
            assert set(q) == {"score", "max_score", "status", "message"}

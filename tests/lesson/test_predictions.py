"""Predictions that count (issue 41, item 2): committed at the first reveal, graded as committed.

The reveal cells call :func:`course_lib.lessons.l14_04.predictions.commit`, which refuses to show the
answer until the prediction is made and records it beside the notebook; the grader's collector
(:func:`lessons.l14_04.collect.committed`) reads that record where the notebooks run. Here a learner
predicts, reveals, then copies the revealed answer back into the notebook: the grader grades the first
prediction and says so; a record edited by hand grades nothing; a prediction never revealed is graded as
it stands. Independent reference: the grader's own expected values (0.668 for R5's share, "less" for
R6's fp8 row), which the learner copies back.
"""

from __future__ import annotations

import json

import pytest

from autograder.contract.answers import to_plain
from course_lib.lessons.l14_04 import predictions
from course_lib.lessons.l14_04.practice import CheckFailed, policy_predict_slip
from lessons.l14_04 import collect as collect_module
from lessons.l14_04.checks import score_answer
from lessons.l14_04.collect import collect


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """An assignment's folder (the lab file beside the notebooks), the kernel's working folder."""
    (tmp_path / predictions.ASSIGNMENT_MARK).write_text("active_sequences = 8\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    return tmp_path


def _graded(grade_id, ns):
    return score_answer(grade_id, {k: to_plain(v) for k, v in collect(grade_id, ns).items()})


def test_the_reveal_waits_for_the_prediction(folder):
    with pytest.raises(CheckFailed, match="make your prediction in the cell above first: chat_unused_share must "
                                          "be a share"):
        predictions.commit("policy_predict", {"chat_unused_share": None, "chat_more_running": "paged"},
                           policy_predict_slip)
    assert not (folder / predictions.RECORD_NAME).exists()


def test_a_prediction_edited_after_its_reveal_is_graded_as_committed(folder, capsys):
    """0.30 and "reserve-max" committed; the reveal prints 66.8%; the learner then writes 0.668 and "paged"."""
    ns = {"chat_unused_share": 0.30, "chat_more_running": "reserve-max"}
    predictions.commit("policy_predict", dict(ns), policy_predict_slip)
    ns.update(chat_unused_share=0.668, chat_more_running="paged")             # copied back after the reveal
    again = predictions.commit("policy_predict", dict(ns), policy_predict_slip)  # the reveal cell run again
    assert again == {"chat_unused_share": 0.30, "chat_more_running": "reserve-max"}
    assert "the grader grades" in capsys.readouterr().out
    result = _graded("test_policy_predict", ns)
    assert not result.passed and not result.fraction, result
    assert "graded as you committed it before its reveal" in result.message, result.message


def test_a_right_prediction_changed_after_the_reveal_keeps_its_points(folder):
    ns = {"a100_predictions": {"max_num_seqs=64": "more", "max_num_batched_tokens=8192": "less",
                               "kv_cache_dtype=fp8": "less", "kv_cache_gib_at_utilization_0.20": 1.05}}
    from course_lib.lessons.l14_04.practice import log_predict_slip
    predictions.commit("log_predict", json.loads(json.dumps(ns)), log_predict_slip)
    ns["a100_predictions"]["kv_cache_dtype=fp8"] = "same"
    result = _graded("test_log_predict", ns)
    assert result.passed and "graded as you committed it" in result.message, result


def test_a_hand_edited_record_grades_nothing_and_no_record_grades_the_notebook(folder):
    ns = {"chat_unused_share": 0.30, "chat_more_running": "reserve-max"}
    predictions.commit("policy_predict", dict(ns), policy_predict_slip)
    record = json.loads((folder / predictions.RECORD_NAME).read_text())
    record["policy_predict"]["values"] = {"chat_unused_share": 0.668, "chat_more_running": "paged"}
    (folder / predictions.RECORD_NAME).write_text(json.dumps(record))
    result = _graded("test_policy_predict", ns)
    assert not result.passed and "changed by hand" in result.message, result
    (folder / predictions.RECORD_NAME).unlink()
    ns = {"chat_unused_share": 0.668, "chat_more_running": "paged"}               # never revealed
    assert _graded("test_policy_predict", ns).passed


def test_the_grader_and_the_library_compute_the_same_checksum(folder):
    values = {"predicted_weights_bytes": 122_980_352, "predicted_kv_cache_bytes": 1}
    predictions.commit("predict_measure", values, lambda v: None)
    graded, how, changed = collect_module.committed(
        {"predicted_weights_bytes": 1, "predicted_kv_cache_bytes": 1}, "predict_measure",
        ("predicted_weights_bytes", "predicted_kv_cache_bytes"))
    assert (graded, how, changed) == (values, "committed", True)


def test_while_grading_nothing_is_refused_or_written(folder, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert predictions.commit("policy_predict", {"chat_unused_share": None}, policy_predict_slip) == \
        {"chat_unused_share": None}
    assert not (folder / predictions.RECORD_NAME).exists()


def test_the_instructors_copy_in_the_repository_records_nothing(tmp_path, monkeypatch):
    """Outside an assignment's folder (no lab file beside the notebook: the repository's notebooks/level-14/)
    the reveal still waits for the prediction but writes no record."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert predictions.commit("policy_predict", {"chat_unused_share": 0.3, "chat_more_running": "paged"},
                              policy_predict_slip) == {"chat_unused_share": 0.3, "chat_more_running": "paged"}
    assert list(tmp_path.iterdir()) == []


def _reveal_cells():
    """Every reveal cell of the two built notebooks (they read their prediction with prediction(globals(), ...))."""
    import nbformat

    from tests.lesson.test_notebook import NOTEBOOKS
    return [(path.name, cell.source) for path in NOTEBOOKS for cell in nbformat.read(path, as_version=4).cells
            if cell.cell_type == "code" and "prediction(globals()" in cell.source]


def test_every_reveal_cell_refuses_in_one_line_before_its_prediction(folder):
    """Issue 41: running R5's reveal before the prediction raised a raw ``NameError: name 'chat_unused_share' is
    not defined``. Each reveal cell, run with its prediction's names undefined, refuses in one friendly line
    and records nothing."""
    from course_lib.lessons.l14_04.practice import PredictFirst

    cells = _reveal_cells()
    assert len(cells) == 4, [name for name, _ in cells]        # the first Predict, Task 4, R5, R6
    for name, source in cells:
        with pytest.raises(PredictFirst) as refused:
            exec(compile(source, name, "exec"), {})
        lines = refused.value._render_traceback_()
        assert len(lines) == 1 and lines[0].startswith("make your prediction in the cell above first: "), lines
        assert "is not set yet" in lines[0] or "are not set yet" in lines[0], lines
    assert not (folder / predictions.RECORD_NAME).exists()


def test_the_first_predict_is_committed_and_graded_as_committed(folder):
    """Issue 41: the lesson's first Predict (predict_answer, pool_kinds) was not recorded, and the next text said
    "(That answers your pool_kinds.)". Now its commit cell records it before that text, and the grader grades
    it as committed: a learner who predicted the KV cache fixed, then corrected it after reading on, keeps the
    first prediction's score (the kinds part lost: POOL_KINDS, the grader's, by the lesson's desk picture)."""
    from course_lib.lessons.l14_04.demos import commit_first_prediction
    from course_lib.lessons.l14_04.predictions import prediction

    first = {"predict_answer": "a", "pool_kinds": {"weights": "fixed", "workspace": "fixed", "reserve": "fixed",
                                                   "kv_cache": "fixed"}}
    commit_first_prediction(prediction(dict(first), "predict_answer", "pool_kinds"))
    assert json.loads((folder / predictions.RECORD_NAME).read_text())["predict"]["values"] == first
    now = dict(first, pool_kinds=dict(first["pool_kinds"], kv_cache="grows"))     # corrected after reading on
    result = _graded("test_predict", now)
    assert not result.passed and result.fraction == 0.5, result
    assert "graded as you committed it before its reveal" in result.message, result.message
    (folder / predictions.RECORD_NAME).unlink()
    assert _graded("test_predict", now).passed, "never committed: graded as it stands"

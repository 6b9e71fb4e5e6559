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
    with pytest.raises(CheckFailed, match="predict first: chat_unused_share must be a share"):
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

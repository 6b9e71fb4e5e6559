"""The lab-edit side check: AST comparison by hand-written edits, and the run-based sub-checks, run as the
engine runs them (its sandboxed runner)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.sandbox import probe
from autograder.contract.settings import Settings
from autograder.run.sidecheck import runner
from course_lib.lessons.l14_04.labfile import edit_knob, parse_output
from lessons.l14_04.lab import LabEdit, compare_lab

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "labs" / "notebooks" / "level-14" / "l14-04-model-memory.py"
RELEASED = LAB.read_text()


def _edit(old: str, new: str, text: str = RELEASED) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


EDITED = _edit("active_sequences = 8 ", "active_sequences = 16 ")


@pytest.mark.parametrize("text, only_knob, correct, phrase", [
    (EDITED, True, True, "correct"),
    (_edit("active_sequences = 8          # sequences generating at the same time",
           "active_sequences=16   # doubled, as the lab asks"), True, True, "correct"),  # layout and comments are free
    (RELEASED, True, False, "still 8"),
    (_edit("active_sequences = 8 ", "active_sequences = 32 "), True, False, "whole number 16"),
    (_edit("active_sequences = 8 ", "active_sequences = 8 * 2 "), True, False, "whole number 16"),
    (_edit("active_sequences = 8 ", "active_sequences = 16.0 "), True, False, "whole number 16"),
    (_edit("device_gb = 24 ", "device_gb = 48 ", EDITED), False, False, "changed outside active_sequences"),
    (EDITED + "\nprint('done')\n", False, False, "added code"),
    (EDITED + "\nactive_sequences = 16\n", False, False, "exactly once"),
    (EDITED.replace("if budget.fits:", "if budget.fits\n"), False, False, "does not parse"),
    # issue 39: Python's parser recursed into a RecursionError in the grader (grader_error, 0 points)
    (_edit("active_sequences = 8 ", "active_sequences = " + "1 + " * 20_000 + "1 "), False, False, "nests too deeply"),
    (_edit("active_sequences = 8 ", "active_sequences = " + "-" * 5_000 + "16 "), False, False, "nests too deeply"),
])
def test_compare_lab(text, only_knob, correct, phrase):
    got_only, got_correct, message, _ = compare_lab(RELEASED, text)
    assert (got_only, got_correct) == (only_knob, correct) and phrase in message, message


@pytest.mark.parametrize("expression", ["1 + " * 150 + "1", repr("see www.example.com " * 30)])
def test_a_long_knob_expression_is_quoted_to_200_characters(expression):
    """Issue 34: the knob's expression was quoted up to 476 characters where the README promises learner
    text cut to 200."""
    _, correct, message, _ = compare_lab(RELEASED, _edit("active_sequences = 8 ", f"active_sequences = {expression} "))
    quoted = message.split("active_sequences = ", 1)[1].split(": the lab asks")[0]
    assert not correct and len(quoted) <= 200 and quoted.endswith("…"), (len(quoted), message)


def test_edit_knob_changes_one_line():
    diff = [(a, b) for a, b in zip(RELEASED.splitlines(), edit_knob(RELEASED, 16).splitlines()) if a != b]
    assert len(diff) == 1 and diff[0][1].startswith("active_sequences = 16")


def test_parse_output_reads_the_printed_values():
    out = parse_output("parts_bytes = {'weights': 14000000000, 'kv_cache': 4294967296}\n"
                           "parts_gb = {'weights': 14.0, 'kv_cache': 4.295}\nheadroom_gb = -2.59\n"
                           "verdict: the workload does not fit: over the 24 GB device by 2.590 GB\n")
    assert out["parts_bytes"]["kv_cache"] == 4_294_967_296 and out["fits"] is False and out["headroom_gb"] == -2.59


CHECK = LabEdit(file=LAB.name)
RUN = runner(Settings(), probe())


@pytest.fixture(scope="module")
def baseline():
    return CHECK.prepare(RELEASED.encode(), RUN)


def _check(text: str | None, baseline) -> dict:
    return CHECK.score(None if text is None else text.encode(), RELEASED.encode(), baseline, RUN)


def test_baseline_is_the_lessons_figures(baseline):
    # 24 GB device: 14 + 2 + 2 GB fixed, KV 2 x 32 x 32 x 128 x 2 B x 1024 tokens x 8 = 4,294,967,296 B
    assert baseline["parts_bytes"] == {"weights": 14 * 10**9, "workspace": 2 * 10**9, "reserve": 2 * 10**9,
                                       "kv_cache": 4_294_967_296}
    assert baseline["fits"] is True


def test_reference_edit_scores_two_points(baseline):
    results = _check(EDITED, baseline)
    assert [q.score for q in results.values()] == [1.0, 0.5, 0.5]   # the edit, then its two effects


def test_edit_to_32_runs_and_fails_only_the_doubling(baseline):
    results = _check(_edit("active_sequences = 8 ", "active_sequences = 32 "), baseline)
    assert [q.status for q in results.values()] == ["failed", "passed", "failed"]
    assert "4x" in results["lab_only_kv_doubled"].message


def test_missing_lab_costs_only_lab_points(baseline):
    results = _check(None, baseline)
    assert all(q.status == "not_run" and "missing" in q.message for q in results.values())


def test_lab_that_crashes_is_reported(baseline):
    results = _check(_edit("active_sequences = 8 ", "active_sequences = -16 "), baseline)
    assert results["lab_edit_only_active_sequences"].score == 0.0
    assert results["lab_reports_not_fit"].score == 0.0

"""Every failed part of a question reaches the learner (issue 33, item 4), and a part that fails only
because an earlier one did is listed without costing twice.

Task 17's decision (3 points: the launch starts, it serves the 12 users, the reason names the lever)
with ``max_model_len`` cut to 4,096 and a reason that names no lever, worked by hand: the launch misses
the stated 8k context (1 point lost); vLLM starts it, but requests of 8,192 tokens do not fit, so it
serves none of the users, which follows from the first part (listed, not charged; the words agree with
the verdict line the learner's cell printed, issue 41 item 4); the reason says nothing about memory (1 point lost). So 1 of 3,
and three messages, each of which must reach the feedback page, grades.json, grades.csv and the
Gradescope JSON. Before: 0 of 3, and one message plus "and 2 more parts to look at".
"""

from __future__ import annotations

import csv
import io
import json
from types import SimpleNamespace

import nbformat

from autograder.contract.answers import ANSWER_MIME
from autograder.source.assignment import GradedCell
from autograder.run.execute import Execution
from autograder.publish.export import csv_text, grades_json, gradescope_json
from autograder.publish.feedback import feedback_html
from autograder.contract.results import StudentResult
from autograder.run.scoring import score_tests
from lessons.l14_04.checks import CHECKS

# The lesson's reference launch (fp8 weights and KV cache, 16 slots: 25.56x, past 12 with the 10% margin).
REFERENCE = {"weights": "fp8", "kv_cache_dtype": "fp8", "max_model_len": 8192, "max_num_seqs": 16,
             "gpu_memory_utilization": 0.92, "tensor_parallel": 1}
REASON = ("fp8 weights and an fp8 KV cache halve the weights and every request's cache, and 16 slots instead of "
          "256 shrink the sampler's profile and the CUDA graphs, so the pool holds 12 requests of 8k")
SHORT = "the users need 8k context: max_model_len of at least 8,192"      # the 4k launch's own part
FOLLOWS = "vLLM starts it, but requests of 8,192 tokens do not fit"        # follows from it (issue 41: as the verdict says)
NO_LEVER = "say what your change does to memory"                           # the reason's part


def _graded(decision: dict, reason: str) -> StudentResult:
    """One hand-in's test_decision cell, scored by the grader's own path (score_tests)."""
    cell = nbformat.v4.new_code_cell("check()", execution_count=1, outputs=[nbformat.v4.new_output(
        "display_data", data={ANSWER_MIME: {"grade_id": "test_decision",
                                            "values": {"decision": decision, "reason": reason}}})],
        metadata={"nbgrader": {"grade": True, "solution": False, "locked": True, "grade_id": "test_decision",
                               "points": 3}})
    nb = nbformat.v4.new_notebook(cells=[cell])
    test = GradedCell("test_decision", 3.0, 0, manual=False, notebook="n.ipynb", key="test_decision", checked=True)
    questions = score_tests(Execution(nb, "completed", "", None, 0.0), SimpleNamespace(tests=(test,)), CHECKS)
    q = questions["test_decision"]
    return StudentResult("amy", "graded", q.score, 3.0, 0.0, False, questions)


def test_the_reference_decision_scores_full_points():
    q = _graded(REFERENCE, REASON).questions["test_decision"]
    assert (q.score, q.status, q.parts) == (3.0, "passed", [])


def test_a_part_that_follows_from_an_earlier_one_is_listed_but_not_charged():
    q = _graded({**REFERENCE, "max_model_len": 4096}, REASON).questions["test_decision"]
    assert q.score == 2.0, q            # one slip, one point (it cost 2 of 3 before)
    assert [SHORT in q.parts[0], FOLLOWS in q.parts[1], "not charged again" in q.parts[1]] == [True] * 3


def test_every_failed_part_reaches_the_page_grades_json_the_csv_and_gradescope():
    r = _graded({**REFERENCE, "max_model_len": 4096}, "because it is better")
    q = r.questions["test_decision"]
    assert q.score == 1.0 and len(q.parts) == 3, q
    expected = (SHORT, FOLLOWS, NO_LEVER)
    assert all(e in p for e, p in zip(expected, q.parts)), q.parts
    assert "more part" not in q.message and all(e in q.message for e in expected)

    page = feedback_html(None, r)
    items = page.split('<ul class="parts">')[1].split("</ul>")[0]
    assert [e in item for e, item in zip(expected, items.split("<li>")[1:])] == [True] * 3, items

    entry = json.loads(json.dumps(grades_json("l14", {"amy": r})))["students"]["amy"]["questions"]["test_decision"]
    assert [e in p for e, p in zip(expected, entry["parts"])] == [True] * 3

    row = next(csv.DictReader(io.StringIO(csv_text({"amy": r}, {}))))
    lines = row["to_look_at"].split("\n")
    assert len(lines) == 3 and all(line.startswith("test_decision: ") for line in lines)
    assert [e in line for e, line in zip(expected, lines)] == [True] * 3

    test = gradescope_json(r, None)["tests"][0]
    listed = test["output"].split("part by part:\n")[1].split("\n")
    assert [e in line for e, line in zip(expected, listed)] == [True] * 3

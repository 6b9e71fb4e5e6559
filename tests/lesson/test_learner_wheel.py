"""The learner's wheel holds no answer (issue 41, item 3).

The wheel ``course-grade release`` ships to learners (:func:`autograder.learner.learner_env.build_wheel`) is built
and read as a learner's Python would read it: no file of the grader is in it, no module of the lesson's
learner package defines a function that computes a graded expected value or scores a graded decision
(the names the issue found, and the lever table the decision's reason is scored with), and every module
imports from the wheel alone without one. Behaviourally: the hand-in the issue describes, which called
those functions and wrote no formula (46/46 on the autograded parts before), now scores 0 on each of the
parts it handed to the library.
"""

from __future__ import annotations

import ast
import re
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.contract.answers import to_plain
from autograder.learner.learner_env import build_wheel
from lessons.l14_04.checks import score_answer
from lessons.l14_04.collect import collect

REPO = Path(__file__).resolve().parents[2]
#: What the learner's library held before issue 41: the expected-value formulas of Task 3 and Task R3, the
#: rule that scores R7's decision and the pieces of it, and the dtype table Task 2's answer is.
ANSWER_NAMES = {"kv_per_token_expected", "log_kv_expected", "decision_parts", "decision_plan", "decision_verdict",
                "reason_slip", "levers", "LEVER_WORDS", "DTYPE_BYTES"}
LESSON_PACKAGE = "course_lib/lessons/l14_04/"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("learner-wheel"))


def test_the_wheel_holds_no_grader_file(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith(LESSON_PACKAGE) for n in names), names[:20]
    assert not [n for n in names if n.startswith(("lessons/", "autograder/"))]
    # the grader's expected tables are nowhere in the learner's files
    text = "\n".join(zipfile.ZipFile(wheel).read(n).decode("utf-8", "replace") for n in names if n.endswith(".py"))
    for table in ("KV_EXPECTED", "LEFT_EXPECTED", "SAFE_EXPECTED", "PREDICT_WEIGHTS", "CHAT_UNUSED_SHARE",
                  "LOG_PREDICTIONS", "WEIGHT_EXPECTED"):
        assert table not in text, table


def test_no_module_of_the_wheel_judges_r7s_launch(wheel):
    """R7 is graded by whether the launch's concurrency clears 12 with the estimate's 10% margin (12 / 0.9 =
    13.33x; "measure it" within it): lessons/l14_04/checks.py. Before issue 41 closed, the learner's
    course_lib.views.vllm_explorer held the same rule (``LaunchPlan.assess``: served / measure it / NOT served),
    so a learner could ask the library for the graded verdict. Read from the wheel's bytes: no module defines
    a verdict of served users or the margin it is judged with."""
    archive = zipfile.ZipFile(wheel)
    found = {}
    for name in archive.namelist():
        if name.endswith(".py"):
            text = archive.read(name).decode("utf-8", "replace")
            hits = [w for w in (r"measure it\b", "NOT served", r"def assess\b", "MARGIN", "too close to promise")
                    if re.search(w, text)]
            if hits:
                found[name] = hits
    assert found == {}, found


def test_no_module_of_the_lesson_package_defines_an_answer(wheel):
    """Read from the wheel's bytes: no top-level definition or assignment of an answer's name."""
    archive = zipfile.ZipFile(wheel)
    found = {}
    for name in archive.namelist():
        if name.startswith(LESSON_PACKAGE) and name.endswith(".py"):
            tree = ast.parse(archive.read(name))
            defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                        if isinstance(t, ast.Name)}
            if defined & ANSWER_NAMES:
                found[name] = sorted(defined & ANSWER_NAMES)
    assert found == {}, found


def test_every_module_imports_from_the_wheel_alone_and_has_no_answer(wheel, tmp_path):
    """Unzipped and imported in a fresh Python whose only course_lib is the wheel's (as in a learner's venv)."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    modules = sorted(p[:-3].replace("/", ".") for p in zipfile.ZipFile(wheel).namelist()
                     if p.startswith(LESSON_PACKAGE) and p.endswith(".py") and not p.endswith("__init__.py"))
    probe = (
        "import importlib, json, sys\n"
        f"names = {sorted(ANSWER_NAMES)!r}\n"
        "out = {}\n"
        f"for m in {modules!r}:\n"
        "    mod = importlib.import_module(m)\n"
        "    out[m] = [mod.__file__, [n for n in names if hasattr(mod, n)]]\n"
        "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(found) == set(modules) and len(modules) >= 4, found
    for module, (path, answers) in found.items():
        assert path.startswith(str(site)), (module, path)
        assert answers == [], (module, answers)


# The hand-in: every graded function handed to the learner's own library, no formula written.
CHEATING_CELLS = [
    "from course_lib.lessons.l14_04 import practice",
    "def kv_bytes_per_token(config, bytes_per_value):\n"
    "    return practice.kv_per_token_expected(config, bytes_per_value)",
    "def kv_cache_bytes(config, bytes_per_value, tokens, sequences):\n"
    "    return kv_bytes_per_token(config, bytes_per_value) * tokens * sequences",
    "lab_kv_gb = kv_cache_bytes({'hidden_size': 4096, 'num_hidden_layers': 32, 'num_attention_heads': 32}, 2, "
    "1024, 8) / 10**9",
    "def kv_from_log(*terms):\n    return practice.log_kv_expected(*terms)",
    "a100_activation_and_non_torch_gib = 79.25 * 0.25 - 14.2488 - 5.01",
    # a loop over knob values until the grader's own rule accepts one
    "import itertools\n"
    "decision = next(d for w, kv, s, u in itertools.product(['checkpoint', 'fp8', 'int4'], ['auto', 'fp8'],\n"
    "                                                       [12, 16, 256], [0.92, 0.95])\n"
    "            for d in [{'weights': w, 'kv_cache_dtype': kv, 'max_model_len': 8192, 'max_num_seqs': s,\n"
    "                       'gpu_memory_utilization': u, 'tensor_parallel': 1}]\n"
    "            if practice.decision_parts(d) == (None, None))",
    "decision_reason = next(r for r in ['an fp8 KV cache and fp8 weights shrink the pools']\n"
    "                       if practice.reason_slip(r, decision) is None)",
]


def _hand_in() -> dict:
    """The cells run one by one as a grader runs a notebook (a cell that raises leaves its names undefined)."""
    ns: dict = {}
    for cell in CHEATING_CELLS:
        try:
            exec(cell, ns)                                   # noqa: S102 - the test's own hand-in
        except Exception:                                    # noqa: BLE001
            pass
    return ns


@pytest.mark.parametrize("grade_id", ["test_kv_cache", "test_decision"])
def test_the_hand_in_that_calls_the_library_scores_nothing_for_it(grade_id):
    """Before issue 41 each of these scored full marks (kv_bytes_per_token and kv_cache_bytes; the decision and
    its reason); now the library has no such function, so no part the hand-in gave to it earns a point."""
    values = {k: to_plain(v) for k, v in collect(grade_id, _hand_in()).items()}
    result = score_answer(grade_id, values)
    assert not result.passed and not result.fraction, result


def test_the_log_rule_handed_to_the_library_earns_nothing():
    """R3's function part (kv_from_log) fails; the A100 figure, worked by hand in the cell, keeps its point."""
    values = {k: to_plain(v) for k, v in collect("test_log_kv", _hand_in()).items()}
    result = score_answer("test_log_kv", values)
    assert not result.passed and result.fraction == pytest.approx(0.5), result
    assert "kv_from_log raised" in result.message, result.message

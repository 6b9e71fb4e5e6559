"""The notebook's visible checks in a real kernel: a failing one shows its message and nothing else.

(The kernel runs, ~20 s together, are marked slow: `make test` runs them, `make check` does not.)

Every visible check of ``course_lib.lessons.l14_04.practice`` is failed once, with an honest slip, in one
small nbgrader notebook; ``nbgrader validate`` (what the Validate button runs) and nbclient (what
*Run All* does) run it in a real IPython kernel. Independent references: the graded answers are the
grader's own tables (:mod:`lessons.l14_04.checks`), which the learner's output must never show; and
the source of ``practice.py`` itself, none of whose lines may appear.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from lessons.l14_04 import checks

REPO = Path(__file__).resolve().parents[2]
GB = 10**9

SETUP = "from course_lib.lessons.l14_04 import practice\nGB, GiB = 10**9, 2**30"

# (grade_id, the learner's (wrong) answer, the visible check as the notebook's test cell runs it, a phrase of
# the message that names the slip)
SLIPS = [
    ("predict", 'predict_answer = "d"', 'practice.check_letter(predict_answer, "predict_answer")', "one letter"),
    ("request_budget", "def request_budget_gb(d, w, ws, r):\n    return d - w\n"
     "def requests_that_fit(left, per):\n    return max(0, int(left // per))",
     "practice.check_request_budget(request_budget_gb, requests_that_fit)", "a budget of weights only"),
    ("request_fit_rounding", "def request_budget_gb(d, w, ws, r):\n    return d - w - ws - r\n"
     "import math\ndef requests_that_fit(left, per):\n    return max(0, math.ceil(left / per))",
     "practice.check_request_budget(request_budget_gb, requests_that_fit)", "Round down"),
    ("weight_bytes", 'BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "int8": 8, "int4": 4}\n'
     "def weight_bytes(n, dtype):\n    return n * BITS[dtype]\n"
     'llama3_weights_gb = 8_030_261_248 * 2 / GB\nllama3_weights_gib = 8_030_261_248 * 2 / GiB',
     "practice.check_weight_bytes(weight_bytes, llama3_weights_gb, llama3_weights_gib)", "bits or bytes"),
    ("gb_gib", 'B = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1, "int4": 0.5}\n'
     "def weight_bytes(n, dtype):\n    return int(n * B[dtype])\n"
     'llama3_weights_gb = weight_bytes(8_030_261_248, "fp16") / GiB\n'
     'llama3_weights_gib = weight_bytes(8_030_261_248, "fp16") / GB',
     "practice.check_weight_bytes(weight_bytes, llama3_weights_gb, llama3_weights_gib)", "swapped"),
    ("kv_per_token", "def kv_bytes_per_token(c, b):\n    h = c['num_attention_heads']\n"
     "    return int(c['num_hidden_layers'] * c.get('num_key_value_heads', h) * c.get('head_dim', "
     "c['hidden_size'] // h) * b)",
     "practice.check_kv_per_token(kv_bytes_per_token)", "besides its key"),
    ("kv_total", "def kv_bytes_per_token(c, b):\n    h = c['num_attention_heads']\n"
     "    return int(2 * c['num_hidden_layers'] * c.get('num_key_value_heads', h) * c.get('head_dim', "
     "c['hidden_size'] // h) * b)\n"
     "def kv_cache_bytes(c, b, t, s):\n    return kv_bytes_per_token(c, b) * t * s\n"
     "lab_kv_gb = kv_cache_bytes({'hidden_size': 4096, 'num_hidden_layers': 32, 'num_attention_heads': 32}, 2, "
     "1024, 8) / GiB",
     "practice.check_kv_cache_total(kv_cache_bytes, kv_bytes_per_token, lab_kv_gb)", "in GiB"),
    ("gqa_dtype", "mha_over_gqa_ratio = 1 / 4\nllama3_fp8_kv_bytes_per_token = "
     "kv_bytes_per_token({'hidden_size': 4096, 'num_hidden_layers': 32, 'num_attention_heads': 32, "
     "'num_key_value_heads': 8}, 1)",
     "practice.check_gqa_dtype(mha_over_gqa_ratio, llama3_fp8_kv_bytes_per_token, kv_bytes_per_token)", "inverted"),
    ("predict_measure", "predicted_weights_bytes = 1.5e8\npredicted_kv_cache_bytes = 3e7",
     "practice.check_predict_measure(predicted_weights_bytes, predicted_kv_cache_bytes)", "must be an int"),
    ("safe_requests", "def safe_requests(free, ws, reserve, per):\n    return free // per",
     "practice.check_safe_requests(safe_requests)", "treats free memory as capacity"),
    ("plannable", "def plannable_bytes(free, allocated, reserved, split, safety):\n"
     "    return max(0, free + reserved - allocated - safety)",
     "practice.check_plannable(plannable_bytes)", "counts the inactive split blocks"),
    ("plannable_allocated", "def plannable_bytes(free, allocated, reserved, split, safety):\n"
     "    return max(0, free + reserved - split - safety)",
     "practice.check_plannable(plannable_bytes)", "allocated bytes are not releasable"),
    ("admission", "def admission_decision(req, used, budget):\n    if req > budget:\n        return 'reject'\n"
     "    return 'admit' if used + req < budget else 'queue'",
     "practice.check_admission(admission_decision)", "lands exactly on the safe budget"),
    ("log_kv", "def kv_from_log(t, u, w, a, n, g=0.0):\n    return t - w - a - n - g",
     "practice.check_log_kv(kv_from_log)", "uses the whole device"),
    ("log_blocks", "import math\ndef gpu_blocks(kv, per, block):\n    return math.ceil(kv / (per * block))\n"
     "def max_concurrency(n, block, length):\n    return n * block / length",
     "practice.check_log_blocks(gpu_blocks, max_concurrency)", "rounds up"),
    ("decision_4k", 'decision = {"weights": "checkpoint", "kv_cache_dtype": "fp8", "max_model_len": 4096, '
     '"max_num_seqs": 16, "gpu_memory_utilization": 0.92, "tensor_parallel": 1}\n'
     'decision_reason = "an fp8 KV cache halves every request\'s cache"',
     "practice.check_decision(decision, decision_reason)", "8k context"),
    ("decision_slots", 'decision = {"weights": "fp8", "kv_cache_dtype": "fp8", "max_model_len": 8192, '
     '"max_num_seqs": 8, "gpu_memory_utilization": 0.92, "tensor_parallel": 1}\n'
     'decision_reason = "an fp8 KV cache halves every request\'s cache"',
     "practice.check_decision(decision, decision_reason)", "only 8 slots"),
]


def _graded_answers() -> list[str]:
    """Every graded expected value of the grader's tables, as a learner's output could print it."""
    values = [*checks.LEFT_EXPECTED, *checks.FIT_EXPECTED, *checks.KV_EXPECTED.values(), *checks.SAFE_EXPECTED,
              *checks.PLANNABLE_EXPECTED, checks.PREDICT_WEIGHTS, checks.PREDICT_KV, checks.PREDICT_PARAMS,
              2 * 32 * 8 * 128, 16_384, 4_294_967_296, 8_030_261_248 * 2]
    out = set()
    for v in values:
        if isinstance(v, int) and v >= 1000:            # small ints appear in any sentence; these cannot
            out |= {str(v), f"{v:,}"}
            if v % GB == 0:
                out |= {f"{v // GB} GB"}
    out |= {"4.295", "4.294", "0.5537", "0.554", "1.92", "39.56", "34.56", "0.317", "1.047", "18 + 6", "24 - 14",
            "6 / 1.5", "187,744", "187744", "65,536", "16.06", "14.96"}
    # falcon-like-mqa's 8,192 B per token is also the decision task's stated context (8,192 tokens), which its
    # messages name: the one figure that is both
    return sorted(out - {"8192", "8,192"})


def _source_lines() -> list[str]:
    """Lines of practice.py's source long enough to be recognised (its code and its comments)."""
    import course_lib.lessons.l14_04.practice as practice
    lines = Path(practice.__file__).read_text().splitlines()
    return [s.strip() for s in lines if len(s.strip()) > 30 and not s.strip().startswith(("return \"", "\"", "f\""))]


def _notebook(slips) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_code_cell(SETUP))
    for gid, answer, visible, _ in slips:
        nb.cells.append(nbformat.v4.new_code_cell(answer))
        nb.cells.append(nbformat.v4.new_code_cell(visible, metadata={"nbgrader": {
            "grade": True, "grade_id": f"test_{gid}", "locked": True, "points": 1, "schema_version": 3,
            "solution": False}}))
    return nb


def _env(**extra) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), **extra)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("NBGRADER_EXECUTION", None)
    env.update(extra)
    return env


# What the Validate button's server handler does (nbgrader/server_extensions/validate_assignment/handlers.py):
# Validator().validate(path), whose JSON the dialog shows ("error": the traceback lines as HTML).
VALIDATE = "import json, sys; from nbgrader.validator import Validator; print(json.dumps(Validator().validate(sys.argv[1])))"


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    """nbgrader's Validate result for the notebook of slips (every check cell fails): the failed cells."""
    import json
    folder = tmp_path_factory.mktemp("visible-checks")
    path = folder / "slips.ipynb"
    nbformat.write(_notebook(SLIPS), path)
    proc = subprocess.run([sys.executable, "-c", VALIDATE, str(path)], cwd=folder, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])["failed"]


@pytest.mark.slow
def test_validate_fails_every_slip_and_names_it(validated):
    assert len(validated) == len(SLIPS), [f["source"] for f in validated]
    for failed, (gid, _, visible, phrase) in zip(validated, SLIPS):
        assert failed["source"] == visible
        message = " ".join(failed["raw_error"].split())
        assert message.startswith("CheckFailed: ") and phrase in message, (gid, failed)
        assert all(len(line) <= 88 for line in failed["raw_error"].splitlines()), f"{gid}: lines a dialog shows whole"


@pytest.mark.slow
def test_validate_shows_no_source_frame_or_answer(validated):
    out = "\n".join(f["raw_error"] + "\n" + f["error"] for f in validated)
    for marker in ("course_lib/", "course_lib.", "practice.py", "File \"", "Traceback", "_require(", "raise CheckFailed",
                   "def "):
        assert marker not in out, f"{marker!r} in Validate's result:\n{out[:3000]}"
    leaked = [line for line in _source_lines() if line in out]
    assert leaked == [], leaked[:5]
    shown = [v for v in _graded_answers() if v in out]
    assert shown == [], f"graded answers in Validate's result: {shown}"


@pytest.mark.slow
def test_run_all_stops_at_a_failing_check_and_the_kernel_shows_the_message_only():
    """nbclient runs cells as Run All does: it stops at the first failing cell (an error), whose output is the
    message alone; the cells after it do not run."""
    import nbclient
    nb = _notebook(SLIPS[9:10] + SLIPS[:1])                  # safe_requests fails first
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(REPO)}})
    with pytest.raises(nbclient.exceptions.CellExecutionError):
        client.execute(env=_env())
    error = next(o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error")
    assert error.ename == "CheckFailed" and " ".join(error.traceback) == f"CheckFailed: {error.evalue}", error
    assert "treats free memory as capacity" in error.evalue
    assert nb.cells[-1].get("outputs") == [] and nb.cells[-1].get("execution_count") is None, "Run All went on"


@pytest.mark.slow
def test_a_grader_run_raises_nothing_and_passing_checks_say_so_in_one_line():
    """While a grader runs (NBGRADER_EXECUTION=autograde) the visible part never stops the cell (the hidden part
    decides); a right answer prints one line."""
    import nbclient
    right = ("right_plannable", "def plannable_bytes(free, allocated, reserved, split, safety):\n"
             "    return max(0, free + reserved - allocated - split - safety)",
             "practice.check_plannable(plannable_bytes)", "")
    graded = _notebook(SLIPS)
    nbclient.NotebookClient(graded, timeout=300, kernel_name="python3").execute(env=_env(NBGRADER_EXECUTION="autograde"))
    errors = [o for c in graded.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    nb = _notebook([right])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute(env=_env())
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    assert text == "\u2713 plannable_bytes: looks right on the visible cases; the grader tries others\n", text


@pytest.mark.parametrize("call, message", [
    (lambda p: p.check_number("39", "replica_ready_seconds", what="seconds"),
     "replica_ready_seconds must be a number of seconds"),
    (lambda p: p.check_number(-3.0, "replica_unready_seconds", low=0, what="seconds"),
     "replica_unready_seconds must be at least 0 seconds"),
    (lambda p: p.check_number(1.5, "chat_unused_share", low=0, high=1), "chat_unused_share must be at most 1"),
    (lambda p: p.check_number(12.0, "lab_first_crossing_sequences", whole=True),
     "lab_first_crossing_sequences must be an int"),
    (lambda p: p.check_choice("paged!", "chat_more_running", ("paged", "reserve-max", "same")),
     "chat_more_running must be one of 'paged', 'reserve-max', 'same'"),
    (lambda p: p.check_mapping({"weights": 1}, "lab_change_factors", ("weights", "kv_cache"), numbers=True),
     "lab_change_factors must have exactly the keys 'weights', 'kv_cache'"),
    (lambda p: p.check_mapping({"kv_cache": "big"}, "pool_kinds", ("kv_cache",), ("fixed", "grows")),
     "pool_kinds['kv_cache'] must be one of 'fixed', 'grows'"),
])
def test_single_value_checks_say_what_form_is_wrong_and_nothing_more(call, message, monkeypatch):
    """Single-value answers and predictions are the grader's: their visible part checks the form only."""
    from course_lib.lessons.l14_04 import practice
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    with pytest.raises(practice.CheckFailed) as failed:
        call(practice)
    assert str(failed.value) == message


def test_a_right_form_passes_with_one_line_and_says_the_figure_is_the_graders(monkeypatch, capsys):
    from course_lib.lessons.l14_04 import practice
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    practice.check_number(3.0, "offload_seconds_per_step", low=0, what="seconds")     # a wrong figure, right form
    assert capsys.readouterr().out == ("\u2713 offload_seconds_per_step: the right kind of answer; the grader "
                                       "checks the figure\n")


def test_the_decision_cell_never_calls_a_4k_launch_served():
    """The issue's slip: Task 17's own cell printed "12 users at 4,096 tokens: served" for a launch the grader
    scores as serving nobody. The cell now prints the estimate only (practice.show_launch): the pool and the
    concurrency for its own max_model_len, no verdict about the users (that is the grader's, issue 41)."""
    from course_lib.lessons.l14_04 import practice
    short = {"weights": "checkpoint", "kv_cache_dtype": "fp8", "max_model_len": 4096, "max_num_seqs": 16,
             "gpu_memory_utilization": 0.92, "tensor_parallel": 1}
    line = practice.show_launch(short)
    assert line.startswith("vLLM starts: KV pool") and "served" not in line and "users" not in line, line


def _visible_parts():
    """(grade_id, the visible part) of every test cell of the two built notebooks (the source after the hidden
    block build_notebook.py writes first)."""
    from lessons.l14_04 import hidden_block
    from tests.lesson.test_notebook import NOTEBOOKS
    parts = []
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
                hidden = hidden_block(meta["grade_id"], meta["points"])
                assert cell.source.startswith(hidden), meta["grade_id"]
                parts.append((meta["grade_id"], cell.source[len(hidden):]))
    return parts


def test_every_visible_check_prints_its_check_mark_when_it_passes(monkeypatch, capsys):
    """Issue 41: the lesson's my_budget check and six of the runtime lab's printed nothing when they passed
    (others print "✓ ..."). Every test cell's visible part, run on the reference answers (the grader's tests'
    hand-written REFERENCE namespaces), prints only ✓ lines, at least one."""
    import course_lib
    from course_lib.lessons.l14_04 import practice
    from tests.autograder.test_checks import REFERENCE
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    parts = _visible_parts()
    assert {grade_id for grade_id, _ in parts} == set(REFERENCE)
    for grade_id, visible in parts:
        ns = {"practice": practice, "course_lib": course_lib, "GB": GB, "GiB": 2**30, **REFERENCE[grade_id]}
        exec(compile(visible, grade_id, "exec"), ns)
        lines = capsys.readouterr().out.splitlines()
        assert lines and all(line.startswith("\u2713 ") for line in lines), (grade_id, lines)


def test_my_budget_with_the_device_from_its_name_fails_visibly_and_in_the_feedback_alike(monkeypatch):
    """Issue 41: a device taken as 80 GB (the name of "a100-80gb") instead of course_lib.gpu_bytes("a100-80gb")
    (79.25 GiB, what CUDA reports) passed the visible check silently and lost the headroom's point. Now the
    visible check names it, in the grader's words, without a figure."""
    from course_lib.lessons.l14_04 import practice
    from tests.autograder.test_checks import explain_budget, run
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    budget = explain_budget()["my_budget"]
    total = sum(p["bytes"] for p in budget["pools"].values())
    for device in (80 * GB, 80 * 2**30):
        slipped = dict(budget, headroom_bytes=device - total)
        with pytest.raises(practice.CheckFailed) as failed:
            practice.check_my_budget(slipped)
        assert "not the size in the GPU's name" in str(failed.value) and not any(ch.isdigit() for ch in
                                                                                  str(failed.value).split(":")[-1])
        graded = run("test_explain_budget", {"my_budget": slipped})
        assert not graded.passed and str(failed.value) in graded.message, graded.message


@pytest.mark.parametrize("call, words", [
    (lambda p: p.check_offload_step(10 / 31.5 * 1000), "slower than 1 GB/s"),          # milliseconds
    (lambda p: p.check_offload_step(10 / 31.5 / 8), "faster than even PCIe Gen5"),      # bits and bytes mixed
    (lambda p: p.check_replica_ready(32), "still have to be read and copied"),          # the load left out
    (lambda p: p.check_replica_ready(7.56), "less than init, graph capture and warm-up"),  # only the transfers
    (lambda p: p.check_unready(39.56, 39.56), "not at once"),                          # traffic from the start
    (lambda p: p.check_unready(44.56, 39.56), "longer than your replica_ready_seconds"),
    (lambda p: p.check_unready(5, 39.56), "the traffic starts at 5 s"),
])
def test_start_up_and_offload_checks_reason_on_the_learners_own_figures(call, words, monkeypatch):
    """Issue 41: R8a-c's visible checks checked the type only. Now each checks the reasoning on the learner's own
    figures and the task's stated inputs (R8c against the learner's own R8b), showing no figure of the answer."""
    from course_lib.lessons.l14_04 import practice
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    with pytest.raises(practice.CheckFailed, match=words) as failed:
        call(practice)
    for answer in ("0.317", "39.5", "34.5"):
        assert answer not in str(failed.value)


def test_r8c_carries_the_learners_own_r8b_on_validate_and_in_the_feedback(monkeypatch, capsys):
    """A learner whose R8b is off (say 40 s) and whose R8c is consistent with it (35 s) passes the visible check,
    and the grader carries it forward; the same slip (traffic from the start) reads the same on both."""
    from course_lib.lessons.l14_04 import practice
    from tests.autograder.test_checks import run
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    practice.check_unready(35.0, 40.0)
    assert capsys.readouterr().out.startswith("\u2713 replica_unready_seconds")
    assert run("test_unready", {"replica_unready_seconds": 35.0, "replica_ready_seconds": 40.0}).passed
    with pytest.raises(practice.CheckFailed) as failed:
        practice.check_unready(40.0, 40.0)
    assert str(failed.value) in run("test_unready", {"replica_unready_seconds": 40.0,
                                                     "replica_ready_seconds": 40.0}).message

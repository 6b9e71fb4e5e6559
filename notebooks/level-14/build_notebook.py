"""Build the L14.4 instructor notebook from the cell sources in this file.

The .ipynb is generated, committed without outputs, and checked in sync by
tests/lesson/test_notebook.py. Edit cells here, then run:

    .venv/bin/python notebooks/level-14/build_notebook.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))     # the repository root: the lesson writes the hidden tests

from lessons.l14_04 import hidden_block  # noqa: E402
NOTEBOOK = HERE / "l14-04-model-memory.ipynb"
CELLS: list = []
_ids: set = set()


def _meta(grade_id: str, *, grade: bool, solution: bool, locked: bool, points: int | None = None) -> dict:
    assert grade_id not in _ids, grade_id
    _ids.add(grade_id)
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def md(text: str, grade_id: str | None = None) -> None:
    meta = _meta(grade_id, grade=False, solution=False, locked=True) if grade_id else {}
    CELLS.append(nbformat.v4.new_markdown_cell(text.strip("\n"), metadata=meta))


def code(text: str, grade_id: str | None = None) -> None:
    """A read-only code cell (locked when it has an id)."""
    meta = _meta(grade_id, grade=False, solution=False, locked=True) if grade_id else {}
    CELLS.append(nbformat.v4.new_code_cell(text.strip("\n"), metadata=meta))


def solution(grade_id: str, text: str) -> None:
    CELLS.append(nbformat.v4.new_code_cell(text.strip("\n"), metadata=_meta(grade_id, grade=False, solution=True, locked=False)))


def test(grade_id: str, points: int, title: str, visible: str) -> None:
    """A test cell: visible asserts, then the hidden part (collection only; scored by the grader).

    ``title`` names the question in the feedback page's score table.
    """
    body = visible.strip("\n") + "\n\n" + hidden_block(grade_id)
    meta = _meta(grade_id, grade=True, solution=False, locked=True, points=points)
    meta["course"] = {"title": title}
    CELLS.append(nbformat.v4.new_code_cell(body, metadata=meta))


def manual(grade_id: str, points: int, text: str) -> None:
    CELLS.append(nbformat.v4.new_markdown_cell(text.strip("\n"), metadata=_meta(grade_id, grade=True, solution=True, locked=False, points=points)))


# =============================================================================
md("""
# L14.4 — Model Loading and Memory

**Points:** 37 autograded points in this notebook, 3 points for your written explanation (graded by
hand), and 3 points for editing the lab file (checked by the autograder). **Total: 43.**

Work top to bottom. Cells marked *YOUR CODE HERE* are yours; the cells below them check your answer.
Sizes are in bytes unless a name says otherwise; **GB = 10^9 bytes and GiB = 2^30 bytes**, and the
difference matters.

**Checking and handing in.** The checks you see are only part of the grading: the grader also runs
hidden checks on other inputs, so passing the visible ones is a good sign, not a guarantee. The
*Validate* button runs the visible checks only. A failing check raises an error, and *Run All* stops
at the first error: fix that cell (or run the cells below it one by one) before you go on. To hand in,
submit this folder as it is: this notebook **and** the lab file `l14-04-model-memory.py` beside it
(you edit the lab in Task 14).
""", "intro")

code("""
# Setup: the course library (light: no torch, no matplotlib until a cell needs them).
import course_lib
from course_lib import GB, GiB, get_model, kv_cache_bytes_per_token, weight_bytes as library_weight_bytes
from course_lib.report import budget_table
print("course_lib", course_lib.__version__, "ready")
""", "setup")

md("""
## Goal

Estimate serving memory across model weights, KV cache, runtime workspace, and request state so
admission decisions use explicit budgets rather than guesswork.
""", "goal")

md("""
## Budget the whole GPU, not just the weights

### The desk picture

Picture a desk with limited surface area. A large **textbook** stays open all day: the model
**weights**, large and mostly fixed. Each student request adds **sticky notes** that must remain
available while that request is active: the **KV cache and other request state**, which grow with
active sequences. The program also needs **scratch paper** for temporary calculations: the runtime
**workspace**. And you deliberately leave part of the desk **empty** so a small surprise does not knock
everything onto the floor: the **safety reserve**, memory you choose not to fill during normal
admission.

### The 24 GB worked example

Imagine a 24 GB device where weights use 14 GB, runtime workspace uses 2 GB, and you reserve 2 GB
for safety. One long active request is estimated to need 1.5 GB of request-dependent state.

```
24 GB total
- 14 GB weights
-  2 GB workspace
-  2 GB safety reserve
=  ? GB left for request-dependent state
```

**Task 1.** Write `request_budget_gb` (what is left for request-dependent state) and
`requests_that_fit` (how many requests of a given size fit in that budget; a whole number, never
negative). Then use them on the example: `left_gb`, `fit_count`, and `fifth_crosses` (a bool: does
one more request than `fit_count` cross the budget?).
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
assert isinstance(left_gb, (int, float)), "left_gb should be a number of GB"
assert isinstance(fit_count, int), "fit_count should be a whole number (int)"
assert isinstance(fifth_crosses, bool), "fifth_crosses should be True or False"
assert requests_that_fit(3, 1) == 3, "requests_that_fit(3, 1): three 1 GB requests fit in 3 GB"
""")

md("""
## Separate fixed and request-dependent memory

Model weights are the large, mostly fixed part. A rough estimate is **parameter count × bytes per
stored value**. Real systems also need some extra space for metadata, sharding, and runtime buffers.

| dtype | bits per value | bytes per value |
|---|---|---|
| fp32 | 32 | 4 |
| fp16 / bf16 | 16 | 2 |
| int8 | 8 | 1 |
| int4 | 4 | 0.5 |

**Task 2.** Write `weight_bytes(num_params, dtype)` for the dtypes in the table (return an int of
bytes). Then give Llama-3-8B's fp16 weights (8,030,261,248 parameters, the published count) in both
units: `llama3_weights_gb` (GB) and `llama3_weights_gib` (GiB).
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
assert weight_bytes(1000, "fp32") == 4000, "weight_bytes(1000, 'fp32'): 1000 values of 4 bytes"
assert isinstance(weight_bytes(10, "fp16"), int), "weight_bytes should return an int of bytes"
assert llama3_weights_gb > llama3_weights_gib, "a GB is smaller than a GiB, so the same bytes are more GB"
""")

md("""
Generation adds the **KV cache**. It stores attention keys and values for tokens that were already
processed. Longer prompts, more generated tokens, and more active requests make this cache grow.
For every token, every layer keeps one key vector and one value vector per **KV head**:

    KV bytes per token = 2 (K and V) × layers × KV heads × head_dim × bytes per value

Grouped-query attention (GQA) shares each KV head among several query heads, so a model can have 32
attention heads but cache only 8 KV heads. In a Hugging Face `config.json`, `num_key_value_heads` is
the number of KV heads (absent means plain multi-head attention: as many KV heads as attention
heads), and `head_dim` is `hidden_size / num_attention_heads` unless the config states `head_dim`.

**Task 3.** Write `kv_bytes_per_token(config, bytes_per_value)` for such a config dict.
""", "kv_intro")

code("""
# Two real configs (the shape keys of the published config.json files)
llama3_8b = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8}
llama2_7b = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32}
""", "kv_configs")

solution("answer_kv_per_token", """
def kv_bytes_per_token(config, bytes_per_value):
    \"\"\"KV-cache bytes one token adds, across all layers.\"\"\"
    ### BEGIN SOLUTION
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim", config["hidden_size"] // heads)
    return 2 * config["num_hidden_layers"] * kv_heads * head_dim * bytes_per_value
    ### END SOLUTION


print("Llama-3-8B fp16:", kv_bytes_per_token(llama3_8b, 2), "bytes per token")
""")

test("test_kv_per_token", 3, "Task 3 · KV bytes per token", """
tiny = {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2}
assert kv_bytes_per_token(tiny, 1) == 16, "1 layer, 2 KV heads of 4 dims, 1 byte: count keys and values"
""")

md("""
The cache grows with **every token of every active sequence**.

**Task 4.** Write `kv_cache_bytes(config, bytes_per_value, context_tokens, active_sequences)`, then
compute `lab_kv_gb`: Llama-2-7B in fp16 with 1,024 tokens per sequence and 8 active sequences, in
GB (this is the lab's setting).
""", "kv_total_intro")

solution("answer_kv_cache_total", """
def kv_cache_bytes(config, bytes_per_value, context_tokens, active_sequences):
    \"\"\"KV-cache bytes of active_sequences sequences of context_tokens tokens each.\"\"\"
    ### BEGIN SOLUTION
    return kv_bytes_per_token(config, bytes_per_value) * context_tokens * active_sequences
    ### END SOLUTION


### BEGIN SOLUTION
lab_kv_gb = kv_cache_bytes(llama2_7b, 2, 1024, 8) / GB
### END SOLUTION
print(f"lab setting: {lab_kv_gb:.3f} GB of KV cache")
""")

test("test_kv_cache_total", 2, "Task 4 · the KV cache of many sequences", """
assert kv_cache_bytes(llama3_8b, 2, 2, 1) == 2 * kv_bytes_per_token(llama3_8b, 2), "two tokens cost twice one"
assert isinstance(lab_kv_gb, float), "lab_kv_gb should be a float number of GB"
""")

md("""
**Task 5 (GQA and dtype).** Both models below have 32 layers and 32 attention heads of 128 dims.
Set `mha_over_gqa_ratio` to how many times more KV bytes per token Llama-2-7B (multi-head) needs
than Llama-3-8B (GQA, 8 KV heads), and `llama3_fp8_kv_bytes_per_token` to Llama-3-8B's KV bytes
per token with an fp8 KV cache.
""", "gqa_intro")

solution("answer_gqa_dtype", """
### BEGIN SOLUTION
mha_over_gqa_ratio = kv_bytes_per_token(llama2_7b, 2) / kv_bytes_per_token(llama3_8b, 2)
llama3_fp8_kv_bytes_per_token = kv_bytes_per_token(llama3_8b, 1)
### END SOLUTION
print(mha_over_gqa_ratio, llama3_fp8_kv_bytes_per_token)
""")

test("test_gqa_dtype", 2, "Task 5 · GQA and an fp8 cache", """
assert mha_over_gqa_ratio > 1, (f"mha_over_gqa_ratio is {mha_over_gqa_ratio!r}: divide Llama-2-7B's KV bytes per "
                                "token by Llama-3-8B's; which of the two caches more KV heads?")
assert llama3_fp8_kv_bytes_per_token < kv_bytes_per_token(llama3_8b, 2), (
    "llama3_fp8_kv_bytes_per_token should be below the fp16 figure: fp8 stores fewer bytes per value")
""")

md("""
### Check yourself against the library

`course_lib` does the same arithmetic for real configs (and more: sliding windows, MLA, tensor
parallelism). Runtime code may also need temporary **workspace**, and moving data between host and
GPU memory is expensive, so placement matters. Here is a whole budget for Llama-2-7B on an RTX 4090
(which reports 24,564 MiB), every pool marked fixed or request-dependent:
""", "library_intro")

code("""
from course_lib import estimate
est = estimate(get_model("llama-2-7b"), gpu="rtx-4090", dtype="fp16", context_tokens=4096, active_sequences=4)
print(budget_table(est.budget))
print()
print("your kv_bytes_per_token agrees with the library:",
      kv_bytes_per_token(llama2_7b, 2) == kv_cache_bytes_per_token(get_model("llama-2-7b"), "fp16"))
""", "library_budget")

md("""
### Predict, then measure on your own device

Formulas are only useful if they match what a machine really allocates. Below is a small llama-style
model (made up for this course) that the next cells build **on your machine** with random weights, so
nothing is downloaded. The setting: weights and KV cache in **fp32** (4 bytes per value),
**4 sequences x 1,024 tokens**.

Count its parameters matrix by matrix. Each of the 8 layers has the attention projections q and o
(`hidden x hidden` each) and k and v (`hidden x (KV heads x head_dim)` each, `head_dim = hidden /
attention heads`), the gated MLP's three matrices (`hidden x intermediate` each) and two norms
(`hidden` values each). Outside the layers: the token embedding (`vocab x hidden`), a final norm
(`hidden`) and the output head (`vocab x hidden`: it is not tied to the embedding here).

**Task 6.** *Before you measure anything*, predict as ints of bytes: `predicted_weights_bytes` (every
parameter x 4 bytes) and `predicted_kv_cache_bytes` (the whole cache of the setting). Work them out
by hand or with your own functions from Tasks 2 to 4; the library is not allowed here.
""", "measure_intro")

code("""
# The small model's config (the shape keys a config.json would hold)
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

test("test_predict_measure", 2, "Task 6 · predict the small model's pools", """
assert isinstance(predicted_weights_bytes, int) and isinstance(predicted_kv_cache_bytes, int), (
    "give both predictions as ints of bytes")
assert predicted_kv_cache_bytes > predicted_weights_bytes / 10, (
    "predicted_kv_cache_bytes looks too small: 4 sequences x 1,024 tokens, every layer, keys and values")
""")

md("""
Now measure. The cell below builds the model in a fresh process on this machine (the GPU when there
is one, else the CPU), allocates its KV cache, runs a prefill and two decode steps, and sets what it
measured beside your predictions, one panel per pool. It takes 10-30 s; the bar shows its steps.
""", "measure_run_intro")

code("""
# MEASUREMENT (real numbers from this machine; your predictions above are what is graded)
from course_lib.lesson import predict_then_measure
measurement = predict_then_measure(predicted_weights_bytes, predicted_kv_cache_bytes)
""", "measure_compare")

md("""
**Task 7.** Which pool's prediction is furthest from what was measured, and why? Set
`largest_gap_pool` to `"weights"`, `"kv_cache"` or `"workspace"`, and `gap_reason` to the letter of
the reason:

* **a** — the parameter-count formula misses some of the weights
* **b** — temporary buffers depend on the kernels that run and on how the allocator reserves and keeps
  memory, not on a formula of the config
* **c** — the KV-cache formula ignores how many sequences are active
""", "gap_intro")

solution("answer_measured_gap", """
### BEGIN SOLUTION
largest_gap_pool = "workspace"
gap_reason = "b"
### END SOLUTION
""")

test("test_measured_gap", 1, "Task 7 · the measured gap", """
assert largest_gap_pool in ("weights", "kv_cache", "workspace"), "one of the three pool names"
assert gap_reason in ("a", "b", "c"), "answer with one letter: \\"a\\", \\"b\\" or \\"c\\""
""")

md("""
### Explore a real budget

The figure stacks the pools for one setting; the hatched box at the top is the reserve, kept empty,
and the dashed green line is the safe limit. In JupyterLab the explorer below it lets you change the
model, dtype, GPU, context length, active sequences and reserve: watch only the request-dependent
pools move, and find the count where the verdict flips.
""", "explorer_intro")

code("""
%matplotlib inline
import matplotlib.pyplot as plt
from course_lib.explorer import budget_explorer, budget_figure, explorer_budget

# The static figure: shown everywhere, with or without a widget frontend.
static = explorer_budget(model="llama-2-7b", dtype="fp16", gpu="rtx-4090", context_tokens=4096,
                         active_sequences=8, reserve_percent=10)
fig = budget_figure(static.budget, title="llama-2-7b (fp16) on rtx-4090, 4096 tokens per sequence")
plt.show()
""", "budget_figure")

code("""
# The interactive explorer (needs a widget frontend such as JupyterLab; headless runs just skip drawing it).
budget_explorer(model="llama-2-7b", dtype="fp16", gpu="rtx-4090", context_tokens=4096, active_sequences=4)
""", "budget_explorer")

md("""
## Free memory is not guaranteed capacity

A "free memory" number can be misleading. Memory may be **reserved** by the framework's caching
allocator, held by the CUDA context outside any tensor, or split into pieces that are hard to reuse for
one large allocation. Serving runtimes often manage blocks or pools to make reuse more predictable.

The cell below shows it **with real allocations on this machine**, in a fresh process. On a CPU it
allocates many 64 KiB blocks, frees every other one and then asks for one 32 MiB block: half the
blocks are free, yet the process keeps holding them (its resident memory does not drop), and the
large request takes new memory because no freed hole is big enough. On a GPU it does the same with
torch: *allocated* drops when tensors are freed, *reserved* (torch's cache) does not, the device's
*free* memory comes back only after `empty_cache()`, and a large request grows the reservation
although cached bytes were there.
""", "free_intro")

code("""
# MEASUREMENT (real numbers from this machine; nothing here is graded)
from course_lib.lesson import show_device_memory
free_demo = show_device_memory()
""", "measure_snapshot")

md("""
**Task 8.** After the model loaded, the device reports `free_bytes` free. The service must keep
`reserve_bytes` unfilled. Write `safe_requests(free_bytes, reserve_bytes, per_request_bytes)`: how
many requests of `per_request_bytes` may admission allow (a whole number, never negative)? For
example: 8 GB free, a 2 GB reserve, 1.5 GB per request.
""", "safe_intro")

solution("answer_safe_requests", """
def safe_requests(free_bytes, reserve_bytes, per_request_bytes):
    \"\"\"Requests admission may allow when free_bytes are free and reserve_bytes must stay unfilled.\"\"\"
    ### BEGIN SOLUTION
    usable = free_bytes - reserve_bytes
    return max(0, usable // per_request_bytes)
    ### END SOLUTION


print(safe_requests(8 * GB, 2 * GB, 1_500_000_000), "requests may start")
""")

test("test_safe_requests", 2, "Task 8 · free is not capacity", """
assert safe_requests(10, 0, 5) == 2, "with no reserve, 10 free bytes hold two 5-byte requests"
""")

md("""
**Task 9.** A serving process on an 80 GB GPU asks how much memory it may plan new KV cache with.
The device reports **18 GB free** (`cudaMemGetInfo`). Torch reports **50 GB allocated** in live
tensors and **59 GB reserved** by its caching allocator (so 9 GB are cached inside torch, in pieces
of whatever sizes were freed). The team keeps a **safety reserve of 8 GB** unfilled. Counting only
memory that is *guaranteed* for a new allocation of any size, write
`plannable_bytes(total_bytes, free_bytes, allocated_bytes, reserved_bytes, safety_reserve_bytes)`
(an int of bytes, never negative), and try it on this snapshot.
""", "plannable_intro")

solution("answer_plannable", """
def plannable_bytes(total_bytes, free_bytes, allocated_bytes, reserved_bytes, safety_reserve_bytes):
    \"\"\"Bytes admission may plan new requests with: only what is guaranteed, less the safety reserve.\"\"\"
    ### BEGIN SOLUTION
    return max(0, free_bytes - safety_reserve_bytes)
    ### END SOLUTION


print(plannable_bytes(80 * GB, 18 * GB, 50 * GB, 59 * GB, 8 * GB) / GB, "GB may be planned")
""")

test("test_plannable", 2, "Task 9 · what admission may plan with", """
assert isinstance(plannable_bytes(10, 5, 4, 5, 1), int), "plannable_bytes should return an int of bytes"
assert plannable_bytes(10, 1, 8, 9, 2) == 0, "when less is free than the safety reserve, nothing may be planned"
""")

md("""
## Admission control

Admission control decides whether a new request may start **now**. If the request could push memory
above the safe budget, the service should **queue** or **reject** it. That is safer than letting one
request crash the shared model process.

**Task 10.** Write `admission_decision(request_bytes, in_use_bytes, safe_budget_bytes)` returning
exactly one of the strings `"admit"` (it fits now: landing exactly on the budget is still inside it),
`"queue"` (it would cross the budget now, but fits once running work finishes) or `"reject"` (it is
larger than the whole safe budget, so it can never fit).
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

test("test_admission_rule", 3, "Task 10 · admit, queue or reject", """
assert admission_decision(1, 0, 10) == "admit", "an empty budget admits a small request"
assert admission_decision(11, 0, 10) in ("queue", "reject"), "a request larger than the budget cannot start now"
""")

md("""
### Ten fit, the eleventh waits: the simulator

`course_lib` simulates admission step by step over a request trace. Below, the weights fill most of
a 24 GB device and each request reserves its whole KV cache up front (`reserve-max`, the "guaranteed
no evict" policy). Ten requests fit; the eleventh is **queued**, not crashed, and starts when one
finishes. The plot's left column shows that run: KV memory over decode steps against the safe
budget (top) and how many requests run and wait (bottom).

The right column runs the same requests under `paged`, vLLM's policy: a request claims 16-token
blocks only as its tokens arrive, so more requests start at once; when the blocks run out, the
youngest request is **preempted** (its blocks freed, its tokens recomputed later). Memory stays
under the same safe budget either way; the policies differ in how many requests run and how often
work is redone.
""", "simulate_intro")

code("""
from course_lib.lesson import show_simulation
result = show_simulation()
""", "simulate_demo")

md("""
## Plan loading and offloading

Model loading time also affects operations. A replacement process may take seconds or minutes before
it becomes ready, depending on model size, storage, compilation, and device initialization. Rollout
plans should account for warm-up and **not assume a new replica is ready immediately after process
start**.

Offloading moves some weights or cache between GPU and host memory. It can reduce GPU pressure, but
transfers add latency and use bandwidth. It is a **tradeoff, not free capacity**.

**Task 11** (three parts, one point each; every size here is in GB = 10^9 bytes, every rate in GB/s).

**11a.** `offload_seconds_per_step`: 10 GB of weights live in host memory and are streamed to the GPU
over PCIe Gen4 x16 (31.5 GB/s per direction, theoretical) for **every** decode step. How many seconds
does that add per step, at best?
""", "loading_intro")

solution("answer_offload_step", """
### BEGIN SOLUTION
offload_seconds_per_step = 10e9 / 31.5e9
### END SOLUTION
print(f"{offload_seconds_per_step:.3f} s per decode step")
""")

test("test_offload_step", 1, "Task 11a · offloading cost per step", """
assert offload_seconds_per_step > 0.1, (f"offload_seconds_per_step is {offload_seconds_per_step!r} s: streaming "
                                        "10 GB is not free; divide the bytes by the link's bytes per second")
""")

md("""
**11b.** `replica_ready_seconds`: a new replica reads 14 GB of weights from a network disk at 2 GB/s,
copies them to the GPU at 25 GB/s, spends 4 s initialising the device, 20 s capturing CUDA graphs
and 8 s warming up. How many seconds after its process starts is it ready to serve?
""", "replica_intro")

solution("answer_replica_ready", """
### BEGIN SOLUTION
replica_ready_seconds = 14 / 2 + 14 / 25 + 4 + 20 + 8
### END SOLUTION
print(f"ready after {replica_ready_seconds:.2f} s")
""")

test("test_replica_ready", 1, "Task 11b · when a new replica is ready", """
assert isinstance(replica_ready_seconds, (int, float)), "replica_ready_seconds should be a number of seconds"
assert replica_ready_seconds > 14 / 2, "reading 14 GB at 2 GB/s alone takes 7 s"
""")

md("""
**11c.** `ready_at_process_start`: is a replica ready to serve when its process starts? (a bool)
""", "ready_intro")

solution("answer_ready_at_start", """
### BEGIN SOLUTION
ready_at_process_start = False
### END SOLUTION
""")

test("test_ready_at_start", 1, "Task 11c · ready at process start?", """
assert isinstance(ready_at_process_start, bool), "ready_at_process_start should be True or False"
""")

md("""
The library's version of these ideas follows. It models **another replica** than Task 11b's: the
lesson's Llama-2-7B (13.48 GB in fp16) from a slower network disk, with its own initialisation,
compile and warm-up times, so its total is not your answer to 11b; its phases are the same kind.
""", "loading_demo_intro")

code("""
# The same ideas with the library: the readiness timeline and the cost of offloading (another replica than 11b's).
from course_lib.lesson import show_loading_and_offload
loading = show_loading_and_offload()
""", "loading_demo")

md("""
## The four concrete questions

Ask four concrete questions: Which memory pools exist? Which are mostly fixed? Which grow with active
requests or sequence length? How much reserve keeps the process healthy? Those answers are more useful
than one headline number for "GPU memory used."

**Task 12.** Set `pool_kinds` to a dict from each of the five pools (`"weights"`, `"workspace"`,
`"reserve"`, `"kv_cache"`, `"request_state"`) to `"fixed"` or `"grows"`. For the reserve: vLLM fills
at most `gpu_memory_utilization = 0.9` of the device by default. Set `vllm_default_reserve_gb` to how
many GB that leaves unfilled on the lesson's 24 GB device.
""", "four_questions")

solution("answer_pool_kinds", """
### BEGIN SOLUTION
pool_kinds = {"weights": "fixed", "workspace": "fixed", "reserve": "fixed",
              "kv_cache": "grows", "request_state": "grows"}
vllm_default_reserve_gb = 24 * (1 - 0.9)
### END SOLUTION
""")

test("test_pool_kinds", 2, "Task 12 · fixed or growing pools", """
assert isinstance(pool_kinds, dict), "pool_kinds should be a dict"
assert set(pool_kinds.values()) <= {"fixed", "grows"}, "each kind is \\"fixed\\" or \\"grows\\""
""")

md("""
## Predict

A model's weights fit in GPU memory, but adding many long generation requests causes out-of-memory
failures. What likely grew?

* **a** — Request-dependent memory such as the KV cache and runtime buffers
* **b** — The number of model parameters stored on disk
* **c** — The API schema definition

Set `predict_answer` to `"a"`, `"b"` or `"c"`.
""", "predict_intro")

solution("answer_predict", """
### BEGIN SOLUTION
predict_answer = "a"
### END SOLUTION
""")

test("test_predict", 1, "Predict · what grew?", """
assert predict_answer in ("a", "b", "c"), "answer with one letter: \\"a\\", \\"b\\" or \\"c\\""
""")

md("""
## Run the local Lab

The lab separates fixed model memory from request-dependent KV-cache memory. From the repository
root it runs as:

    python3 labs/notebooks/level-14/l14-04-model-memory.py

(in the release folder the file sits beside this notebook). The next cell runs it for you and
prints what it printed.

1. Run it unchanged with `active_sequences = 8`. Record `parts_gb` and the remaining headroom.
2. Before editing, predict which memory component changes if the active sequence count doubles.
   Weights, workspace, and reserve must stay fixed.
3. Change only `active_sequences = 8` to `active_sequences = 16` in the lab file, then rerun.
4. Confirm only `kv_cache` doubles. The total now exceeds the 24 GB device budget, so the script
   reports that the workload does not fit.
""", "lab_intro")

code("""
from course_lib.labfile import find_lab_file, run_lab
lab_path = find_lab_file()
lab_run = run_lab(lab_path)
print(f"ran {lab_path.name}:\\n")
print(lab_run["stdout"])
""", "lab_run")

md("""
**Task 13 (steps 1 and 2).** *Before you edit the lab file*: set `lab_parts_gb_at_8` to the
`parts_gb` dict the unchanged lab prints, `lab_headroom_gb_at_8` to its `headroom_gb`, and
`lab_prediction` to the name of the one part you predict will change when `active_sequences`
doubles. Type the numbers in rather than reading them from `lab_run`: once you edit the lab in step 3,
rerunning this notebook shows the 16-sequence output there.
""", "lab_record_intro")

solution("answer_lab_record", """
### BEGIN SOLUTION
lab_parts_gb_at_8 = {"weights": 14.0, "workspace": 2.0, "reserve": 2.0, "kv_cache": 4.295}
lab_headroom_gb_at_8 = 1.705
lab_prediction = "kv_cache"
### END SOLUTION
""")

test("test_lab_record", 2, "Task 13 · the lab at 8 sequences", """
assert set(lab_parts_gb_at_8) == {"weights", "workspace", "reserve", "kv_cache"}, "copy the whole parts_gb dict"
""")

md("""
**Task 14 (steps 3 and 4).** Now open the lab file (`l14-04-model-memory.py`), change **only** the
line `active_sequences = 8` to `active_sequences = 16`, save it, and run the cell below. Then set
`lab_parts_gb_at_16` to the `parts_gb` it prints and `lab_fits_at_16` to whether the workload fits
(a bool), typing the values in as in Task 13. Compare with step 1: which part changed, and by how much?
""", "lab_edit_intro")

code("""
lab_run_16 = run_lab(lab_path)
print(lab_run_16["stdout"])
""", "lab_rerun")

solution("answer_lab_after_edit", """
### BEGIN SOLUTION
lab_parts_gb_at_16 = {"weights": 14.0, "workspace": 2.0, "reserve": 2.0, "kv_cache": 8.59}
lab_fits_at_16 = False
### END SOLUTION
print({name: lab_parts_gb_at_16[name] / lab_parts_gb_at_8[name] for name in lab_parts_gb_at_8})
""")

test("test_lab_after_edit", 2, "Task 14 · the lab at 16 sequences", """
assert set(lab_parts_gb_at_16) == {"weights", "workspace", "reserve", "kv_cache"}, "copy the whole parts_gb dict"
assert isinstance(lab_fits_at_16, bool), "lab_fits_at_16 should be True or False"
""")

md("""
## Quick Check

1. Why is model-file size an incomplete serving-memory estimate?
   * **a** — Disk size already includes space for future requests
   * **b** — Model files are never loaded into device memory
   * **c** — Serving also needs cache and request memory
2. What should admission control do near a safe memory limit?
   * **a** — Unload the model weights between output tokens
   * **b** — Accept every request and rely on the operating system to recover the GPU
   * **c** — Queue or reject work according to service policy
3. What tradeoff can memory offloading introduce?
   * **a** — It reduces device-memory pressure while adding transfer and bandwidth costs
   * **b** — It guarantees identical performance on every GPU
   * **c** — It removes latency, because host memory is larger

Set `quick_check_1`, `quick_check_2` and `quick_check_3` to `"a"`, `"b"` or `"c"`.
""", "quick_check_intro")

solution("answer_quick_check", """
### BEGIN SOLUTION
quick_check_1 = "c"
quick_check_2 = "c"
quick_check_3 = "a"
### END SOLUTION
""")

test("test_quick_check", 3, "Quick Check", """
for answer in (quick_check_1, quick_check_2, quick_check_3):
    assert answer in ("a", "b", "c"), "answer each question with one letter: \\"a\\", \\"b\\" or \\"c\\""
""")

md("""
## Explain it back

Create a memory budget with weights, KV cache, workspace, and reserve. Explain which parts are mostly
fixed and which grow with active requests.

**Task 15.** Pick a preset model and GPU (see `course_lib.model_names()` and `course_lib.GPU_BYTES`),
a dtype, a context length and a number of active sequences, and build `my_budget` in this shape:

```python
my_budget = {
    "model": "llama-3-8b",            # a preset name
    "gpu": "a100-80gb",               # a GPU preset name (or a size such as "24GB")
    "dtype": "bf16",                  # weights dtype; add "kv_dtype" if the KV cache differs
    "context_tokens": 8192,           # tokens per sequence (an int)
    "active_sequences": 16,           # sequences at once (an int)
    "pools": {                        # at least these four pools, each {"bytes": int, "kind": ...}
        "weights":   {"bytes": ..., "kind": "fixed" or "grows"},
        "workspace": {"bytes": ..., "kind": "fixed" or "grows"},
        "reserve":   {"bytes": ..., "kind": "fixed" or "grows"},
        "kv_cache":  {"bytes": ..., "kind": "fixed" or "grows"},
    },
    "headroom_bytes": ...,            # the device's bytes minus every pool (negative: it does not fit)
}
```

Every `bytes` is an int; `kind` is `"fixed"` or `"grows"`. The grader recomputes the weights and the
KV cache for your choices, so use real arithmetic (the library's `weight_bytes` and
`kv_cache_bytes_per_token` are allowed).
""", "explain_intro")

solution("answer_explain_budget", """
### BEGIN SOLUTION
_model, _gpu, _dtype, _tokens, _seqs = "llama-3-8b", "a100-80gb", "bf16", 8192, 16
_spec = get_model(_model)
_device = course_lib.gpu_bytes(_gpu)
_pools = {
    "weights": {"bytes": library_weight_bytes(_spec, _dtype), "kind": "fixed"},
    "workspace": {"bytes": 2 * GB, "kind": "fixed"},
    "reserve": {"bytes": _device // 10, "kind": "fixed"},
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

test("test_explain_budget", 3, "Task 15 · your own budget", """
assert isinstance(my_budget, dict) and "pools" in my_budget, "my_budget should be a dict with a 'pools' dict"
assert {"weights", "kv_cache", "workspace", "reserve"} <= set(my_budget["pools"]), "include the four pools"
""")

md("""
**Explain it back (written, 3 points, graded by hand).** In the cell below, in a few sentences: which
parts of your budget are mostly fixed, which grow with active requests (and with what exactly), and
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

**Next lesson:** L14.5 — Quantization for Serving examines how lower-precision representations
change memory, compatibility, and quality.

**References:** vLLM, Documentation. NVIDIA, CUDA Documentation.
""", "takeaways")


def build() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = CELLS
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for i, cell in enumerate(nb.cells):   # stable ids keep diffs small
        cell["id"] = (cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell-{i}").replace("_", "-")
    return nb


def render() -> str:
    return nbformat.writes(build(), version=4) + "\n"


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        sys.exit(0 if NOTEBOOK.read_text() == text else 1)
    NOTEBOOK.write_text(text)
    print(f"wrote {NOTEBOOK}")

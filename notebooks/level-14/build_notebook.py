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
GRADER_ONLY = ("*Only the grader checks this answer* (a visible check would let you try values until one "
               "passes): the cell below checks its type and shape only.")


# =============================================================================
# Notebook 1: the lesson, in one sitting
# =============================================================================
notebook("lesson")

md("""
# L14.4 — Model Loading and Memory (notebook 1 of 2: the lesson)

This assignment has **two notebooks**; work them in this order:

1. **this one, the lesson** (about 60-90 minutes if you know transformers): every section of the lesson
   text, the local lab, the three questions and the explain-it-back task. **26 autograded points** here,
   **3 points** for your written explanation (graded by hand) and **2 points** for editing the lab file
   (checked by the autograder): **31 points**, in 12 graded items.
2. `l14-04-runtime-lab.ipynb`, **the runtime lab** ("what vLLM will actually allocate", about an hour):
   real start-up logs, blocks and concurrency, the knobs and a launch decision: **18 autograded points**.

**Total: 49.** Most points ask you to reason (predict, compute, decide). Counted honestly, 5 of this
notebook's 31 points reward recall (the Predict and its four pools, which the text answers right after
you commit, and the Quick Check) and 2 reward copying (the lab edit); in the runtime lab 1 of 18 does.
A task with several parts scores each part on its own, and where a task uses an earlier answer of yours
it is checked against that answer: one slip costs one question, not two.

Work top to bottom. Cells marked *YOUR CODE HERE* are yours; the cells below them check your answer.
Sizes are in bytes unless a name says otherwise; **GB = 10^9 bytes and GiB = 2^30 bytes**, and the
difference matters.

**Checking and handing in.** The checks you see try the functions you write on a few inputs and say
what looks off, in the same words the grader uses; the grader then tries other inputs you do not see,
so passing the visible checks is a good sign, not a guarantee. Single values and predictions are
checked **by the grader only** (a visible check would let you try values until one passes): their cells
check the type and shape only, and say so. The *Validate* button runs the visible checks. A failing
check raises an error, and *Run All* stops at the first error: fix that cell (or run the cells below it
one by one) before you go on. To hand in, submit this folder as it is: **both notebooks and** the lab
file `l14-04-model-memory.py` beside them (you edit the lab in the lab section).
""", "intro")

code("""
# Setup: the course library (light: no torch, no matplotlib until a cell needs them).
import course_lib
from course_lib import GB, GiB, get_model, kv_cache_bytes_per_token, weight_bytes as library_weight_bytes
from course_lib.lessons.l14_04 import practice
from course_lib.report import budget_table
print("course_lib", course_lib.__version__, "ready")
""", "setup")

md("""
## Goal

Estimate serving memory across model weights, KV cache, runtime workspace, and request state so
admission decisions use explicit budgets rather than guesswork.

## Predict

*Before you read on*, predict (two parts, one point each). A model's weights fit in GPU memory, but
adding many long generation requests causes out-of-memory failures. What likely grew?

* **a** — Request-dependent memory such as the KV cache and runtime buffers
* **b** — The number of model parameters stored on disk
* **c** — The API schema definition

Set `predict_answer` to `"a"`, `"b"` or `"c"`.

The whole lesson asks four questions of a serving process: *which memory pools exist, which are mostly
fixed, which grow with active requests or sequence length, and how much reserve keeps the process
healthy?* Commit to the second and third now. Set `pool_kinds` to a dict from each of the four pools of
a serving budget to `"fixed"` (its size does not change when one more request starts) or `"grows"`:

* `"weights"` — the model's parameters;
* `"workspace"` — scratch memory the runtime's kernels use while operations run;
* `"reserve"` — memory the service deliberately leaves unfilled;
* `"kv_cache"` — the attention keys and values of the tokens already processed.

{grader_only}
""".format(grader_only=GRADER_ONLY), "predict_intro")

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

md("""
## Budget the whole GPU, not just the weights

### The desk picture

Picture a desk with limited surface area. A large **textbook** stays open all day: the model
**weights**, large and mostly fixed. Each student request adds **sticky notes** that must remain
available while that request is active: the **KV cache and other request state**, which grow with
active sequences. The program also needs **scratch paper** for temporary calculations: the runtime
**workspace**. And you deliberately leave part of the desk **empty** so a small surprise does not knock
everything onto the floor: the **safety reserve**, memory you choose not to fill during normal
admission. (That answers your `pool_kinds`.)

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

**Task 1** (two parts, one point each). Write `request_budget_gb` (what is left for request-dependent
state) and `requests_that_fit` (how many requests of a given size fit in that budget; a whole number,
never negative). Then use them on the example: `left_gb`, `fit_count`, and `fifth_crosses` (a bool:
does one more request than `fit_count` cross the budget?). The visible check tries your two functions;
the three example values are the grader's.
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

Model weights are the large, mostly fixed part. A rough estimate is **parameter count × bytes per
stored value**. Real systems also need some extra space for metadata, sharding, and runtime buffers.

| dtype | bits per value | bytes per value |
|---|---|---|
| fp32 | 32 | 4 |
| fp16 / bf16 | 16 | 2 |
| int8 | 8 | 1 |
| int4 | 4 | 0.5 |

**Task 2** (two parts). Write `weight_bytes(num_params, dtype)` for the dtypes in the table (return an
int of bytes). Then give Llama-3-8B's fp16 weights (8,030,261,248 parameters, the published count) in
both units: `llama3_weights_gb` (GB) and `llama3_weights_gib` (GiB).
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
Generation adds the **KV cache**. It stores attention keys and values for tokens that were already
processed. Longer prompts, more generated tokens, and more active requests make this cache grow.
For every token, every layer keeps one key vector and one value vector per **KV head**:

    KV bytes per token = 2 (K and V) × layers × KV heads × head_dim × bytes per value

and the cache grows with **every token of every active sequence**:

    KV cache bytes = KV bytes per token × context tokens × active sequences

Grouped-query attention (GQA) shares each KV head among several query heads, so a model can have 32
attention heads but cache only 8 KV heads. In a Hugging Face `config.json`, `num_key_value_heads` is
the number of KV heads (absent means plain multi-head attention: as many KV heads as attention
heads), and `head_dim` is `hidden_size / num_attention_heads` unless the config states `head_dim`.

**Task 3** (five parts, one point each: plain multi-head shapes, GQA shapes, a stated `head_dim`; a
workload's total; the lab's figure). Write `kv_bytes_per_token(config, bytes_per_value)` for such a
config dict and `kv_cache_bytes(config, bytes_per_value, context_tokens, active_sequences)` (use your
`kv_bytes_per_token`), then compute `lab_kv_gb`: Llama-2-7B in fp16 with 1,024 tokens per sequence and
8 active sequences, in GB (this is the lab's setting).
""", "kv_intro")

code("""
# Two real configs (the shape keys of the published config.json files)
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

`course_lib` does the same arithmetic for real configs (and more: sliding windows, MLA, tensor
parallelism). Runtime code may also need temporary **workspace**, and moving data between host and
GPU memory is expensive, so placement matters. Here is a whole budget for Llama-2-7B on an RTX 4090
(23.65 GiB as CUDA reports it, the figure runtimes plan with; nvidia-smi shows 23.99 GiB), every pool
marked fixed or grows:
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

**Task 4** (two parts). *Before you measure anything*, predict as ints of bytes:
`predicted_weights_bytes` (every parameter x 4 bytes) and `predicted_kv_cache_bytes` (the whole cache
of the setting). Work them out by hand or with your own functions from Tasks 2 and 3; the library is
not allowed here. {grader_only}
""".format(grader_only=GRADER_ONLY), "measure_intro")

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

test("test_predict_measure", 2, "Task 4 · predict the small model's pools", """
practice.check_predict_measure(predicted_weights_bytes, predicted_kv_cache_bytes)
""")

md("""
Now measure. The cell below builds the model in a fresh process on this machine (the GPU when there
is one, else the CPU), allocates its KV cache, runs a prefill and two decode steps, and sets what it
measured beside your predictions and beside course_lib's formulas, one panel per pool. It takes
10-30 s; the bar shows its steps.
""", "measure_run_intro")

code("""
# MEASUREMENT (real numbers from this machine; your predictions above are what is graded)
from course_lib.lessons.l14_04.demos import predict_then_measure
measurement = predict_then_measure(predicted_weights_bytes, predicted_kv_cache_bytes)
""", "measure_compare")

md("""
**Task 5** (two parts). Read the table's **course_lib** column against the **measured** one (not your
own prediction: the question is about the formulas). Which pool does a formula of the config *not*
pin down? Set `largest_gap_pool` to `"weights"`, `"kv_cache"` or `"workspace"`, and `gap_reason` to the
letter of the reason:

* **a** — the parameter-count formula misses some of the weights
* **b** — temporary buffers depend on the kernels that run and on how the allocator reserves and keeps
  memory, not on a formula of the config
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

The figure stacks the pools for one setting; the hatched box at the top is the reserve, kept empty,
and the dashed green line is the safe limit. Beside it, the headroom falls as active sequences grow,
and the dotted line marks where the verdict flips. In JupyterLab the explorer below lets you change the
model, the **weight format**, the **KV-cache dtype** (two separate knobs, as in every runtime), the GPU,
the context length, the active sequences and the reserve: watch only the pools that grow move, and find
the count where the verdict flips.
""", "explorer_intro")

code("""
%matplotlib inline
import matplotlib.pyplot as plt
from course_lib.explorer import budget_explorer, budget_figure, explorer_budget

# The static figure: shown everywhere, with or without a widget frontend.
static = explorer_budget(model="llama-2-7b", dtype="fp16", gpu="rtx-4090", context_tokens=4096,
                         active_sequences=8, reserve_percent=10)
fig = budget_figure(static.budget, title="llama-2-7b (weights fp16, KV fp16) on rtx-4090, 4,096 tokens per sequence")
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
32 MiB request takes new memory anyway: glibc serves a request that large with its own `mmap`,
whatever holes exist (its mmap threshold starts at 128 KiB), so the freed holes help no one but
requests of their own size. On a GPU it does the same with torch and separates what is *cached*
(whole segments torch holds with no live tensor: torch gives them back to CUDA on `empty_cache()`,
and by itself before it would raise out-of-memory) from what is *fragmented* (free blocks inside
segments that still hold a live tensor: `inactive_split_bytes`). Torch's allocator serves a request
from the **smallest cached free block that fits and splits it** (splitting is unlimited by default), so
large tensors fragment too: on the GPU the demo's small tensors are carved out of the segments cached
in its first step. No run of the GPU half is recorded with this course yet; it runs where CUDA is.
""", "free_intro")

code("""
# MEASUREMENT (real numbers from this machine; nothing here is graded)
from course_lib.lessons.l14_04.demos import show_device_memory
free_demo = show_device_memory()
""", "measure_snapshot")

md("""
**Task 6** (two parts: nothing cached, some cached). A serving process on an 80 GB GPU asks how much
memory it may plan new KV cache with. The device reports **18 GB free** (`cudaMemGetInfo`). Torch reports
**50 GB allocated** in live tensors and **59 GB reserved** by its caching allocator: 9 GB cached, of
which `torch.cuda.memory_stats()` counts **3 GB as `inactive_split_bytes`**: free blocks inside segments
that still hold a live tensor. The other 6 GB are whole segments with no live tensor. Before it raises
out-of-memory, PyTorch's caching allocator frees such whole segments and retries the allocation
(`c10/cuda/CUDACachingAllocator.cpp`), so they are as good as free; split blocks inside live segments
stay where they are and serve only requests that fit in them, never one larger than the largest
fragment. The team keeps a **safety reserve of 8 GB** unfilled. Write `plannable_bytes(free_bytes,
allocated_bytes, reserved_bytes, inactive_split_bytes, safety_reserve_bytes)` (an int of bytes, never
negative), and try it on this snapshot.

*Caveats (default allocator settings):* memory in **CUDA-graph pools** (vLLM and SGLang capture graphs
by default) counts as reserved but is neither live nor releasable while the graphs live, so this
formula over-counts there; with `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` free pages between
live blocks are unmapped when memory runs short, so it under-counts there.
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

**Task 7** (three parts: admit, queue, reject). Write `admission_decision(request_bytes, in_use_bytes,
safe_budget_bytes)` returning exactly one of the strings `"admit"` (it fits now: landing exactly on the
budget is still inside it), `"queue"` (it would cross the budget now, but fits once running work
finishes) or `"reject"` (it is larger than the whole safe budget, so it can never fit).
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

`course_lib` simulates admission step by step over a request trace. Below, the weights fill most of
a 24 GB device and each request reserves its whole KV cache up front (`reserve-max`, the "guaranteed
no evict" policy). Ten requests fit; the eleventh is **queued**, not crashed, and starts when one
finishes. The plot's left column shows that run: KV memory over decode steps against the safe
budget (top) and how many requests run and wait (bottom).

The right column runs the same requests under `paged`, scheduled as vLLM V1 schedules them
(`course_lib`'s policy `vllm-v1`, which gets vLLM 0.32's own preemption counts on test traces): a
request claims 16-token blocks only as its tokens arrive, so more requests start at once; each step
spends a budget of tokens (running requests first, long prompts in chunks); when the blocks run out,
the newest running request is **preempted** (its blocks freed, its tokens recomputed later; vLLM's V1
engine preempts only by recompute). Memory stays under the same safe budget either way; the policies differ in
how many requests run and how often work is redone.
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
transfers add latency and use bandwidth. It is a **tradeoff, not free capacity**: weights streamed
from host memory for every decode step add their bytes / the link's bandwidth to every step. (The
runtime lab times a replica's start and an offload with numbers; here the memory thread goes on.)
""", "loading_intro")

md("""
## The four concrete questions

Ask four concrete questions: Which memory pools exist? Which are mostly fixed? Which grow with active
requests or sequence length? How much reserve keeps the process healthy? Those answers are more useful
than one headline number for "GPU memory used." (You answered the middle two in the Predict; you
answer all four for a budget of your own in *Explain it back*.)

A simple budget makes this concrete. Suppose the weights consume most of a GPU but leave several
gigabytes free. That remaining space is not automatically safe concurrency. Active sequences still need
KV cache and temporary runtime memory, and the process needs reserve for variation. If ten requests fit
but the eleventh crosses the safe limit, admission control should queue or reject the eleventh instead
of treating the remaining bytes as guaranteed capacity: the simulation above did exactly that.
""", "four_questions")

md("""
## Run the local Lab

The lab separates fixed model memory from request-dependent KV-cache memory. From the repository
root it runs as:

    python3 labs/notebooks/level-14/l14-04-model-memory.py

(in the release folder the file sits beside this notebook: `python3 l14-04-model-memory.py`). The next
cell runs it for you and prints what it printed.

1. Run it unchanged with `active_sequences = 8`. Record `parts_gb` and the remaining headroom.
2. Before editing, predict which memory component changes if the active sequence count doubles.
   Weights, workspace, and reserve must stay fixed. (Your `pool_kinds` from the Predict is that
   prediction; compare it with what the lab prints after the edit.)
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
**The lab edit (2 points, checked on the file you hand in).** Do step 3: open the lab file
(`l14-04-model-memory.py`, beside this notebook), change **only** the line `active_sequences = 8` to
`active_sequences = 16`, save it, and run the cell below. The grader checks that nothing else changed,
that the edited lab reports that the workload does not fit, and that only `kv_cache` doubled.
""", "lab_edit_intro")

code("""
lab_run_16 = run_lab(lab_path)
print(lab_run_16["stdout"])
""", "lab_rerun")

md("""
## Quick Check

1. Why is model-file size an incomplete serving-memory estimate?
   * **a** — The file is compressed, so the weights take more memory once loaded
   * **b** — Serving also needs cache and request memory, which grows with active requests, plus a
     workspace and a reserve
   * **c** — The file holds fp32 weights and serving always casts them to fp16, so it overestimates
2. What should admission control do near a safe memory limit?
   * **a** — Accept every request and rely on the operating system to recover the GPU when it runs out
   * **b** — Queue or reject work according to service policy
   * **c** — Admit it whenever `nvidia-smi` shows enough free memory
3. What tradeoff can memory offloading introduce?
   * **a** — It reduces device-memory pressure while adding transfer and bandwidth costs
   * **b** — It frees device memory at no cost, because transfers always overlap with compute
   * **c** — It only helps when the model is larger than host memory

Set `quick_check_1`, `quick_check_2` and `quick_check_3` to `"a"`, `"b"` or `"c"` (one point each; a
wrong letter's feedback says what that option gets wrong). {grader_only}
""".format(grader_only=GRADER_ONLY), "quick_check_intro")

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

**Task 8** (three parts: the pools and their kinds, the arithmetic, the headroom). Pick a preset model
and GPU (see `course_lib.model_names()` and `course_lib.GPU_BYTES`), a dtype, a context length and a
number of active sequences, and build `my_budget` in this shape:

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

Every `bytes` is an int; `kind` is `"fixed"` or `"grows"`. The device's bytes are the total CUDA reports
(`course_lib.gpu_bytes(gpu)`). The grader recomputes the weights and the KV cache for your choices, so
use real arithmetic (the library's `weight_bytes` and `kv_cache_bytes_per_token` are allowed).
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

test("test_explain_budget", 3, "Task 8 · your own budget", """
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

**Next in this assignment:** `l14-04-runtime-lab.ipynb`, the runtime lab: what vLLM will actually
allocate, read from its real start-up logs.

**Next lesson:** L14.5 — Quantization for Serving examines how lower-precision representations
change memory, compatibility, and quality.

**References:**
* vLLM, *CacheConfig* (`gpu_memory_utilization`, `block_size`, `kv_cache_dtype`, `cpu_offload_gb`):
  https://docs.vllm.ai/en/stable/api/vllm/config/cache.html
* W. Kwon et al., *Efficient Memory Management for Large Language Model Serving with PagedAttention*,
  SOSP 2023: https://arxiv.org/abs/2309.06180
* PyTorch, *CUDA semantics: memory management* (the caching allocator, `memory_stats`, `empty_cache`,
  `expandable_segments`): https://pytorch.org/docs/stable/notes/cuda.html#memory-management; the
  allocator's source, `c10/cuda/CUDACachingAllocator.cpp` (best fit, then split: `get_free_block`,
  `should_split`)
* NVIDIA, *CUDA Runtime API: cudaMemGetInfo*:
  https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__MEMORY.html
""", "takeaways")


# =============================================================================
# Notebook 2: the runtime lab, what vLLM will actually allocate
# =============================================================================
notebook("runtime")

md("""
# L14.4 — Model Loading and Memory (notebook 2 of 2: the runtime lab)

## What vLLM will actually allocate

The lesson (`l14-04-model-memory.ipynb`, 31 points) built a budget by hand. This notebook reads the
budget a real serving runtime makes for itself when it starts: vLLM's start-up logs, its blocks and
concurrency, the knobs that move its pools, and a launch decision under a constraint.
**18 autograded points** here (the assignment's total is 49); 1 of them rewards recall (which policy
runs more requests at once, shown in the lesson's simulation), none copying.

Figures that depend on fitted constants are **course_lib's estimate of vLLM's rule (within 10% on
published logs)**, not vLLM's own numbers: the rule's structure is vLLM's (`vllm/v1/worker/gpu_worker.py`,
`determine_available_memory`), but three of its five magnitudes (the sampler's bytes per logit, the
non-torch memory, the CUDA-graph MiB per graph) are fitted to published logs. When an answer sits
inside that 10%, the honest answer is *measure it*.

As in the lesson: the visible checks try the functions you write on inputs other than the grader's;
single values and predictions are checked **by the grader only**. Hand this notebook in with the lesson
and the lab file, in the same folder.
""", "runtime_intro")

code("""
# Setup: the course library (light: no torch, no matplotlib until a cell needs them).
import course_lib
from course_lib import GB, GiB, get_model, kv_cache_bytes_per_token
from course_lib.lessons.l14_04 import practice
print("course_lib", course_lib.__version__, "ready")
""", "runtime_setup")

md("""
## From the lesson's budget to a runtime's

Two model shapes recur below. Both have 32 layers and 32 attention heads of 128 dims: Llama-2-7B caches
all 32 heads (multi-head attention), Llama-3-8B only 8 KV heads (grouped-query attention). A runtime
also lets you store the cache in fewer bytes than the weights: vLLM's `--kv-cache-dtype fp8` keeps one
byte per value.

**Task R1 (GQA and dtype;** two parts). Set `mha_over_gqa_ratio` to how many times more KV bytes per
token Llama-2-7B needs than Llama-3-8B (both fp16), and `llama3_fp8_kv_bytes_per_token` to Llama-3-8B's
KV bytes per token with an fp8 KV cache. Work them from the lesson's formula (the library's
`kv_cache_bytes_per_token(get_model(name), dtype)` may check you). {grader_only}
""".format(grader_only=GRADER_ONLY), "gqa_intro")

solution("answer_gqa_dtype", """
### BEGIN SOLUTION
mha_over_gqa_ratio = (2 * 32 * 32 * 128 * 2) / (2 * 32 * 8 * 128 * 2)
llama3_fp8_kv_bytes_per_token = 2 * 32 * 8 * 128 * 1
### END SOLUTION
print(mha_over_gqa_ratio, llama3_fp8_kv_bytes_per_token)
""")

test("test_gqa_dtype", 2, "Task R1 · GQA and an fp8 cache", """
assert isinstance(mha_over_gqa_ratio, (int, float)), "mha_over_gqa_ratio should be a number"
assert isinstance(llama3_fp8_kv_bytes_per_token, int), "llama3_fp8_kv_bytes_per_token should be an int of bytes"
""")

md("""
### Free memory before the first forward pass

A runtime starts by loading the weights; only then can it see what is free. The first forward pass
still has to take its **workspace** (activations and kernel scratch) out of what is free now, and the
service must also keep a reserve unfilled.

**Task R2** (two parts: no workspace to come, some workspace to come). Write `safe_requests(free_bytes,
workspace_bytes, reserve_bytes, per_request_bytes)`: how many requests of `per_request_bytes` may
admission allow (a whole number, never negative)? For example: 8 GB free, a 1 GB workspace, a 2 GB
reserve, 1.5 GB per request. The lesson's measurement showed why the workspace is the hard term: no
formula of the config pins it down, so vLLM *measures* it, by running one forward pass at its batch
limits before it sizes the KV cache. The next section reads that measurement in its logs.
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

A serving runtime does this budget itself when it starts, and prints it. vLLM takes a share of the
GPU's **total** memory (`gpu_memory_utilization`), runs one profile forward pass at its batch limits
(`max_num_batched_tokens` tokens, a sampler over `min(max_num_seqs, max_num_batched_tokens)` rows),
measures the peak, and gives the rest to the KV cache, **preallocated** at start-up:

    KV cache = total × gpu_memory_utilization − weights − activation peak − non-torch memory
               (− the CUDA-graph estimate, from v0.21 with the V1 model runner)

*The graph term:* look for the *Estimated CUDA graph memory* line in your log. From v0.21 the V1 model
runner takes its estimate out of the budget by default; before that the graphs were captured outside
it. The V2 model runner (the default for dense models from 0.25.1) reported 0 for that term on 0.25.1,
and later releases reserve about half of V1's estimate: the term depends on the release and the runner.

So an idle vLLM server shows most of the GPU used in `nvidia-smi` **by design**: the question is not
how much is used but how many free blocks are left (`vllm:kv_cache_usage_perc`), how many requests
wait (`vllm:num_requests_waiting`) and how often work is preempted (`vllm:num_preemptions_total`). Its
start-up line *Maximum concurrency for N tokens per request: X×* is the lesson's "4 fit, the 5th
crosses", computed by the runtime; and it **refuses to start** when one `max_model_len` request cannot
fit. At the default `gpu_memory_utilization = 0.92` (0.9 through v0.10.2) about 8% of the total stays
**outside vLLM's budget**, not necessarily free: the CUDA context, NCCL buffers and anything the profile
missed live there. Note the lesson's "KV cache grows with active requests" is about its *use*: vLLM
preallocates the whole pool at start, and its per-request state is reserved per slot (`max_num_seqs`).

Three published start-up logs (excerpts; their sources are printed with them):
""", "log_intro")

code("""
from course_lib.lessons.l14_04.logs import show_log
for key in ("t4", "a100", "mi300x"):
    show_log(key)
    print()
""", "log_show")

md("""
**Task R3** (two parts). Write `kv_from_log(total_gib, utilization, weights_gib, activation_gib,
non_torch_gib, cuda_graph_gib=0.0)`: the KV cache vLLM's rule gives, in GiB. (Check it on the T4 log:
vLLM printed its utilization rounded to 0.89, so you get 6.15 GiB where it printed 6.22 from the
unrounded 13.18 GiB budget.) The A100 log prints only the weights and the KV cache: set
`a100_activation_and_non_torch_gib` to what its activation peak and non-torch memory took together
(the A100 80GB is 79.25 GiB to CUDA). The visible check tries your function on other logs' figures;
the A100 value is the grader's.
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
`max_concurrency(num_blocks, block_size, max_model_len)`: requests of `max_model_len` tokens the blocks
hold at once, as the V0 engine prints it, `num_blocks × block_size / max_model_len`. (V1 divides by
whole blocks per request, per KV group: `num_blocks / Σ ceil(need / block)`, which for full attention is
`num_blocks / ceil(max_model_len / block_size)`; the two agree whenever `max_model_len` is a multiple
of the block, as in every log here. Sliding-window and hybrid models need fewer blocks per request;
`course_lib.runtimes.vllm_kv` models that.)

The MI300X log runs Llama-3.1-8B (Llama-3-8B's shape) with `tensor_parallel_size=8`: each GPU holds its
share of the KV heads, and the log's blocks are per GPU. Set `mi300x_kv_bytes_per_token_per_gpu` to one
token's KV bytes on one of its GPUs (fp16; the grader checks it). The cell prints your blocks beside
the log's 645,227: expect a gap of a few blocks, not an error. The log prints the pool rounded to two
decimals (157.53 GiB), and 0.005 GiB is about 5.4 MB, some 20 blocks of 262,144 bytes (16 tokens ×
16,384 B): the 15-block gap is that rounding.
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

The lesson's simulation ran eleven requests under `reserve-max` (each request reserves its whole KV
cache up front) and under `paged` as vLLM V1 schedules it (a request claims 16-token blocks only as its
tokens arrive; when the blocks run out, the newest running request is preempted and recomputed later).
""", "simulate_recall")

md("""
**Task R5** (two parts; predict *before* you run the cell after it). In the lesson's run all eleven
requests used their whole `max_new_tokens`. A chat service is different: 400 requests with prompts of
64 to 512 tokens (about 288 on average), `max_new_tokens = 1,024`, but answers of about **128 tokens**.
Under `reserve-max`, each request reserves its prompt plus 1,024 tokens when it starts. Predict
`chat_unused_share`: the share (0 to 1) of the KV memory `reserve-max` allocates that never holds a
token; and `chat_more_running`: which policy runs more requests at once (`"paged"`, `"reserve-max"` or
`"same"`). Within 10 percentage points of the simulated share counts as right (0.60 for a simulated 0.668
would count; 0.55 would not). {grader_only}
""".format(grader_only=GRADER_ONLY), "policy_intro")

solution("answer_policy_predict", """
### BEGIN SOLUTION
chat_unused_share = (1024 - 128) / (288 + 1024)
chat_more_running = "paged"
### END SOLUTION
print(f"predicted: {chat_unused_share:.0%} of reserve-max's KV never holds a token; {chat_more_running} runs more")
""")

test("test_policy_predict", 2, "Task R5 · a chat-like load, predicted", """
assert isinstance(chat_unused_share, (int, float)) and 0 <= chat_unused_share <= 1, "a share between 0 and 1"
assert chat_more_running in ("paged", "reserve-max", "same"), 'one of "paged", "reserve-max" or "same"'
""")

code("""
# Now run it: the same 6 GB KV budget, the chat-like trace, both policies.
from course_lib.lessons.l14_04.demos import show_chat_comparison
chat = show_chat_comparison()
""", "chat_demo")

md("""
## The knobs

**Task R6** (four parts, half a point each). Predict what happens to the **A100 log's** launch (Qwen2-7B,
vLLM 0.10.1, utilization 0.25, 16,384-token requests, that release's A100 defaults of 256 sequences and
2,048 batched tokens; V1 engine, chunked prefill) when one knob changes. Fill in `a100_predictions`:

* `"max_num_seqs=64"`: does the KV pool get `"more"`, `"less"` or stay the `"same"`? (The profile's
  sampler runs over `max_num_seqs` rows of a 152,064-word vocabulary.)
* `"max_num_batched_tokens=8192"`: `"more"`, `"less"` or `"same"`? (The profile's forward pass runs over
  that many tokens.)
* `"kv_cache_dtype=fp8"`: the KV pool's **GiB**, `"more"`, `"less"` or `"same"`? A "free" knob can change
  the engine: on an A100 (compute capability 8.0) vLLM 0.10.x's V1 engine has no fp8 KV cache for its
  default FlashAttention backend (fp8 there needs FlashAttention 3, on Hopper), so vLLM **falls back to
  the V0 engine** (`_is_v1_supported_oracle` in `vllm/engine/arg_utils.py`). V0 at this context length
  does not chunk prefills: its profile runs `max(max_model_len, 2048)` tokens in one forward pass.
  Predict the pool.
* `"kv_cache_gib_at_utilization_0.20"`: the KV cache in GiB at `--gpu-memory-utilization 0.20` (the log
  printed 5.01 at 0.25; the A100 80GB is 79.25 GiB to CUDA).

{grader_only} Then run the cell after it: it computes each change with course_lib's estimate of
vLLM's rule (`course-memory estimate --runtime vllm`; within 10% on published logs), so you can check
your reasoning.
""".format(grader_only=GRADER_ONLY), "log_predict_intro")

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
assert isinstance(a100_predictions, dict), "a100_predictions should be a dict"
for key in ("max_num_seqs=64", "max_num_batched_tokens=8192", "kv_cache_dtype=fp8"):
    assert a100_predictions.get(key) in ("more", "less", "same"), f'{key}: "more", "less" or "same"'
assert isinstance(a100_predictions.get("kv_cache_gib_at_utilization_0.20"), (int, float)), "a number of GiB"
""")

code("""
# course_lib's estimate of vLLM's rule for each change (course-memory estimate --runtime vllm --model qwen2-7b
# --gpu a100-80gb ...); the fp8 row runs on V0, as vLLM 0.10.x does on an A100
from course_lib.lessons.l14_04.demos import show_log_changes
changes = show_log_changes()
""", "log_changes")

md("""
The fp8 row is the lesson of this knob: the same bytes would hold twice the tokens, but the engine that
runs it profiles 16,384 tokens instead of 2,048, so the pool itself shrinks. On a Hopper GPU, or from
vLLM 0.11 (where V0 is gone), the same flag keeps V1 and the pool's GiB stay put.
""", "log_changes_after")

md("""
## Decide: serve 12 users at 8k context on one 24 GB card

Your team must serve **12 users at once, each with up to 8,192 tokens of context**, from **one RTX 4090**
(23.65 GiB to CUDA) running **Llama-3.1-8B** on **vLLM 0.32** (the release this course pins; its defaults: utilization 0.92,
256 sequences). The launch explorer below applies course_lib's estimate of vLLM's rule (within 10% on
published logs) and says how many 8k requests run at once; with every knob at its default, five do.

The explorer's figures are course_lib's estimate of vLLM's rule (within 10% on published logs), so a
launch counts as serving the 12 users only with that margin to spare: a maximum concurrency of at least
12 / 0.9 = 13.33x. A launch within 10% of 12 is answered *measure it* (start it and read vLLM's own
line), not promised; a launch that misses a stated requirement (8k context, 12 users, one card) serves
nobody. The levers: the weight format and the KV cache's dtype (the big ones), `max_num_seqs` (the
sampler's profile and the CUDA graphs captured), `gpu_memory_utilization`, `enforce_eager` (no CUDA
graphs at all) and `max_num_batched_tokens` (a smaller profile forward pass).

**Task R7** (three parts: a launch that starts with 8k context, serves 12, and a one-line reason). Set
`decision` to a launch that serves the 12 users, and `decision_reason` to one line saying why it does
(which pool your change shrinks or frees). The keys: `weights` (`"checkpoint"` for the published bf16
checkpoint, or `"fp8"`, `"int8"`, `"int4"` for a quantized one), `kv_cache_dtype` (`"auto"` or `"fp8"`),
`max_model_len` (tokens), `max_num_seqs` (slots), `gpu_memory_utilization` (a share of the total) and
`tensor_parallel` (GPUs); you may add `enforce_eager` (True: no CUDA graphs) and `max_num_batched_tokens`
(the tokens the profile's forward pass runs over).
""", "decision_intro")

code("""
# The launch explorer (a widget; the verdict line says how many 8k requests run at once)
from course_lib.vllm_explorer import launch_explorer, plan_launch
launch_explorer(model="llama-3.1-8b", gpu="rtx-4090", max_model_len=8192, users=12)
""", "decision_explorer")

solution("answer_decision", """
### BEGIN SOLUTION
decision = {"weights": "fp8", "kv_cache_dtype": "fp8", "max_model_len": 8192, "max_num_seqs": 16,
            "gpu_memory_utilization": 0.92, "tensor_parallel": 1}
decision_reason = ("an fp8 checkpoint halves the weights and an fp8 KV cache halves every request's cache, so the "
                   "pool holds 12 requests of 8k with room to spare")
### END SOLUTION
print(practice.show_launch(decision))   # the estimate of your launch; compare it with what the 12 users need
""")

test("test_decision", 3, "Task R7 · a launch that serves 12 users", """
practice.check_decision(decision, decision_reason)
""")

md("""
## Start-up time and offloading

A replica's start is in its log too (vLLM prints the weights' load time, the profile, and *Graph
capturing finished in N secs*), and offloading is the knob that trades device memory for PCIe time
(vLLM's `--cpu-offload-gb` moves `N × 1024³` bytes of decoder layers to the CPU, per GPU; its
`--kv-offloading-size` is GiB too, summed over the tensor-parallel ranks).

**Task R8** (three parts, one point each; every size here is in GB = 10^9 bytes, every rate in GB/s).
{grader_only}

**R8a.** `offload_seconds_per_step`: 10 GB of weights live in host memory and are streamed to the GPU
over PCIe Gen4 x16 (31.5 GB/s per direction, theoretical) for **every** decode step. How many seconds
does that add per step, at best?
""".format(grader_only=GRADER_ONLY), "loading_intro_runtime")

solution("answer_offload_step", """
### BEGIN SOLUTION
offload_seconds_per_step = 10e9 / 31.5e9
### END SOLUTION
print(f"{offload_seconds_per_step:.3f} s per decode step")
""")

test("test_offload_step", 1, "Task R8a · offloading cost per step", """
assert isinstance(offload_seconds_per_step, (int, float)), "offload_seconds_per_step should be a number of seconds"
""")

md("""
**R8b.** `replica_ready_seconds`: a new replica reads 14 GB of weights from a network disk at 2 GB/s,
copies them to the GPU at 25 GB/s, spends 4 s initialising the device, 20 s capturing CUDA graphs
and 8 s warming up. How many seconds after its process starts is it ready to serve?
""", "replica_intro")

solution("answer_replica_ready", """
### BEGIN SOLUTION
replica_ready_seconds = 14 / 2 + 14 / 25 + 4 + 20 + 8
### END SOLUTION
print(f"ready after {replica_ready_seconds:.2f} s")
""")

test("test_replica_ready", 1, "Task R8b · when a new replica is ready", """
assert isinstance(replica_ready_seconds, (int, float)), "replica_ready_seconds should be a number of seconds"
""")

md("""
**R8c.** `replica_unready_seconds`: the load balancer starts sending traffic to that replica **5 s after
its process starts** (its health check only asks whether the process is up). For how many seconds is
traffic sent to a replica that cannot serve it yet? (Use your R8b figure.)
""", "ready_intro")

solution("answer_unready", """
### BEGIN SOLUTION
replica_unready_seconds = replica_ready_seconds - 5
### END SOLUTION
print(f"{replica_unready_seconds:.2f} s of traffic to a replica that is not ready")
""")

test("test_unready", 1, "Task R8c · traffic before it is ready", """
assert isinstance(replica_unready_seconds, (int, float)), "replica_unready_seconds should be a number of seconds"
""")

md("""
The library's version of these ideas follows. It models **another replica** than R8b's: the lesson's
Llama-2-7B (13.48 GB in fp16) from a slower network disk, with its own initialisation, compile and
warm-up times, so its total is not your answer to R8b; its phases are the same kind.
""", "loading_demo_intro")

code("""
# The same ideas with the library: the readiness timeline and the cost of offloading (another replica than R8b's).
from course_lib.lessons.l14_04.demos import show_loading_and_offload
loading = show_loading_and_offload()
""", "loading_demo")

md("""
### Other runtimes size the pool differently

* **SGLang** gives the KV pool `mem_fraction_static` of the memory free at start, less what the weights
  took; from v0.5.3 its default fraction comes from a reserve heuristic by GPU size, and releases before
  it already had GPU-specific overrides (the H200 from April 2025, GPUs above 180 GB such as the B200
  from May 2025). Its heuristic reads nvidia-smi's total, not CUDA's.
* **TensorRT-LLM** gives the KV cache `free_gpu_memory_fraction` (0.9) of the memory **free** after the
  engine loads, not of the total; in 1.x its default PyTorch backend first runs a profiling pass and
  logs *Peak memory during memory usage profiling*, much as vLLM does.

`course-memory estimate --runtime sglang|trtllm` models both; the same caveat holds: estimates of each
runtime's rule, within 10% on published logs.
""", "other_runtimes")

md("""
## A real vLLM on your CPU

No GPU needed: vLLM has a CPU build, and it sizes its KV cache with the same code as on a GPU
(`vllm/v1/core/kv_cache_utils.py`). Here it runs a tiny Llama (4 layers, 2 KV heads of 32 dimensions,
bf16, random weights built on your machine) with **12 MiB** of KV cache (`kv_cache_memory_bytes`, so no
profiling pass decides the pool) and requests of **1,000 tokens** (`max_model_len`). On the CPU a block
holds **128 tokens** (the CPU platform's default; CUDA's is 16).

*Predict first* (ungraded: nothing here earns or loses points, and whether vLLM is installed never
matters): how many tokens will vLLM say its KV cache holds (`CPU KV cache size: N tokens`), and what
*Maximum concurrency for 1,000 tokens per request* will it print? Work it from the bytes per token,
the blocks the 12 MiB make, and the blocks one 1,000-token request takes (a partly filled block is still
a whole block). Then run the cell after it: where `vllm` imports in your kernel it starts vLLM for
real (20-40 s); elsewhere it shows a run recorded with this same code on vLLM 0.32's CPU build, and
says so. If vLLM's token count surprises you, compare it with the concurrency times 1,000.
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

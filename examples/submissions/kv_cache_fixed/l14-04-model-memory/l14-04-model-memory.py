"""L14.4 lab: separate fixed model memory from request-dependent KV-cache memory.

Run it where it lies. Beside the notebook (your workspace from `make lab`, or the release folder):

    python3 l14-04-model-memory.py

From the repository root:

    python3 labs/notebooks/level-14/l14-04-model-memory.py

Step 1: run it unchanged and record parts_gb and headroom_gb.
Step 2: predict which part changes if active_sequences doubles.
Step 3: change ONLY the line `active_sequences = 8` to `active_sequences = 16`.
Step 4: rerun and confirm that only kv_cache doubled and the workload no longer fits.
"""

import sys
from pathlib import Path

# In the repository (this file in labs/notebooks/level-14/) course_lib is the checkout's, three folders
# up; beside the notebook it is the one installed in your Python (the workspace's .venv), so nothing is added.
HERE = Path(__file__).resolve().parent
if HERE.parts[-3:] == ("labs", "notebooks", "level-14"):
    sys.path.insert(0, str(HERE.parents[2]))

from course_lib import GB, get_model, kv_cache_bytes_per_sequence, plan_budget

# ---- knobs --------------------------------------------------------------
active_sequences = 16          # sequences generating at the same time
device_gb = 24                # the lesson's simplified 24 GB device (10^9 bytes per GB)
weights_gb = 14               # Llama-2-7B in fp16: 6.74e9 params x 2 B = 13.48 GB, rounded up for buffers
workspace_gb = 2              # runtime workspace: activations and scratch
reserve_gb = 2                # safety reserve we never fill
model = "llama-2-7b"          # KV cache from a real 7B config: 32 layers x 32 KV heads x 128 dims
context_tokens = 1024         # tokens kept per sequence (prompt + generated)
kv_dtype = "fp16"             # 2 bytes per cached value
# --------------------------------------------------------------------------

# 2 (K and V) x 32 layers x 32 heads x 128 dims x 2 B = 524,288 B per token; x 1024 tokens = 0.537 GB
kv_per_sequence_bytes = kv_cache_bytes_per_sequence(get_model(model), context_tokens, kv_dtype)

budget = plan_budget(
    device_bytes=device_gb * GB,
    weights_bytes=weights_gb * GB,
    workspace_bytes=workspace_gb * GB,
    reserve_bytes=reserve_gb * GB,
    per_sequence_kv_bytes=kv_per_sequence_bytes,
    active_sequences=active_sequences,
)

parts_bytes = {name: budget.parts[name] for name in ("weights", "workspace", "reserve", "kv_cache")}
parts_gb = {name: round(size / GB, 3) for name, size in parts_bytes.items()}
headroom_gb = round(budget.headroom_bytes / GB, 3)

print(f"active_sequences = {active_sequences}")
print(f"kv_cache_per_sequence_gb = {kv_per_sequence_bytes / GB:.3f}  ({model}, {context_tokens} tokens, {kv_dtype})")
print(f"parts_bytes = {parts_bytes}")
print(f"parts_gb = {parts_gb}")
print(f"total_gb = {budget.used_bytes / GB:.3f} of device_gb = {device_gb}")
print(f"headroom_gb = {headroom_gb}")
print(f"max_active_sequences = {budget.max_active_sequences}")
if budget.fits:
    print(f"verdict: the workload fits with {budget.headroom_bytes / GB:.3f} GB to spare")
else:
    print(f"verdict: the workload does not fit: over the {device_gb} GB device by {-budget.headroom_bytes / GB:.3f} GB")

"""The lesson's scenario, written once: its device, its pools, its request traces.

The lesson's simplified device is 24 GB (10^9 bytes per GB) with 14 GB of weights,
2 GB of workspace and a 2 GB safety reserve, which leaves 6 GB for request-dependent
state. The KV cache is Llama-2-7B's in fp16: 2 (K and V) x 32 layers x 32 KV heads x
128 dims x 2 B = 524,288 B per token. The lab, the notebook, the simulator's
defaults and ``make demo`` all take these figures from here.

>>> lesson_budget().request_budget_bytes          # 24 - 14 - 2 - 2 GB
6000000000
>>> lesson_config().num_blocks                    # 6e9 // (16 tokens x 524,288 B)
715
"""

from __future__ import annotations

from .admission import AdmissionConfig, kv_config_for
from .budget import Budget, plan_budget
from ..errors import check_count
from .trace import Request, synthetic_trace

#: The lesson's device and fixed pools (24 GB - 14 - 2 - 2 = 6 GB for request-dependent state).
LESSON_GPU = "24GB"
LESSON_WEIGHTS = "14GB"
LESSON_WORKSPACE = "2GB"
LESSON_RESERVE = "2GB"
#: The lesson's model: Llama-2-7B, whose fp16 weights (6.74e9 x 2 B = 13.48 GB) round up to 14 GB.
LESSON_MODEL = "llama-2-7b"
#: Llama-2-7B, fp16: 2 x 32 layers x 32 KV heads x 128 dims x 2 B.
LESSON_KV_BYTES_PER_TOKEN = 524_288
LESSON_KV_SOURCE = "Llama-2-7B fp16 (the lesson's model)"
#: One request of 608 prompt + 512 new tokens = 1,120 tokens = 70 blocks = 0.587 GB:
#: 10 fit in the 715-block budget (700), an 11th (770) would cross it.
LESSON_PROMPT_TOKENS = 608
LESSON_MAX_NEW_TOKENS = 512

#: The lab's setting (labs/notebooks/level-14/l14-04-model-memory.py): 1,024 tokens per sequence,
#: 8 active sequences, and the one edit the lab asks for (8 -> 16).
LAB_CONTEXT_TOKENS = 1024
LAB_ACTIVE_SEQUENCES = 8
LAB_EDITED_SEQUENCES = 16


def lesson_budget() -> Budget:
    """The lesson's fixed pools on its 24 GB device, resolved once (no sequences yet)."""
    return plan_budget(device_bytes=LESSON_GPU, weights_bytes=LESSON_WEIGHTS, workspace_bytes=LESSON_WORKSPACE,
                       reserve_bytes=LESSON_RESERVE, per_sequence_kv_bytes=0)


def lesson_config(policy: str = "reserve-max", **rules: object) -> AdmissionConfig:
    """Admission on the lesson's 6 GB KV budget with Llama-2-7B's fp16 KV cache."""
    return kv_config_for(lesson_budget(), LESSON_KV_BYTES_PER_TOKEN, policy=policy, **rules)


def lesson_trace(count: int = 11) -> list[Request]:
    """The ten/eleven scenario: ``count`` identical requests (608 + 512 tokens) arriving at step 0."""
    return [Request(f"r{i}", 0, LESSON_PROMPT_TOKENS, LESSON_MAX_NEW_TOKENS, LESSON_MAX_NEW_TOKENS)
            for i in range(check_count("count", count, 1))]


def comparison_trace() -> list[Request]:
    """A chat-like load on the lesson device: outputs (~128 tokens) far below max_new_tokens (1,024)."""
    return synthetic_trace(400, seed=3, arrival_rate=0.1, prompt_tokens=(64, 512), max_new_tokens=1024,
                           mean_output_tokens=128)

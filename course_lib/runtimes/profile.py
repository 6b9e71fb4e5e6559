"""What a runtime's start-up profile allocates, term by term, for one GPU.

A serving runtime sizes its KV cache from what is left after a *profile run*: a dummy forward
pass at its batch limit and a dummy sampling step, run before the cache exists. This module
computes the terms that profile sees, the same for vLLM, SGLang and TensorRT-LLM:

==========================  ===========================================================================
term                        what it holds
==========================  ===========================================================================
stage weights               the parameters one GPU holds: its tensor-parallel share of its pipeline
                            stage's layers (vLLM's ``get_pp_indices``: the first stages take the extra
                            layers), the embedding on the first stage, the LM head on the last
load buffers                tensors loaded beside the weights: the rotary ``cos_sin_cache``
                            (``max_position x rotary_dim``), padded MoE tensors
forward peak                the widest point of a forward pass over ``tokens`` (the MLP: residual,
                            normed input, gate/up, the activation and the down projection's output;
                            an MoE layer's fused-MoE caches instead)
sampler peak                ``rows x vocab`` logits and what sampling them allocates
CUDA graphs                 the private memory pool of the captured graphs
==========================  ===========================================================================

Each constant that is not read from a runtime's source is *fitted* on the start-up logs in
``shared/reference/runtime-logs/`` (never on the held-out set in ``benchmarks/``) and says so.

Worked example (Qwen2-7B on one GPU, bf16, vLLM's 2,048-token profile): the MLP holds
2,048 x (3 x 3,584 + 3 x 18,944) x 2 B = 2,048 x 67,584 x 2 = 276,824,064 B at its peak.

>>> from course_lib.model.presets import get_model
>>> forward_peak_bytes(get_model("qwen2-7b"), 2048, tensor_parallel=1)
276824064
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..dtypes import get_dtype
from ..model.models import params_per_gpu_by_group
from ..model.quantization import WeightFormat
from ..model.spec import ModelSpec
from ..units import GiB, MiB

#: Parameter groups that live in the decoder layers (split across pipeline stages by layer).
LAYER_GROUPS = ("attention", "attention_kv", "mlp", "experts", "expert_bias", "shared_experts", "linear_attention",
                "router", "norms")

#: vLLM's fused-MoE kernel works through at most this many tokens at once
#: (``VLLM_FUSED_MOE_CHUNK_SIZE``, 32,768 in vllm/envs.py).
FUSED_MOE_CHUNK_TOKENS = 32_768

#: Bytes per logit the sampler holds at its peak, by sampling path (rows x vocab x this).
#: native: PyTorch top-k/top-p (``vllm/v1/sample/ops/topk_topp_sampler.py``, ``apply_top_k_top_p``) sorts the
#:   whole fp32 logits (values 4 B + int64 indices 8 B, plus the sort's double buffers), masks, softmaxes and
#:   scatters back, beside the bf16 logits and their fp32 copy. Fitted: 39.2 B on the visible T4 log (vLLM 0.8.2
#:   V0: 0.90 GiB for 192 x 128,256) and 38.5 B on the visible H100 gpt-oss log (0.11: 7.38 GiB for 1,024 x 201,088).
#: flashinfer: FlashInfer's top_k_top_p_sampling_from_logits keeps the bf16 logits (2 B), the fp32 copy (4 B),
#:   the top-k-masked logits (4 B) and their probabilities (4 B): 14 B, from the kernel's Python wrapper; the
#:   visible A100 log that prints "Using FlashInfer for top-p & top-k sampling" (0.10.1.1) leaves room for it.
SAMPLER_BYTES_PER_LOGIT = {"native": 39, "flashinfer": 14}


@dataclass(frozen=True)
class Stage:
    """One GPU's share of the model: pipeline stage ``index`` of ``stages``, tensor-parallel rank of ``tp``.

    layers: decoder layers on this stage. first / last: whether it holds the embedding / the LM head.
    """

    index: int
    stages: int
    tp: int
    layers: int
    total_layers: int

    @property
    def first(self) -> bool:
        return self.index == 0

    @property
    def last(self) -> bool:
        return self.index == self.stages - 1

    @property
    def layer_share(self) -> float:
        return self.layers / self.total_layers if self.total_layers else 1.0


def stage_layers(num_layers: int, pipeline_parallel: int) -> list[int]:
    """Decoder layers per pipeline stage, as vLLM's ``get_pp_indices`` splits them (vllm/distributed/utils.py).

    Each stage gets ``layers // pp``; the remainder goes one each to the stages just before the last,
    counting back from it (the last one also runs the LM head): 27 layers over 2 stages are 14 + 13,
    61 over 4 are 15 + 15 + 16 + 15.

    >>> stage_layers(27, 2), stage_layers(32, 4), stage_layers(61, 4)
    ([14, 13], [8, 8, 8, 8], [15, 15, 16, 15])
    """
    per = num_layers // pipeline_parallel
    parts = [per] * pipeline_parallel
    for i in range(2, num_layers % pipeline_parallel + 2):
        parts[-i] += 1
    return parts


def stages(spec: ModelSpec, tensor_parallel: int = 1, pipeline_parallel: int = 1) -> list[Stage]:
    """The GPUs of one model replica, one :class:`Stage` per pipeline stage (tensor-parallel ranks are alike)."""
    n = max(1, spec.num_layers)
    return [Stage(i, pipeline_parallel, tensor_parallel, layers, n)
            for i, layers in enumerate(stage_layers(n, pipeline_parallel))]


def stage_weight_bytes(spec: ModelSpec, fmt: WeightFormat, stage: Stage) -> int:
    """Weights one GPU of ``stage`` holds, in ``fmt``: its layers' share, the embedding first, the LM head last.

    Tied embeddings are one tensor on one stage; with several stages the last one holds its own copy
    as the LM head (vLLM loads the embedding weights into it).
    """
    by_group = params_per_gpu_by_group(spec, stage.tp)
    total = 0
    for group, count in by_group.items():
        if group in LAYER_GROUPS:
            count = math.ceil(count * stage.layer_share)
        elif group in ("embedding", "position_embedding", "vision"):
            count = count if stage.first else 0
        elif group == "lm_head":
            count = count if stage.last else 0
        total += fmt.dtype_for(group).bytes_for(count)
    if spec.tie_word_embeddings and stage.stages > 1 and stage.last and not stage.first:
        total += fmt.dtype_for("lm_head").bytes_for(by_group.get("embedding", 0))
    return total


def offloaded_bytes(spec: ModelSpec, fmt: WeightFormat, stage: Stage, cpu_offload_gib: float) -> int:
    """Weights ``--cpu-offload-gb`` moves to the CPU on one GPU: at most that many GiB, of the decoder layers only.

    vLLM's ``maybe_offload_to_cpu`` (vllm/model_executor/models/utils.py) wraps each decoder layer made by
    ``make_layers`` and moves its parameters to pinned CPU memory until ``cpu_offload_gb * 1024**3`` bytes are
    offloaded: the value is GiB ("the space in GiB to offload to CPU, per GPU"), and the embedding and the LM
    head stay on the GPU. SGLang took the same helper (``cpu_offload_gb``). Qwen3-14B at TP 2 with 48 GiB asked:
    every layer goes and the two vocabulary shards (151,936 x 5,120 / 2 x 2 B each, 1.45 GiB together) stay;
    a published SGLang log of that launch loads "mem usage=1.50 GB" (SGLang's GB are GiB).
    """
    if cpu_offload_gib <= 0:
        return 0
    by_group = params_per_gpu_by_group(spec, stage.tp)
    layers = sum(fmt.dtype_for(group).bytes_for(math.ceil(count * stage.layer_share))
                 for group, count in by_group.items() if group in LAYER_GROUPS)
    return min(layers, int(cpu_offload_gib * GiB))


def rotary_cache_bytes(spec: ModelSpec, value_bytes: int = 4) -> int:
    """The rotary embedding's ``cos_sin_cache``: ``max_position x rotary_dim`` values (vLLM computes it in fp32).

    Gemma-3 keeps two (local and global RoPE bases). MLA ropes only its 64-dim part; no rope (GPT-2,
    OPT's learned positions) keeps none. Qwen2-7B: 131,072 x 128 x 4 B = 67,108,864 B, which is the
    difference between the visible A100 log's "Model loading took 14.2488 GiB" and the 14.185 GiB of
    parameters.
    """
    if spec.model_type in ("gpt2", "opt") or not spec.max_position_embeddings:
        return 0
    dim = 64 if spec.attention == "mla" else spec.head_dim
    caches = 2 if spec.model_type.startswith("gemma3") else 1
    return caches * min(spec.max_position_embeddings, 1 << 20) * dim * value_bytes


def forward_peak_bytes(spec: ModelSpec, tokens: int, tensor_parallel: int = 1, act_dtype: str = "bf16",
                       moe_chunk_tokens: int = FUSED_MOE_CHUNK_TOKENS) -> int:
    """The widest point of one forward pass over ``tokens`` on one GPU, in activation bytes.

    A dense layer peaks while its down projection writes: the residual and the normed input
    (2 x hidden), gate/up (2 x intermediate / TP), the activation (intermediate / TP) and the down
    output (hidden), plus one more hidden for the all-reduce's output under TP. An MoE layer holds
    the fused-MoE kernel's three caches instead, per routed token (``tokens x top_k``): gate/up,
    the activation and the expert outputs (vLLM's ``fused_moe``: intermediate_cache1/2/3), for at
    most :data:`FUSED_MOE_CHUNK_TOKENS` tokens at a time, and the fp32 router logits.

    >>> from course_lib.model.presets import get_model
    >>> forward_peak_bytes(get_model("llama-3.1-8b"), 8192) == 8192 * (3 * 4096 + 3 * 14336) * 2
    True
    """
    b = int(get_dtype(act_dtype).bytes_per_value)
    h, tp = spec.hidden_size, tensor_parallel
    extra_h = h if tp > 1 else 0
    dense = tokens * (3 * h + 3 * math.ceil(spec.intermediate_size / tp) + extra_h) * b
    if not spec.num_experts:
        return dense
    moe_i = _moe_intermediate(spec)
    chunk = min(tokens, moe_chunk_tokens)
    routed = chunk * spec.num_experts_per_tok
    moe = (tokens * (2 * h + extra_h) * b + routed * (3 * math.ceil(moe_i / tp) + h) * b
           + tokens * spec.num_experts * 4)
    # dense layers of an MoE model (DeepSeek's first layers) use intermediate_size
    return max(moe, dense if spec.params.get("mlp") else 0)


def _moe_intermediate(spec: ModelSpec) -> int:
    """One expert's intermediate width, from the experts' parameter count (3 matrices of hidden x width each)."""
    experts = spec.params.get("experts", 0)
    per_layer_expert = experts / max(1, spec.num_layers * spec.num_experts)
    return max(1, round(per_layer_expert / (3 * spec.hidden_size))) if experts else spec.intermediate_size


def sampler_peak_bytes(rows: int, vocab_size: int, path: str = "native") -> int:
    """What the profile's dummy sampling step holds: ``rows x vocab`` logits x :data:`SAMPLER_BYTES_PER_LOGIT`.

    vLLM's profile samples one row per dummy request (``min(max_num_seqs, max_num_batched_tokens)``
    rows) with top-k and top-p on (``_dummy_sampler_run``), so this is often the largest term:
    1,024 rows of Llama-3's 128,256 logits on the native path are 1,024 x 128,256 x 39 B = 4.77 GiB.

    >>> round(sampler_peak_bytes(1024, 128256) / 2**30, 2)
    4.77
    """
    return rows * vocab_size * SAMPLER_BYTES_PER_LOGIT[path]


def cuda_graph_bytes(graphs: int, layers: int, mib_per_graph_layer: float) -> int:
    """The captured graphs' private pool: about ``graphs x layers x mib_per_graph_layer`` MiB.

    Each captured batch size records every layer's kernels with its own intermediate buffers; the
    constant per graph and layer is fitted per runtime version (see the runtime modules).
    """
    return round(graphs * layers * mib_per_graph_layer * MiB)

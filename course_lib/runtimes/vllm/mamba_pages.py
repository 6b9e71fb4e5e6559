"""How vLLM pages a hybrid model's recurrent state: state shapes and dtypes, ``MambaSpec`` pages, the attention block.

Read in vLLM 0.33.0 (and 0.29.0-0.32.0 where said):

* ``vllm/model_executor/layers/mamba/mamba_utils.py`` (``MambaStateShapeCalculator``), the shapes of one
  layer's state on one GPU (``num_spec`` speculative tokens add conv rows; 0 here):

  =====================  ==============================================  ====================================
  layer                  conv state                                      temporal / recurrent state
  =====================  ==============================================  ====================================
  Mamba-2 (Nemotron-H)   ``(intermediate + 2 n_groups state) x (k - 1)``  ``heads x head_dim x state``
  short conv (LFM2)      ``hidden x (L_cache - 1)``                      (none)
  Gated DeltaNet         ``(2 k_heads d_k + v_heads d_v) x (k - 1)``      ``v_heads x d_k x d_v``
  KDA (Kimi-Linear)      ``(heads d + 2 k_heads d_k) x (k - 1)``          ``heads x d x d``
  =====================  ==============================================  ====================================

* The dtypes (``MambaStateDtypeCalculator``): the conv state in the model's dtype; the temporal state in
  ``mamba_ssm_cache_dtype``, whose ``"auto"`` is the model's dtype, except that KDA's ``"auto"`` is float32
  (``kda_state_dtype``). ``model_executor/models/config.py`` fills ``"auto"`` per family: Qwen3.5 takes its
  config's ``mamba_ssm_dtype`` (``Qwen3_5ForConditionalGenerationConfig``, "float32" in Qwen's configs),
  Nemotron-H its config's ``mamba_ssm_cache_dtype`` or float32 (``NemotronHForCausalLMConfig``); both read the same
  in 0.29.0, 0.32.0 and 0.33.0 (:func:`ssm_cache_dtype`).
* ``vllm/v1/kv_cache_interface.py`` ``MambaSpec.page_size_bytes``: the sum of ``prod(shape) x dtype bytes``,
  padded to ``page_size_padded``; a request holds 1 page, under ``mamba_cache_mode='align'`` (prefix caching on)
  ``2 + num_speculative_blocks + num_prefill_checkpoint_blocks`` (``max_memory_usage_bytes``). A Mamba-2 layer
  holds one checkpoint page from 0.32.0 (``mamba_mixer2.py`` ``get_kv_cache_spec``: ``num_prefill_checkpoint_blocks=1``;
  0.29.0-0.31.0 have no override), a Gated DeltaNet layer from 0.33.0 where its prefill runs FlashInfer's kernel
  (``gdn/qwen_gdn_linear_attn.py:689-749``), with a 64-token checkpoint alignment
  (``v1/attention/backends/gdn_attn.py`` ``FLASHINFER_GDN_CHECKPOINT_ALIGNMENT``). The release table's
  ``mamba_checkpoint`` row carries which (:data:`course_lib.runtimes.vllm.releases.CHANGES`).
* ``vllm/platforms/interface.py`` ``_align_hybrid_block_size`` (0.33.0:940-1136, run by
  ``update_block_size_for_backend`` after the model is built): the attention block grows to
  ``align x cdiv(state page, align x attention bytes a token)`` with ``align = max(kernel unit, block_size)``,
  **raised to 128 for an MLA hybrid** ("TRTLLM/FlashInfer MLA decode kernels require ... 128"; the same in 0.29.0,
  0.30.0, 0.31.0 and 0.32.0), and, in 0.33.0 only, to the lcm with the layers' prefill checkpoint alignment
  under ``mamba_cache_mode='align'``; then rounded up to the lcm of every attention backend's smallest kernel
  block; the Mamba page is padded to the attention page. :func:`hybrid_block_size_033` is this rule, and
  :func:`.kv_groups.hybrid_block_size` the estimate's name for it.

Worked examples (bf16 model, fp32 SSM where vLLM takes it):

* Qwen3.5-27B (GDN 48 v-heads, 16 k-heads, d 128, kernel 4; fp32 SSM; 4 KV heads of 256): state
  30,720 x 2 + 786,432 x 4 = 3,207,168 B; an attention token 4,096 B; 16 x cdiv(3,207,168, 65,536) = 784 on an
  A100 (Triton's GDN prefill); on an H100 in 0.33 FlashInfer's prefill aligns to lcm(16, 64) = 64:
  64 x cdiv(3,207,168, 262,144) = 832.
* Kimi-Linear-48B (KDA 32 heads of 128, kernel 4; MLA 576 a token; KDA's fp32 state): 36,864 x 2 +
  524,288 x 4 = 2,170,880 B; with the MLA floor 128 x cdiv(2,170,880, 128 x 1,152) = 1,920.

>>> gdn = gated_delta_net_state(k_heads=16, v_heads=48, d_k=128, d_v=128, conv_kernel=4)
>>> page_bytes(gdn, conv_bytes=2, ssm_bytes=4), hybrid_block_size_033(16, 16, 4096, 3_207_168)
(3207168, 784)
>>> hybrid_block_size_033(16, 16, 4096, 3_207_168, checkpoint_alignment=64)
832
>>> kda = kda_state(heads=32, head_dim=128, conv_kernel=4)
>>> page_bytes(kda, conv_bytes=2, ssm_bytes=4), hybrid_block_size_033(16, 16, 1152, 2_170_880, mla=True)
(2170880, 1920)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping


def cdiv(a: int, b: int) -> int:
    """Ceiling division, vLLM's ``cdiv``."""
    return -(-a // b)


@dataclass(frozen=True)
class StateShapes:
    """One layer's state on one GPU: the conv state's and the temporal state's shapes (``()`` when absent)."""

    conv: tuple[int, ...]
    temporal: tuple[int, ...] = ()

    @property
    def conv_values(self) -> int:
        return math.prod(self.conv) if self.conv else 0

    @property
    def temporal_values(self) -> int:
        return math.prod(self.temporal) if self.temporal else 0


def mamba2_state(*, intermediate: int, n_groups: int, heads: int, head_dim: int, state: int, conv_kernel: int,
                 tensor_parallel: int = 1) -> StateShapes:
    """``mamba2_state_shape`` (n_groups extended to the TP degree when it does not divide it).

    >>> s = mamba2_state(intermediate=10240, n_groups=8, heads=128, head_dim=80, state=128, conv_kernel=4)
    >>> s.conv_values, s.temporal_values        # Nemotron-Nano-9B-v2
    (36864, 1310720)
    """
    tp = tensor_parallel
    groups = n_groups + (0 if n_groups % tp == 0 else tp - n_groups)     # extra_groups_for_head_shards
    conv_dim = intermediate + 2 * groups * state
    return StateShapes((conv_dim // tp, conv_kernel - 1), (heads // tp, head_dim, state))


def short_conv_state(*, hidden: int, l_cache: int, tensor_parallel: int = 1) -> StateShapes:
    """``short_conv_state_shape`` (LFM2: ``conv_L_cache`` is the kernel).

    >>> short_conv_state(hidden=2048, l_cache=3).conv_values
    4096
    """
    return StateShapes((hidden // tensor_parallel, l_cache - 1))


def gated_delta_net_state(*, k_heads: int, v_heads: int, d_k: int, d_v: int, conv_kernel: int,
                          tensor_parallel: int = 1) -> StateShapes:
    """``gated_delta_net_state_shape`` (Qwen3-Next, Qwen3.5)."""
    tp = tensor_parallel
    conv_dim = 2 * k_heads * d_k + v_heads * d_v
    return StateShapes((conv_dim // tp, conv_kernel - 1), (v_heads // tp, d_k, d_v))


def kda_state(*, heads: int, head_dim: int, conv_kernel: int, k_heads: int | None = None,
              d_k: int | None = None, tensor_parallel: int = 1) -> StateShapes:
    """``kda_state_shape`` (Kimi-Linear): one conv state over q, k and v, a ``d x d`` state per head."""
    tp = tensor_parallel
    conv_dim = heads * head_dim + 2 * (k_heads or heads) * (d_k or head_dim)
    return StateShapes((conv_dim // tp, conv_kernel - 1), (heads // tp, head_dim, head_dim))


def page_bytes(shapes: StateShapes, *, conv_bytes: int, ssm_bytes: int) -> int:
    """``MambaSpec.page_size_bytes`` before padding: conv values in the model's dtype, temporal in the SSM dtype."""
    return shapes.conv_values * conv_bytes + shapes.temporal_values * ssm_bytes


def hybrid_block_size_033(block_size: int, kernel_block_multiple: int | None, attention_bytes_per_token: int,
                          state_page_bytes: int, *, mla: bool = False, checkpoint_alignment: int | None = None,
                          backend_alignment: int | None = None) -> int:
    """vLLM 0.33's ``_align_hybrid_block_size``: the attention block whose page holds one layer's state.

    ``checkpoint_alignment``: ``get_mamba_prefill_checkpoint_alignment`` under ``mamba_cache_mode='align'``
    (None otherwise); ``backend_alignment``: the lcm of every attention backend's smallest kernel block
    (default: the kernel unit).

    >>> hybrid_block_size_033(16, 16, 2048, 1_097_728)        # Qwen3-Next-80B, bf16: as 0.32
    544
    """
    if not state_page_bytes or not attention_bytes_per_token:
        return block_size
    align = max(kernel_block_multiple or 1, block_size)
    if mla:
        align = max(align, 128)
    if checkpoint_alignment:
        align = math.lcm(align, checkpoint_alignment)
    block = align * cdiv(state_page_bytes, align * attention_bytes_per_token)
    unit = backend_alignment or kernel_block_multiple or 1
    block = unit * cdiv(block, unit)
    return max(block_size, block)


#: model_type -> the recurrent layer vLLM 0.33 builds for it (``model_executor/models/qwen3_next.py``,
#: ``qwen3_5.py``: Gated DeltaNet; ``nemotron_h.py``: ``MambaMixer2``; ``lfm2.py``/``lfm2_moe.py``: ``ShortConv``;
#: Kimi-Linear: KDA, ``models/kimi_k3``).
STATE_KINDS = {"qwen3_next": "gdn", "qwen3_5": "gdn", "qwen3_5_text": "gdn", "qwen3_5_moe": "gdn",
               "qwen3_5_moe_text": "gdn", "nemotron_h": "mamba2", "lfm2": "short_conv", "lfm2_moe": "short_conv",
               "kimi_linear": "kda"}

#: ``v1/attention/backends/gdn_attn.py`` (0.33.0:34): FlashInfer's GDN prefill checkpoints every 64 tokens.
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64

#: GPU presets by compute capability, for ``_resolve_gdn_prefill_backend`` (``gdn/qwen_gdn_linear_attn.py``
#: 0.33.0:148-268): FlashInfer's GDN prefill on SM90 always, on SM10x/SM12x with ``head_k_dim == 128`` and a CUDA 13
#: runtime (0.33.0 pins torch 2.14.0 and ``nvidia-cutlass-dsl[cu13]``: taken as CUDA 13); Triton elsewhere.
SM90_GPUS = frozenset({"h100-80gb", "h200", "gh200", "h20"})
SM100_SM120_GPUS = frozenset({"b200", "rtx-5090", "gb10"})


def state_kind(model_type: str) -> str | None:
    """The recurrent layer vLLM builds for ``model_type`` (None: not one read here).

    >>> state_kind("qwen3_5_moe_text"), state_kind("nemotron_h"), state_kind("mamba")
    ('gdn', 'mamba2', None)
    """
    return STATE_KINDS.get(model_type)


def ssm_cache_dtype(model_type: str, declared: str | None, model_dtype: str) -> str:
    """The dtype vLLM stores one layer's temporal (SSM) state in, with ``--mamba-ssm-cache-dtype`` left at "auto".

    ``declared``: what the config names (Qwen3.5's ``mamba_ssm_dtype``, Nemotron-H's ``mamba_ssm_cache_dtype``).

    >>> ssm_cache_dtype("qwen3_5_text", "float32", "bf16"), ssm_cache_dtype("qwen3_next", None, "bf16")
    ('float32', 'bf16')
    >>> ssm_cache_dtype("nemotron_h", None, "bf16"), ssm_cache_dtype("kimi_linear", None, "bf16")
    ('float32', 'float32')
    """
    if model_type.startswith("qwen3_5"):
        return declared or model_dtype          # Qwen3_5ForConditionalGenerationConfig.verify_and_update_config
    if model_type == "nemotron_h":
        return declared or "float32"            # NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE
    if state_kind(model_type) == "kda":
        return "float32"                        # kda_state_dtype: 'auto' -> torch.float32
    return model_dtype                          # _mamba_state_dtype: 'auto' -> the conv state's dtype


def gdn_prefill_backend(gpu: str, platform: str, head_k_dim: int = 128) -> str:
    """"flashinfer" or "triton": the GDN prefill kernel vLLM 0.33 picks with ``gdn_prefill_backend`` "auto".

    >>> gdn_prefill_backend("h100-80gb", "cuda"), gdn_prefill_backend("a100-80gb", "cuda"), gdn_prefill_backend("mi300x", "rocm")
    ('flashinfer', 'triton', 'triton')
    """
    if platform != "cuda":
        return "triton"
    if gpu in SM90_GPUS or (gpu in SM100_SM120_GPUS and head_k_dim == 128):
        return "flashinfer"
    return "triton"


@dataclass(frozen=True)
class StatePaging:
    """One recurrent layer's page as vLLM sizes it, and what a request holds of it.

    kind: "gdn", "mamba2", "short_conv", "kda" or "state" (a model_type not read here: the model's dtype, no
    checkpoint). page_bytes: ``MambaSpec.page_size_bytes`` before padding. ssm_dtype: the temporal state's dtype.
    checkpoint_alignment: the prefill checkpoint's token alignment the attention block is lcm'd with (None: none).
    request_pages: pages one request holds in ``mamba_cache_mode='align'`` (2 + a checkpoint page).
    """

    kind: str
    page_bytes: int
    ssm_dtype: str
    checkpoint_alignment: int | None
    request_pages: int


def state_paging(kind: str | None, *, conv_values: int, temporal_values: int, conv_bytes: float, ssm_bytes: float,
                 ssm_dtype: str, checkpoint: Mapping[str, int], gdn_backend: str = "triton") -> StatePaging:
    """The :class:`StatePaging` of one layer with ``conv_values`` + ``temporal_values`` (one GPU's share).

    ``checkpoint``: the release's ``mamba_checkpoint`` row (which layers keep a prefill checkpoint page in 'align'
    mode, and the alignment it needs); ``gdn_backend``: :func:`gdn_prefill_backend`.

    >>> state_paging("gdn", conv_values=30_720, temporal_values=786_432, conv_bytes=2, ssm_bytes=4,
    ...              ssm_dtype="float32", checkpoint={"mamba2": 1, "gdn-flashinfer": 64}, gdn_backend="flashinfer")
    StatePaging(kind='gdn', page_bytes=3207168, ssm_dtype='float32', checkpoint_alignment=64, request_pages=3)
    """
    key = "gdn-flashinfer" if kind == "gdn" and gdn_backend == "flashinfer" else (kind or "state")
    page = math.ceil(conv_values * conv_bytes + temporal_values * ssm_bytes)
    if key in checkpoint:
        align = checkpoint[key]
        return StatePaging(kind or "state", page, ssm_dtype, align if align > 1 else None, 3)
    return StatePaging(kind or "state", page, ssm_dtype, None, 2)

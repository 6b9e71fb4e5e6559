"""How vLLM 0.33 pages a hybrid model's recurrent state: state shapes, ``MambaSpec`` page bytes, the attention block.

Read in vLLM 0.33.0:

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

* ``vllm/v1/kv_cache_interface.py`` ``MambaSpec.page_size_bytes``: the sum of ``prod(shape) x dtype bytes``
  (conv in the model's dtype, the temporal state in ``mamba_ssm_cache_dtype``; Qwen3.5 takes its config's
  ``mamba_ssm_dtype``, ``model_executor/models/config.py``), padded to ``page_size_padded``; a request holds
  1 page (2 under ``mamba_cache_mode='align'``, + speculative blocks) whatever its length.
* ``vllm/platforms/interface.py`` ``_align_hybrid_block_size``: the attention block grows to
  ``align x cdiv(state page, align x attention bytes a token)`` with ``align = max(kernel unit, block_size)``,
  **raised to 128 for an MLA hybrid** ("TRTLLM/FlashInfer MLA decode kernels require ... 128"), and to the
  lcm with the prefill checkpoint alignment under ``mamba_cache_mode='align'``; then rounded up to the
  lcm of every attention backend's smallest kernel block; the Mamba page is padded to the attention page.
  :func:`hybrid_block_size_033` is this rule; the estimate's :func:`.kv_groups.hybrid_block_size` is
  0.32's, without the MLA floor (noted in benchmarks/results/families-2026.md).

Worked examples (bf16 model, fp32 SSM where the config says so):

* Qwen3.5-27B (GDN 48 v-heads, 16 k-heads, d 128, kernel 4; fp32 SSM; 4 KV heads of 256): state
  30,720 x 2 + 786,432 x 4 = 3,207,168 B; an attention token 4,096 B; 16 x cdiv(3,207,168, 65,536) = 784.
* Kimi-Linear-48B (KDA 32 heads of 128, kernel 4; MLA 576 a token; bf16 state): 36,864 x 2 + 524,288 x 2 =
  1,122,304 B; with the MLA floor 128 x cdiv(1,122,304, 128 x 1,152) = 1,024 (0.32's rule: 976).

>>> gdn = gated_delta_net_state(k_heads=16, v_heads=48, d_k=128, d_v=128, conv_kernel=4)
>>> page_bytes(gdn, conv_bytes=2, ssm_bytes=4), hybrid_block_size_033(16, 16, 4096, 3_207_168)
(3207168, 784)
>>> kda = kda_state(heads=32, head_dim=128, conv_kernel=4)
>>> page_bytes(kda, conv_bytes=2, ssm_bytes=2), hybrid_block_size_033(16, 16, 1152, 1_122_304, mla=True)
(1122304, 1024)
"""

from __future__ import annotations

import math
from dataclasses import dataclass


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

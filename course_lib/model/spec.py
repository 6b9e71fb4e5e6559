"""What memory depends on in a model: :class:`ModelSpec`, with one cache entry per layer.

A layer keeps one of two kinds of per-sequence state:

* :class:`LayerCache`: attention keys/values, which grow with every token
  (up to the window of a sliding-window or chunked layer);
* :class:`LayerState`: a linear-attention / state-space layer's recurrent
  state and convolution state, which are the same size at token 1 and at
  token 100,000: they grow with active sequences, not with tokens.

Worked example (a Gated DeltaNet layer of Qwen3-Next-80B-A3B: 32 value heads,
key and value head dims 128, a 4-wide causal convolution over 2 x 16 x 128 +
32 x 128 = 8,192 channels): the recurrent state is 32 x 128 x 128 = 524,288
values; the convolution keeps the last 3 inputs, 3 x 8,192 = 24,576 values.

>>> s = LayerState(recurrent_values=32 * 128 * 128, conv_values=3 * 8192, heads=32)
>>> s.recurrent_values, s.conv_values
(524288, 24576)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

# Parameter groups and how tensor parallelism treats them (vLLM's layout):
#   sharded    - split across the N GPUs (column/row-parallel linears, vocab-parallel embeddings)
#   kv         - key/value projections: split by KV head, replicated once N > kv_heads
#   replicated - every GPU holds a full copy (norms, MoE routers, learned position tables)
SHARDED_GROUPS = ("embedding", "lm_head", "attention", "mlp", "experts", "expert_bias", "shared_experts",
                  "linear_attention", "vision")
KV_GROUPS = ("attention_kv",)
REPLICATED_GROUPS = ("norms", "router", "position_embedding")


@dataclass(frozen=True)
class LayerCache:
    """What one attention layer caches per token.

    values_per_token: cached values for one token in this layer, for the whole
        model width (``2 x kv_heads x head_dim`` for MHA/GQA/MQA; ``kv_lora_rank
        + qk_rope_head_dim`` for MLA, which caches one compressed latent, no 2x).
    window: the most tokens this layer ever keeps: a sliding window, or the
        chunk of chunked attention (Llama-4); ``None`` for full attention.
    kv_heads: KV heads the values are split over (0 for MLA, whose latent is
        not split by head and is replicated on every tensor-parallel GPU).
    """

    values_per_token: int
    window: int | None = None
    kv_heads: int = 0

    def cached_tokens(self, tokens: int) -> int:
        """Tokens this layer holds for a sequence of ``tokens``: min(tokens, window)."""
        return tokens if self.window is None else min(tokens, self.window)

    def values_per_token_per_gpu(self, tensor_parallel: int) -> int:
        """Values per token on one GPU; KV heads are split, but never below one head."""
        if self.kv_heads == 0 or tensor_parallel == 1:
            return self.values_per_token
        per_head = self.values_per_token // self.kv_heads
        return per_head * max(1, self.kv_heads // tensor_parallel)


@dataclass(frozen=True)
class LayerState:
    """What one linear-attention (Gated DeltaNet, Mamba-like) layer keeps per sequence.

    recurrent_values: the recurrent state, e.g. ``value_heads x key_dim x value_dim``.
    conv_values: the causal convolution's state: the last ``kernel - 1`` inputs
        of every channel (what vLLM keeps per sequence).
    heads: heads both are split over under tensor parallelism.
    ssm_dtype: the dtype the config names for the recurrent state (Qwen3.5's ``mamba_ssm_dtype``,
        Nemotron-H's ``mamba_ssm_cache_dtype``), or None where it names none; a runtime decides what it stores.
    """

    recurrent_values: int
    conv_values: int
    heads: int = 1
    ssm_dtype: str | None = field(default=None, repr=False)

    def per_gpu(self, values: int, tensor_parallel: int) -> int:
        """``values`` on one GPU: split by head, never below one head."""
        if tensor_parallel == 1 or self.heads <= 1:
            return values
        return values // self.heads * max(1, self.heads // tensor_parallel)


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a decoder-only model, as memory sees it.

    params: parameter count by group (see SHARDED_GROUPS / KV_GROUPS /
        REPLICATED_GROUPS); ``params_total`` is their sum, counted as transformers
        counts ``model.parameters()`` (a tied weight once, no buffers).
    buffers: persistent buffers by group: tensors the checkpoint stores and
        serving loads that are not parameters (DeepSeek-V3's router
        ``e_score_correction_bias``, Gemma-4's per-layer ``layer_scalar``);
        ``buffers_total`` is their sum. They belong in the weight bytes.
    layers: one :class:`LayerCache` per attention layer, in order.
    states: one :class:`LayerState` per linear-attention layer (hybrids).
    not_loaded: parameters the checkpoint holds that serving does not load by
        default (DeepSeek-V3's multi-token-prediction layer), by group.
    counted: what the weights count, in words (text model, vision tower, ...).
    quantization: how the checkpoint stores its weights (dtype, quantization_config).
    checkpoint: the bytes a model folder's safetensors hold, when read from one.
    vision_config: a multimodal model's vision tower settings (what a runtime's profile runs it on).
    architectures / resolved_by: the config's ``architectures`` and how its formula was chosen from them or
        from ``model_type`` (see :mod:`course_lib.model.architectures`).
    The remaining fields are the config's dimensions, with uniform names.
    """

    name: str
    model_type: str
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    params: Mapping[str, int]
    layers: tuple[LayerCache, ...]
    tie_word_embeddings: bool = False
    attention: str = "gqa"  # mha, gqa, mqa, mla, or none (no layer caches K/V)
    num_experts: int = 0
    num_experts_per_tok: int = 0
    max_position_embeddings: int | None = None
    torch_dtype: str | None = None
    notes: tuple[str, ...] = field(default=())
    states: tuple[LayerState, ...] = field(default=())
    not_loaded: Mapping[str, int] = field(default_factory=dict)
    counted: tuple[str, ...] = field(default=())
    quantization: Any = None   # a course_lib.model.quantization.WeightFormat: the checkpoint's storage format
    checkpoint: Any = None     # a course_lib.model.checkpoint.Checkpoint: bytes read from the safetensors headers
    vision_config: Mapping[str, Any] = field(default_factory=dict)   # a multimodal model's tower, as configured
    buffers: Mapping[str, int] = field(default_factory=dict)
    architectures: tuple[str, ...] = ()   # the config's architectures list, as given
    resolved_by: str = ""                 # how the family formula was chosen (architectures, then model_type)

    @property
    def params_total(self) -> int:
        """Every parameter serving loads (tied embeddings counted once; buffers apart)."""
        return sum(self.params.values())

    @property
    def buffers_total(self) -> int:
        """Values of the persistent buffers serving loads beside the parameters."""
        return sum(self.buffers.values())

    @property
    def sliding_window_layers(self) -> int:
        """Layers whose cache is capped by a window (sliding or chunked attention)."""
        return sum(1 for layer in self.layers if layer.window is not None)

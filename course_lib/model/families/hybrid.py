"""Hybrid decoders: Gated DeltaNet (linear attention) layers between full-attention layers.

qwen3_next (MoE) and qwen3_5_text / qwen3_5_moe_text. ``layer_types`` (by default 3
``linear_attention`` layers, then one ``full_attention``) says which is which.

Memory: a full-attention layer caches K and V per token, as usual. A linear
attention layer keeps a fixed-size state per sequence whatever its length:
the recurrent state ``value_heads x key_head_dim x value_head_dim`` and the
causal convolution's last ``kernel - 1`` inputs of ``2 x key_dim + value_dim``
channels (see :class:`course_lib.model.spec.LayerState`).

Worked example, Qwen3-Next-80B-A3B (48 layers, 36 of them linear): one linear
layer keeps 32 x 128 x 128 = 524,288 recurrent values and 3 x (2 x 16 x 128 +
32 x 128) = 24,576 conv values, at any sequence length.

>>> from course_lib.model.presets import get_model
>>> spec = get_model("qwen3-next-80b-a3b")
>>> len(spec.states), len(spec.layers), spec.states[0]
(36, 12, LayerState(recurrent_values=524288, conv_values=24576, heads=32))
"""

from __future__ import annotations

from ..spec import LayerState, ModelSpec
from .moe import _qwen_moe_layers
from .parts import Params, add, attention, caches, embeddings, finish, gated_mlp, kv_heads_and_head_dim, layer_types
from .reader import ATTENTION_LAYER_TYPES, STATE_LAYER_TYPES, Config


def qwen3_hybrid(c: Config, name: str) -> ModelSpec:
    mt = c.model_type
    has_moe = mt in ("qwen3_next", "qwen3_5_moe_text")
    hidden = c.width("hidden_size")
    n = c.layers("num_hidden_layers")
    heads = c.width("num_attention_heads")
    kv_heads, head_dim = kv_heads_and_head_dim(c, hidden, heads, kv_default=4 if mt == "qwen3_5_text" else 2,
                                               head_dim_default=256)
    inter = c.width("intermediate_size", default=None) if has_moe else c.width("intermediate_size")
    vocab = c.width("vocab_size")
    tied = c.flag("tie_word_embeddings", False)
    interval = c.layers("full_attention_interval", default=4)
    types = layer_types(c, n, ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(n)],
                        valid=ATTENTION_LAYER_TYPES + STATE_LAYER_TYPES)
    full = [t for t in types if t != "linear_attention"]
    n_linear = n - len(full)

    # Full attention: a gated q (q_proj is 2 x heads x head_dim wide), per-head q/k norms.
    bias = c.flag("attention_bias", False)
    q_and_o, k_and_v = attention(hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                                 q_bias=bias, kv_bias=bias, o_bias=bias, q_mult=2)
    # Gated DeltaNet: in_proj (q, k, v, z, b, a), a depthwise conv, dt_bias, A_log, a gated norm, out_proj.
    kernel = c.width("linear_conv_kernel_dim", default=4)
    dk = c.width("linear_key_head_dim", default=128)
    dv = c.width("linear_value_head_dim", default=128)
    nk = c.width("linear_num_key_heads", default=16)
    nv = c.width("linear_num_value_heads", default=32)
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    linear = hidden * (2 * key_dim + 2 * value_dim + 2 * nv) + conv_dim * kernel + 2 * nv + value_dim * hidden

    params: Params = {}
    embeddings(params, vocab, hidden, tied)
    add(params, "attention", len(full) * q_and_o)
    add(params, "attention_kv", len(full) * k_and_v)
    add(params, "linear_attention", n_linear * linear)
    add(params, "norms", len(full) * 2 * head_dim + n_linear * dv + n * 2 * hidden + hidden)
    experts = top_k = 0
    if has_moe:
        experts = c.width("num_experts", default=512 if mt == "qwen3_next" else 256, minimum=0)
        top_k = c.width("num_experts_per_tok", default=10 if mt == "qwen3_next" else 8, minimum=0)
        moe_inter = c.width("moe_intermediate_size", default=512)
        shared = c.width("shared_expert_intermediate_size", default=512, minimum=0)
        is_moe = _qwen_moe_layers(c, n, experts) if mt == "qwen3_next" else [True] * n
        moe_layers = sum(is_moe)
        if n - moe_layers and inter is None:
            raise c.refuse("lacks 'intermediate_size' (needed by its dense, non-MoE layers)")
        add(params, "mlp", (n - moe_layers) * gated_mlp(hidden, inter or 0))
        add(params, "experts", moe_layers * experts * gated_mlp(hidden, moe_inter))
        add(params, "shared_experts", moe_layers * gated_mlp(hidden, shared))
        add(params, "router", moe_layers * (experts * hidden + hidden))     # gate + shared_expert_gate
    else:
        add(params, "mlp", n * gated_mlp(hidden, inter))

    sliding = c.optional_width("sliding_window")
    windows = [sliding if t == "sliding_attention" else None for t in full]
    state = LayerState(recurrent_values=nv * dk * dv, conv_values=(kernel - 1) * conv_dim, heads=nv,
                       ssm_dtype=c.cfg.get("mamba_ssm_dtype"))     # Qwen3.5's configs say "float32"
    mtp = c.layers("mtp_num_hidden_layers", "num_nextn_predict_layers", default=0, minimum=0)
    notes = (f"mtp_num_hidden_layers={mtp}: the checkpoint's multi-token-prediction layers are not counted; "
             f"serving loads them only for MTP speculative decoding",) if mtp else ()
    return finish(c, name=name, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, layers=n,
                  intermediate=inter or c.width("moe_intermediate_size", default=512), vocab=vocab,
                  params=params, tied=tied, cache=caches(kv_heads, head_dim, windows),
                  states=[state] * n_linear, num_experts=experts, num_experts_per_tok=top_k, notes=notes)

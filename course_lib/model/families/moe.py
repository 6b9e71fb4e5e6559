"""Mixture-of-experts decoders: mixtral, phimoe, qwen2_moe, qwen3_moe, gpt_oss, llama4_text.

An MoE layer replaces the one MLP with ``E`` expert MLPs and a router
(``E x hidden``); some families add an always-on shared expert. Every expert
sits in memory even though each token uses only ``num_experts_per_tok`` of
them, so the weights pool counts all ``E``.

Worked example, Mixtral-8x7B: one MoE block is 8 experts x 3 x 4,096 x 14,336
(1,409,286,144) + a 8 x 4,096 router (32,768), so 32 layers of it hold
45,097,156,608 + 1,048,576 of the 46,702,792,704 parameters.

>>> from course_lib.model.presets import get_model
>>> spec = get_model("mixtral-8x7b")
>>> spec.params["experts"], spec.params["router"]
(45097156608, 1048576)
"""

from __future__ import annotations

from ..spec import ModelSpec
from .parts import (Params, add, attention, embeddings, finish, gated_mlp, kv_heads_and_head_dim,
                    layer_types, sliding_window, types_to_windows)
from .reader import Config


def _qwen_moe_layers(c: Config, n: int, experts: int) -> list[bool]:
    """Qwen2/3-MoE, Qwen3-Next: MoE unless in mlp_only_layers, every decoder_sparse_step-th layer."""
    only_mlp = set(c.layer_list("mlp_only_layers", n) or [])
    step = c.layers("decoder_sparse_step", default=1)
    return [i not in only_mlp and experts > 0 and (i + 1) % step == 0 for i in range(n)]


def moe(c: Config, name: str) -> ModelSpec:
    """The MoE families: shared layout, family switches read from the model_type."""
    mt = c.model_type
    hidden = c.width("hidden_size")
    n = c.layers("num_hidden_layers")
    heads = c.width("num_attention_heads")
    kv_default = {"qwen3_moe": 4, "qwen2_moe": 16}.get(mt, 8)
    head_dim_default = {"gpt_oss": 64, "llama4_text": 128}.get(mt)
    kv_heads, head_dim = kv_heads_and_head_dim(c, hidden, heads, kv_default=kv_default,
                                               head_dim_default=head_dim_default)
    inter = c.width("intermediate_size")
    vocab = c.width("vocab_size")
    tied = c.flag("tie_word_embeddings", False)
    if mt in ("mixtral",):
        q_bias = kv_bias = o_bias = False
    elif mt == "qwen2_moe":
        q_bias = kv_bias = c.flag("qkv_bias", True)
        o_bias = False
    else:
        q_bias = kv_bias = o_bias = c.flag("attention_bias", mt == "gpt_oss")
    q_and_o, k_and_v = attention(hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                                 q_bias=q_bias, kv_bias=kv_bias, o_bias=o_bias)
    params: Params = {}
    embeddings(params, vocab, hidden, tied, lm_head_bias=mt == "phimoe" and c.flag("lm_head_bias", False))
    add(params, "attention", n * q_and_o)
    add(params, "attention_kv", n * k_and_v)
    norm = 2 * hidden if mt == "phimoe" else hidden        # PhiMoE uses LayerNorm with bias
    qk_norm = 2 * head_dim if mt == "qwen3_moe" else 0
    add(params, "norms", n * (2 * norm + qk_norm) + norm)
    if mt == "gpt_oss":
        add(params, "attention", n * heads)                # attention sinks: one learned logit per head

    experts_key = {"qwen2_moe": "num_experts", "qwen3_moe": "num_experts"}.get(mt, "num_local_experts")
    experts = c.width(experts_key, "num_experts", "num_local_experts",
                      default={"mixtral": 8, "phimoe": 16, "qwen2_moe": 60, "qwen3_moe": 128,
                               "gpt_oss": 128, "llama4_text": 16}[mt], minimum=0 if mt.startswith("qwen") else 1)
    top_k = c.width("num_experts_per_tok", default={"mixtral": 2, "phimoe": 2, "qwen2_moe": 4, "qwen3_moe": 8,
                                                   "gpt_oss": 4, "llama4_text": 1}[mt], minimum=0)
    if mt in ("qwen2_moe", "qwen3_moe"):
        is_moe = _qwen_moe_layers(c, n, experts)
        moe_inter = c.width("moe_intermediate_size", default=1408 if mt == "qwen2_moe" else 768)
    elif mt == "llama4_text":
        step = c.layers("interleave_moe_layer_step", default=1)
        listed = c.layer_list("moe_layers", n)
        chosen = set(listed) if listed is not None else set(range(step - 1, n, step))
        is_moe = [i in chosen for i in range(n)]
        moe_inter = inter
    else:
        is_moe = [True] * n
        moe_inter = inter
    moe_layers = sum(is_moe)
    dense_inter = c.width("intermediate_size_mlp", default=16384) if mt == "llama4_text" else inter
    add(params, "mlp", (n - moe_layers) * gated_mlp(hidden, dense_inter))
    if mt == "gpt_oss":                                    # gate_up and down with biases, router with bias
        add(params, "experts", moe_layers * experts * 3 * hidden * moe_inter)
        add(params, "expert_bias", moe_layers * experts * (2 * moe_inter + hidden))   # stay bf16 under mxfp4
        add(params, "router", moe_layers * (experts * hidden + experts))
    else:
        add(params, "experts", moe_layers * experts * gated_mlp(hidden, moe_inter))
        add(params, "router", moe_layers * experts * hidden)
    if mt == "qwen2_moe":                                  # shared expert + its 1 x hidden sigmoid gate
        shared = c.width("shared_expert_intermediate_size", default=5632, minimum=0)
        add(params, "shared_experts", moe_layers * gated_mlp(hidden, shared))
        add(params, "router", moe_layers * hidden)
    if mt == "llama4_text":
        add(params, "shared_experts", moe_layers * gated_mlp(hidden, inter))

    # Windows, per family
    if mt == "gpt_oss":
        window = sliding_window(c, 128)
        default_types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    elif mt == "llama4_text":
        window = c.optional_width("attention_chunk_size") if "attention_chunk_size" in c.cfg else 8192
        interval = c.layers("no_rope_layer_interval", default=4)
        no_rope = c.cfg.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(n)]
        if not isinstance(no_rope, list) or len(no_rope) != n or any(x not in (0, 1) or isinstance(x, bool) for x in no_rope):
            raise c.refuse(f"no_rope_layers must be a list of {n} zeros and ones")
        default_types = ["chunked_attention" if r and window is not None else "full_attention" for r in no_rope]
    elif mt == "qwen2_moe":
        use = c.flag("use_sliding_window", False)
        window = sliding_window(c, 4096) if use else None
        first = c.layers("max_window_layers", default=28, minimum=0)
        default_types = ["sliding_attention" if (i + 1) % 2 and i < first and use else "full_attention"
                         for i in range(n)]
    else:
        default = None
        if mt == "qwen3_moe":
            window = sliding_window(c, 4096) if c.flag("use_sliding_window", False) else None
        else:
            window = sliding_window(c, default)
        default_types = ["sliding_attention" if window is not None else "full_attention"] * n
    types = layer_types(c, n, default_types)
    windows = types_to_windows(types, window, chunk=window)
    return finish(c, name=name, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, layers=n,
                  intermediate=inter, vocab=vocab, params=params, tied=tied, windows=windows,
                  num_experts=experts, num_experts_per_tok=top_k)

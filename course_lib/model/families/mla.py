"""DeepSeek-V2 and -V3: multi-head latent attention (MLA) and DeepSeekMoE.

MLA caches one compressed latent per token per layer: ``kv_lora_rank``
values plus the shared rotary key (``qk_rope_head_dim``): no 2x, no per-head
copies. 128 heads of DeepSeek-V3 would cache 2 x 128 x 128 = 32,768 values
per token per layer as ordinary attention; the latent is 512 + 64 = 576.

Layers before ``first_k_dense_replace`` use a dense MLP; the rest have
``n_routed_experts`` routed experts, one shared MLP of
``n_shared_experts x moe_intermediate_size`` and a router (``gate``). V3's
router adds ``e_score_correction_bias`` (one value per expert): a persistent
buffer in transformers, not a parameter, but a tensor of the checkpoint that
serving loads, so it is in ``spec.buffers`` (and the weight bytes), not in
``params``.

DeepSeek-V3 ships ``num_nextn_predict_layers`` multi-token-prediction (MTP)
layers in its checkpoint. Serving loads them only for MTP speculative decoding,
so they are not in ``params`` but in ``spec.not_loaded["mtp"]``.

>>> from course_lib.model.presets import get_model
>>> v3 = get_model("deepseek-v3")
>>> v3.layers[0].values_per_token           # 512 + 64
576
>>> v3.params_total, v3.buffers_total       # transformers' count of the "671B", and 58 x 256 router biases
(671026404352, 14848)
>>> v3.not_loaded["mtp"]                    # the checkpoint's multi-token-prediction layer
13463426304

Parameters, buffers and the MTP layer add to 684,489,845,504; the model
card's "685B" also counts the fp8 checkpoint's ``weight_scale_inv`` tensors
(one per 128 x 128 block, ~41 M).
"""

from __future__ import annotations

from ..spec import LayerCache, ModelSpec
from .parts import Params, add, embeddings, finish, gated_mlp
from .reader import Config


def _mla_attention(c: Config, hidden: int, heads: int) -> tuple[int, int, int, int]:
    """(attention, attention_kv, norms, cached values per token) of one MLA layer."""
    kv_lora = c.width("kv_lora_rank", default=512)
    rope = c.width("qk_rope_head_dim", default=64)
    nope = c.width("qk_nope_head_dim", default=128)
    v_head = c.width("v_head_dim", default=128)
    # q_lora_rank: absent means transformers' default 1536; an explicit null means no q compression
    q_lora = c.optional_width("q_lora_rank") if "q_lora_rank" in c.cfg else 1536
    b = 1 if c.flag("attention_bias", False) else 0
    q_head = nope + rope
    norms = kv_lora                                               # kv_a_layernorm
    if q_lora is None:
        q = hidden * heads * q_head                               # q_proj (no bias)
    else:
        q = hidden * q_lora + b * q_lora + q_lora * heads * q_head  # q_a_proj, q_b_proj
        norms += q_lora                                           # q_a_layernorm
    attn = q + heads * v_head * hidden + b * hidden + kv_lora * heads * (nope + v_head)   # + o_proj, kv_b_proj
    attn_kv = hidden * (kv_lora + rope) + b * (kv_lora + rope)     # kv_a_proj_with_mqa
    return attn, attn_kv, norms, kv_lora + rope


def deepseek(c: Config, name: str) -> ModelSpec:
    v3 = c.model_type == "deepseek_v3"
    hidden = c.width("hidden_size")
    n = c.layers("num_hidden_layers")
    heads = c.width("num_attention_heads")
    vocab = c.width("vocab_size")
    inter = c.width("intermediate_size")
    attn, attn_kv, attn_norms, latent = _mla_attention(c, hidden, heads)
    routed = c.width("n_routed_experts", default=256 if v3 else 64, minimum=0)
    shared = c.width("n_shared_experts", default=1 if v3 else 2, minimum=0)
    first_dense = c.layers("first_k_dense_replace", default=3 if v3 else 0, minimum=0)
    moe_inter = c.width("moe_intermediate_size", default=2048 if v3 else 1407)
    freq = c.layers("moe_layer_freq", default=1)                 # V2's custom code; 1 in every release
    mlp_bias = (not v3) and c.flag("mlp_bias", False)
    moe_layers = sum(1 for i in range(n) if i >= first_dense and i % freq == 0) if routed else 0
    tied = c.flag("tie_word_embeddings", False)

    def moe_block() -> Params:
        block: Params = {}
        add(block, "experts", routed * gated_mlp(hidden, moe_inter))
        add(block, "shared_experts", gated_mlp(hidden, moe_inter * shared, mlp_bias) if shared else 0)
        add(block, "router", routed * hidden)                           # gate.weight
        return block

    router_bias = routed if v3 else 0                                   # gate.e_score_correction_bias (a buffer)

    params: Params = {}
    embeddings(params, vocab, hidden, tied)
    add(params, "attention", n * attn)
    add(params, "attention_kv", n * attn_kv)
    add(params, "mlp", (n - moe_layers) * gated_mlp(hidden, inter, mlp_bias))
    for group, count in moe_block().items():
        add(params, group, moe_layers * count)
    add(params, "norms", n * (2 * hidden + attn_norms) + hidden)
    buffers: Params = {}
    add(buffers, "router", moe_layers * router_bias)

    not_loaded: dict[str, int] = {}
    notes: tuple[str, ...] = ()
    mtp = c.layers("num_nextn_predict_layers", default=0, minimum=0) if v3 else 0
    if mtp:
        # Each MTP module: enorm, hnorm, eh_proj (2h -> h), one MoE decoder layer, and its own copies of
        # the embedding and the head (shared_head.norm + shared_head.head), as the checkpoint stores them.
        layer = attn + attn_kv + sum(moe_block().values()) + router_bias + 2 * hidden + attn_norms
        not_loaded["mtp"] = mtp * (2 * vocab * hidden + 2 * hidden * hidden + 3 * hidden + layer)
        notes = (f"num_nextn_predict_layers={mtp}: the checkpoint's multi-token-prediction weights "
                 f"({not_loaded['mtp']:,} params) are not counted; serving loads them only for MTP "
                 f"speculative decoding",)
    cache = tuple(LayerCache(latent) for _ in range(n))
    return finish(c, name=name, hidden=hidden, heads=heads,
                  kv_heads=c.width("num_key_value_heads", default=heads),
                  head_dim=c.width("qk_nope_head_dim", default=128) + c.width("qk_rope_head_dim", default=64),
                  layers=n, intermediate=inter, vocab=vocab, params=params, tied=tied, cache=cache,
                  attention="mla", num_experts=routed,
                  num_experts_per_tok=c.width("num_experts_per_tok", default=8 if v3 else 0, minimum=0),
                  not_loaded=not_loaded, notes=notes, buffers=buffers)

"""Gemma 4: per-layer head sizes, KV sharing across layers, per-layer input embeddings, optional MoE.

What makes Gemma-4's memory different from Gemma-3's:

* global (full-attention) layers use ``global_head_dim`` (512 by default)
  and, with ``attention_k_eq_v``, ``num_global_key_value_heads`` KV heads and
  no v_proj (the values are the normed keys; the cache still holds both);
* the last ``num_kv_shared_layers`` layers reuse the KV cache of the last
  earlier layer of their type: they have no k/v projections and cache nothing;
* per-layer embeddings (``hidden_size_per_layer_input``): one extra
  ``vocab_size_per_layer_input x (layers x hidden_size_per_layer_input)`` table;
* ``enable_moe_block`` adds a router and experts beside the dense MLP.

Worked example, the KV cache of a 30-layer Gemma-4 text model with the class
defaults (8 q / 4 KV heads, head_dim 256, global_head_dim 512, layers 5, 11,
17, 23, 29 global): 25 sliding layers cache 2 x 4 x 256 = 2,048 values per
token, 5 global layers 2 x 4 x 512 = 4,096.

>>> from course_lib.model.families import build
>>> from course_lib.model.families.reader import Config
>>> spec = build(Config({"model_type": "gemma4_text", "hidden_size": 2304, "intermediate_size": 9216,
...     "num_hidden_layers": 30, "num_attention_heads": 8, "vocab_size": 262144}), "g4")
>>> sorted({(l.values_per_token, l.window) for l in spec.layers})
[(2048, 512), (4096, None)]
"""

from __future__ import annotations

from dataclasses import replace

from ..spec import LayerCache, ModelSpec
from .parts import Params, add, embeddings, finish, gated_mlp, layer_types
from .reader import Config


def _per_layer_overrides(c: Config, n: int) -> dict[int, dict[str, int]] | None:
    """``per_layer_config`` as published: {"05": {"head_dim": 512}, ...}; ``None`` when absent.

    Absent, Gemma4TextConfig gives every full-attention layer ``global_head_dim`` (and, with
    ``attention_k_eq_v``, ``num_global_key_value_heads``); given, even empty, exactly its overrides apply.
    """
    given = c.cfg.get("per_layer_config")
    if given is None:
        return None
    if not isinstance(given, dict):
        raise c.refuse("per_layer_config is not a JSON object of layer index -> settings")
    out: dict[int, dict[str, int]] = {}
    for key, value in given.items():
        index = key if isinstance(key, int) and not isinstance(key, bool) else \
            int(key) if isinstance(key, str) and key.isascii() and key.isdigit() and len(key) < 8 else None
        if index is None or index >= n:
            raise c.refuse(f"per_layer_config has the entry {str(key)[:20]!r}; use layer indices 0 to {n - 1}")
        if not isinstance(value, dict):
            raise c.refuse(f"per_layer_config[{key!r}]={value!r:.40} is not a JSON object of settings "
                           f"(head_dim, num_key_value_heads)")
        named = Config({f"per_layer_config[{key!r}].{k}": v for k, v in value.items() if isinstance(k, str)},
                       c.model_type)
        out[index] = {k: named.width(f"per_layer_config[{key!r}].{k}")
                      for k in ("head_dim", "num_key_value_heads") if value.get(k) is not None}
    return out


def gemma4_text(c: Config, name: str) -> ModelSpec:
    hidden = c.width("hidden_size")
    n = c.layers("num_hidden_layers")
    heads = c.width("num_attention_heads")
    kv_default = c.width("num_key_value_heads", default=4)
    head_dim = c.width("head_dim", default=256)
    global_head_dim = c.width("global_head_dim", default=512)
    k_eq_v = c.flag("attention_k_eq_v", False)
    global_kv = c.optional_width("num_global_key_value_heads")
    inter = c.width("intermediate_size")
    vocab = c.width("vocab_size", default=262144)
    tied = c.flag("tie_word_embeddings", True)
    bias = c.flag("attention_bias", False)
    window = c.optional_width("sliding_window") if "sliding_window" in c.cfg else 512
    if c.text("use_bidirectional_attention", None, ("all", "vision")) == "all" and window is not None:
        window = window // 2 + 1
    types = layer_types(c, n, ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)])
    types[-1] = "full_attention"                    # Gemma4TextConfig forces the last layer global
    shared = c.layers("num_kv_shared_layers", default=0, minimum=0)
    if shared > n:
        raise c.refuse(f"num_kv_shared_layers={shared} exceeds num_hidden_layers={n}")
    first_shared = n - shared
    if shared and shared < n and set(types[:first_shared]) != set(types):
        raise c.refuse("the layers sharing a KV cache need an earlier layer of each of their types")
    overrides = _per_layer_overrides(c, n)
    double_wide = c.flag("use_double_wide_mlp", False)
    per_layer_dim = c.width("hidden_size_per_layer_input", default=256, minimum=0)
    moe_block = c.flag("enable_moe_block", False)
    if moe_block:
        experts = c.width("num_experts")
        moe_inter = c.width("moe_intermediate_size")
        top_k = c.width("top_k_experts", default=experts)
    else:
        experts = top_k = moe_inter = 0

    params: Params = {}
    buffers: Params = {}
    embeddings(params, vocab, hidden, tied)
    cache: list[LayerCache] = []
    for i, t in enumerate(types):
        full = t == "full_attention"
        if overrides is None:              # the config class's default overrides: full layers go global
            hd = global_head_dim if full else head_dim
            kv = global_kv if full and k_eq_v and global_kv else kv_default
        else:
            hd = overrides.get(i, {}).get("head_dim", head_dim)
            kv = overrides.get(i, {}).get("num_key_value_heads", kv_default)
        if heads % kv:
            raise c.refuse(f"layer {i}: {kv} KV heads must divide num_attention_heads={heads}")
        b = 1 if bias else 0
        add(params, "attention", 2 * hidden * heads * hd + b * (heads * hd + hidden))   # q_proj, o_proj
        add(params, "norms", hd + 4 * hidden)            # q_norm, four layer norms
        add(buffers, "norms", 1)                         # layer_scalar: an nn.Buffer, stored in the checkpoint
        is_shared = i >= first_shared
        if not is_shared:
            has_v = not (k_eq_v and full)
            add(params, "attention_kv", (1 + has_v) * (hidden * kv * hd + b * kv * hd))
            add(params, "norms", hd)                     # k_norm (v_norm has no scale)
            cache.append(LayerCache(2 * kv * hd, window if t == "sliding_attention" else None, kv))
        add(params, "mlp", gated_mlp(hidden, inter * (2 if double_wide and is_shared else 1)))
        if per_layer_dim:                                # per_layer_input_gate, per_layer_projection, norm
            add(params, "embedding", 2 * hidden * per_layer_dim)
            add(params, "norms", hidden)
        if moe_block:
            add(params, "experts", experts * gated_mlp(hidden, moe_inter))
            add(params, "router", experts * hidden + hidden + experts)   # proj, scale, per_expert_scale
            add(params, "norms", 3 * hidden)
    add(params, "norms", hidden)
    if per_layer_dim:
        vocab_pl = c.width("vocab_size_per_layer_input", default=262144)
        add(params, "embedding", vocab_pl * n * per_layer_dim + n * per_layer_dim * hidden)
        add(params, "norms", per_layer_dim)
    spec = finish(c, name=name, hidden=hidden, heads=heads, kv_heads=kv_default, head_dim=head_dim, layers=n,
                  intermediate=inter, vocab=vocab, params=params, tied=tied, cache=cache,
                  num_experts=experts, num_experts_per_tok=top_k, buffers=buffers)
    if shared:
        spec = replace(spec, notes=spec.notes + (
            f"the last {shared} layers reuse earlier layers' KV cache: {len(cache)} of {n} layers cache K/V",))
    return spec


# ------------------------------------------------------------------ towers

def _clip_buffers(v: Config, linears: int, default: bool) -> int:
    """use_clipped_linears: four scalar clamp bounds per linear (``nn.Buffer``), saved with the checkpoint."""
    return 4 * linears if v.flag("use_clipped_linears", default) else 0


def gemma4_vision_params(v: Config, text_hidden: int) -> tuple[int, int]:
    """(parameters, persistent buffers) of the vision tower and its projector."""
    h = v.width("hidden_size", default=768)
    i = v.width("intermediate_size", default=3072)
    layers = v.layers("num_hidden_layers", default=16)
    heads = v.width("num_attention_heads", default=12)
    kv = v.width("num_key_value_heads", default=12)
    hd = v.width("head_dim", default=64)
    patch = v.width("patch_size", default=16)
    positions = v.width("position_embedding_size", default=10 * 1024)
    total = 3 * patch * patch * h + 2 * positions * h                # input_proj, position_embedding_table
    per_layer = 2 * h * heads * hd + 2 * h * kv * hd + 2 * hd + 3 * h * i + 4 * h
    total += layers * per_layer
    buffers = layers * _clip_buffers(v, 7, False)
    if v.flag("standardize", False):
        buffers += 2 * h                                             # std_bias, std_scale (buffers)
    return total + h * text_hidden, buffers                          # + embed_vision.embedding_projection


def gemma4_audio_params(a: Config, text_hidden: int) -> tuple[int, int]:
    """(parameters, persistent buffers) of the audio tower and its projector."""
    h = a.width("hidden_size", default=1024)
    layers = a.layers("num_hidden_layers", default=12)
    heads = a.width("num_attention_heads", default=8)
    kernel = a.width("conv_kernel_size", default=5)
    out = a.width("output_proj_dims", default=1536)
    channels = a.cfg.get("subsampling_conv_channels", [128, 32])
    if not (isinstance(channels, list) and len(channels) == 2):
        raise a.refuse("subsampling_conv_channels must be a list of two channel counts")
    c0, c1 = (Config({f"subsampling_conv_channels[{i}]": ch}, a.model_type).width(f"subsampling_conv_channels[{i}]")
              for i, ch in enumerate(channels))
    hd = h // heads
    total = c0 * 9 + c0 + c1 * c0 * 9 + c1 + (c0 // 4) * c1 * h      # two 3x3 convs + LayerNorms, input_proj
    feed_forward = 2 * (2 * 4 * h * h + 2 * h)                       # two macaron FFNs, pre/post norms each
    attn = hd + 4 * h * heads * hd + h * heads * hd                  # per_dim_scale, q, k, v, post, relative_k
    light_conv = 2 * h * h + h * h + h * kernel + 2 * h              # linear_start, linear_end, depthwise, norms
    total += layers * (feed_forward + attn + light_conv + 3 * h)
    buffers = layers * _clip_buffers(a, 10, True)
    return total + h * out + out + out * text_hidden, buffers        # + output_proj, embed_audio projection


def gemma4(c: Config, name: str) -> ModelSpec:
    """Gemma-4 multimodal: the text decoder, plus the vision and audio towers its config describes."""
    text = c.sub("text_config")
    if text is None:
        raise c.refuse("lacks 'text_config' (the language model's settings); add it to config.json")
    text_cfg = dict(text.cfg, tie_word_embeddings=c.flag("tie_word_embeddings", True))
    spec = gemma4_text(Config(text_cfg, "gemma4_text"), name)
    params, buffers = dict(spec.params), dict(spec.buffers)
    counted = ["text decoder (gemma4_text)"]
    for key, words, tower in (("vision_config", "vision tower + projector", gemma4_vision_params),
                              ("audio_config", "audio tower + projector", gemma4_audio_params)):
        sub = c.sub(key)
        if sub is None:
            counted.append(f"no {key}")
            continue
        count, tower_buffers = tower(sub, spec.hidden_size)
        add(params, "vision", count)
        add(buffers, "vision", tower_buffers)
        counted.append(f"{words}: {count:,} params" + (f" + {tower_buffers:,} buffer values" if tower_buffers else ""))
    return replace(spec, model_type=c.model_type, params=params, buffers=buffers, counted=tuple(counted))

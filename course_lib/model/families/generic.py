"""A family without a formula: the KV cache from the common config keys, marked approximate.

The parameter count comes from ``--params N`` or from the checkpoint's
safetensors (see :mod:`course_lib.model.checkpoint`); the KV cache from
``num_hidden_layers``, ``num_key_value_heads`` and ``head_dim`` (or
``hidden_size / num_attention_heads``), with ``sliding_window`` and
``layer_types`` when given. A nested ``text_config`` is read when the top
level has no ``hidden_size``. What this misses (shared KV layers, per-layer
head sizes) is why the result says "approximate".

A config that shows what the common keys cannot describe is refused instead
(:data:`NOT_COMMON`): an MLA latent or a sparse-attention indexer key (each
layer caches ``kv_lora_rank + qk_rope_head_dim`` (+ ``index_head_dim``), not
2 x heads x head_dim: DeepSeek-V3.2 read as 128-head attention is 20x too
big), or recurrent layers (a Mamba or linear-attention layer caches a fixed
state, not K/V per token: a hybrid read as all-attention is 8x too big).
transformers, when installed, builds those on the meta device instead.

>>> spec = generic(Config({"model_type": "newfamily", "hidden_size": 1024, "num_hidden_layers": 8,
...                        "num_attention_heads": 8}), "m", 1_234_567_890, None)
>>> spec.params_total, spec.layers[0].values_per_token      # 2 x 8 heads x 128
(1234567890, 2048)
>>> generic(Config({"model_type": "newmla", "hidden_size": 1024, "num_hidden_layers": 8,
...                 "num_attention_heads": 8, "kv_lora_rank": 512}), "m", 10**9, None, "transformers is not installed")
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: config (model_type='newmla'): kv_lora_rank is set (multi-head latent attention: each layer caches a compressed latent), so the common keys would give a wrong KV cache; transformers is not installed
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..spec import ModelSpec
from .parts import caches, finish, kv_heads_and_head_dim, sliding_window, types_to_windows
from .reader import ATTENTION_LAYER_TYPES, Config


#: Config keys the common-keys reading cannot describe, and what each means for the cache.
NOT_COMMON = (
    (("kv_lora_rank", "qk_rope_head_dim"), "multi-head latent attention: each layer caches a compressed latent"),
    (("index_head_dim", "index_n_heads", "index_topk"), "a sparse-attention indexer: each layer also caches its key"),
    (("mamba_d_state", "mamba_n_heads", "ssm_state_size", "state_size", "mamba_expand", "attn_layer_indices",
      "attn_layer_period", "hybrid_override_pattern", "layers_block_type", "linear_num_value_heads",
      "full_attention_interval", "conv_kernel", "linear_conv_kernel_dim"),
     "recurrent (Mamba / linear-attention) layers: they keep a fixed state, not K/V per token"),
)


def _refuse_uncommon(c: Config, reason: str) -> None:
    for keys, what in NOT_COMMON:
        key = next((k for k in keys if c.cfg.get(k) is not None), None)
        if key is not None:
            raise c.refuse(f"{key} is set ({what}), so the common keys would give a wrong KV cache; {reason}")
    types = c.cfg.get("layer_types")
    if isinstance(types, list):
        odd = next((t for t in types if t not in ATTENTION_LAYER_TYPES), None)
        if odd is not None:
            raise c.refuse(f"layer_types holds {odd!r:.40} (a layer that is not attention keeps a fixed state, "
                           f"not K/V per token), so the common keys would give a wrong KV cache; {reason}")


def generic(c: Config, name: str, params_total: int | None, checkpoint: Any,
            reason: str = "transformers is not installed to build it") -> ModelSpec:
    """The common-keys estimate; ``reason`` says why the model was not built on the meta device instead."""
    top = c
    _refuse_uncommon(c, reason)
    if not c.has("hidden_size") and not c.has("n_embd") and c.sub("text_config") is not None:
        c = c.sub("text_config")
        _refuse_uncommon(c, reason)
    hidden = c.width("hidden_size", "n_embd", "d_model")
    layers = c.layers("num_hidden_layers", "n_layer", "num_layers")
    heads = c.width("num_attention_heads", "n_head", "num_heads")
    kv_heads, head_dim = kv_heads_and_head_dim(c, hidden, heads)
    types = c.layer_types(layers, ATTENTION_LAYER_TYPES) or ["sliding_attention"] * layers
    window = sliding_window(c, None)
    windows = types_to_windows(types, window, c.optional_width("attention_chunk_size"))
    if params_total is not None:
        params = {"given": params_total}
        why = "parameter count given explicitly; tensor parallelism treats it as fully sharded"
    else:
        # Elements stored; with only the index, its bytes at 2 B per parameter (a 16-bit checkpoint).
        params = {"given": checkpoint.params if checkpoint.params else max(1, checkpoint.total_bytes // 2)}
        why = (f"model_type={top.model_type!r} has no formula here: the weights are the checkpoint's "
               f"{checkpoint.total_bytes:,} bytes ({checkpoint.source})")
    notes = (why, "approximate: the KV cache is read from the common config keys (num_hidden_layers, "
                  "num_key_value_heads, head_dim, sliding_window); MLA, shared-KV or per-layer head sizes "
                  "would make it wrong")
    spec = finish(c, name=name, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, layers=layers,
                  intermediate=c.width("intermediate_size", default=4 * hidden),
                  vocab=c.width("vocab_size", default=1), params=params,
                  tied=c.flag("tie_word_embeddings", False), cache=caches(kv_heads, head_dim, windows),
                  notes=notes)
    return replace(spec, model_type=top.model_type)

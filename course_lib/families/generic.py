"""A family without a formula: the KV cache from the common config keys, marked approximate.

The parameter count comes from ``--params N`` or from the checkpoint's
safetensors (see :mod:`course_lib.checkpoint`); the KV cache from
``num_hidden_layers``, ``num_key_value_heads`` and ``head_dim`` (or
``hidden_size / num_attention_heads``), with ``sliding_window`` and
``layer_types`` when given. A nested ``text_config`` is read when the top
level has no ``hidden_size``. What this misses (MLA, shared KV layers,
per-layer head sizes) is why the result says "approximate".

>>> spec = generic(Config({"model_type": "newfamily", "hidden_size": 1024, "num_hidden_layers": 8,
...                        "num_attention_heads": 8}), "m", 1_234_567_890, None)
>>> spec.params_total, spec.layers[0].values_per_token      # 2 x 8 heads x 128
(1234567890, 2048)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..spec import ModelSpec
from .parts import caches, finish, kv_heads_and_head_dim, sliding_window, types_to_windows
from .reader import ATTENTION_LAYER_TYPES, STATE_LAYER_TYPES, Config


def generic(c: Config, name: str, params_total: int | None, checkpoint: Any) -> ModelSpec:
    top = c
    if not c.has("hidden_size") and not c.has("n_embd") and c.sub("text_config") is not None:
        c = c.sub("text_config")
    hidden = c.width("hidden_size", "n_embd", "d_model")
    layers = c.layers("num_hidden_layers", "n_layer", "num_layers")
    heads = c.width("num_attention_heads", "n_head", "num_heads")
    kv_heads, head_dim = kv_heads_and_head_dim(c, hidden, heads)
    types = c.layer_types(layers, ATTENTION_LAYER_TYPES + STATE_LAYER_TYPES) or \
        ["sliding_attention"] * layers
    window = sliding_window(c, None)
    windows = types_to_windows([t for t in types if t != "linear_attention"], window,
                               c.optional_width("attention_chunk_size"))
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

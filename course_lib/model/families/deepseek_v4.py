"""DeepSeek-V4's cache, per layer: a sliding window of shared K=V, plus compressed entries (CSA, HCA).

Read from transformers 5.24 ``models/deepseek_v4`` (``configuration_deepseek_v4.py``,
``modeling_deepseek_v4.py``: ``DeepseekV4HCACache``, ``DeepseekV4CSACache``). Every layer is one of
three ``layer_types`` (a published config gives them as ``compress_ratios``: 0, 4, 128):

* ``sliding_attention``: a plain sliding window of ``sliding_window`` tokens (transformers'
  ``DynamicSlidingWindowLayer``, which keeps keys and values as two tensors: ``2 x head_dim`` a token);
* ``compressed_sparse_attention`` (CSA, rate ``m = compress_rates[...]``, 4): the window of shared
  K=V (``head_dim`` a token, ``keys is values``), plus one compressed entry of ``head_dim`` every ``m``
  tokens, plus the lightning indexer's compressed key of ``index_head_dim`` every ``m`` tokens; it
  grows for ever, by ``(head_dim + index_head_dim) / m`` values a token;
* ``heavily_compressed_attention`` (HCA, rate 128): the window of shared K=V plus one entry of
  ``head_dim`` every 128 tokens, no indexer.

What does not grow with tokens (per sequence): the compressor's buffer of the tokens of a window not
yet closed (at most ``m - 1`` tokens of kv and gate, ``2 x coff x width`` each, ``coff`` = 2 for CSA's
overlapping windows, 1 for HCA), and CSA's overlap state (the last window's first half, kv and gate:
``2 x m x width``), for the compressor and, in CSA, the indexer.

Worked example, DeepSeek-V4-Flash (43 layers: 2 sliding, 21 CSA, 20 HCA; head_dim 512, index_head_dim
128, window 128): a CSA layer grows by (512 + 128) / 4 = 160 values a token beyond its window, an
HCA layer by 512 / 128 = 4, so past the window the model grows by 21 x 160 + 20 x 4 = 3,440 values a
token (6,880 B in bf16), against DeepSeek-V3's 61 x 576 = 35,136.

>>> layers, states = cache_layout({"num_hidden_layers": 3, "head_dim": 512, "index_head_dim": 128,
...     "sliding_window": 128, "num_key_value_heads": 1, "layer_types": ["sliding_attention",
...     "compressed_sparse_attention", "heavily_compressed_attention"],
...     "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}})
>>> [(c.values_per_token, c.window) for c in layers]
[(1024, 128), (512, 128), (160, None), (512, 128), (4, None)]
>>> [(s.recurrent_values, s.conv_values) for s in states]
[(5120, 7680), (0, 130048)]
"""

from __future__ import annotations

from typing import Any, Mapping

from ...errors import CourseInputError
from ..spec import LayerCache, LayerState

#: transformers' cache layer classes of DeepSeek-V4's compressed layers (``modeling_deepseek_v4.py``).
CACHE_LAYERS = ("DeepseekV4HCACache", "DeepseekV4CSACache")
CSA, HCA, SLIDING = "compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"


def _get(cfg: Any, key: str) -> Any:
    return cfg.get(key) if isinstance(cfg, Mapping) else getattr(cfg, key, None)


def cache_layout(cfg: Any) -> tuple[tuple[LayerCache, ...], tuple[LayerState, ...]]:
    """(per-token caches, per-sequence states) of every layer, in order, from a completed config (a dict of
    transformers' ``DeepseekV4Config.to_dict()`` or the config object itself).

    A compressed layer gives two caches (its window, then its compressed entries) and one state. A rate
    that does not divide the entry width is refused: the per-token figure would not be a whole number.
    """
    head_dim, index_dim = int(_get(cfg, "head_dim")), int(_get(cfg, "index_head_dim"))
    window, kv_heads = int(_get(cfg, "sliding_window")), int(_get(cfg, "num_key_value_heads") or 1)
    rates = dict(_get(cfg, "compress_rates") or {})
    layers: list[LayerCache] = []
    states: list[LayerState] = []
    for kind in list(_get(cfg, "layer_types") or []):
        if kind == SLIDING:
            layers.append(LayerCache(2 * kv_heads * head_dim, window, kv_heads))
            continue
        rate = int(rates[kind])
        widths = (head_dim, index_dim) if kind == CSA else (head_dim,)
        if any(w % rate for w in widths):
            raise CourseInputError(f"config: DeepSeek-V4 compress rate {rate} of {kind} does not divide the entry "
                                   f"widths {widths}; use a rate that divides them (4 and 128 are published)")
        coff = 2 if kind == CSA else 1          # CSA's windows overlap: kv_proj / gate_proj give 2 x width
        layers.append(LayerCache(head_dim, window, kv_heads))                  # the window: keys is values
        layers.append(LayerCache(sum(w // rate for w in widths), None, 0))     # compressed entries
        overlap = sum(2 * rate * w for w in widths) if kind == CSA else 0     # overlap_kv / overlap_gate
        buffer = sum((rate - 1) * 2 * coff * w for w in widths)               # buffer_kv / buffer_gate, at most
        states.append(LayerState(overlap, buffer, 1))
    return tuple(layers), tuple(states)

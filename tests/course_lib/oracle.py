"""The independent oracle: transformers builds each family on the meta device (no memory, no weights).

What the oracle says, for a config dict:

* ``oracle_params``: every parameter of the built model (``model.parameters()``
  counts a tied weight once) plus the persistent buffers a checkpoint stores
  (DeepSeek-V3's ``e_score_correction_bias``);
* ``oracle_kv_widths``: per attention layer, the K + V output width of the
  built projections (MLA: ``kv_a_proj_with_mqa``, the latent + rope key);
* ``oracle_windows``: per layer, the cache layer transformers would build
  (``get_layer_types_and_kwargs``, which DynamicCache uses): its type and window;
* ``oracle_states``: per linear-attention layer, the Gated DeltaNet module's
  head counts and dims.

transformers and torch are dev/test dependencies only: course_lib never imports them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText
from transformers.cache_utils import get_layer_types_and_kwargs

transformers.logging.set_verbosity_error()

MULTIMODAL = {"gemma3", "llama4", "qwen3_5", "qwen3_5_moe", "gemma4", "mllama"}
#: Persistent buffers a checkpoint stores as tensors: DeepSeek-V3's router bias, Gemma-4's layer scalars,
#: clamp bounds of its clippable linears and the vision tower's standardisation (the rest are derived).
CHECKPOINT_BUFFERS = ("e_score_correction_bias", "layer_scalar", "input_min", "input_max", "output_min",
                      "output_max", "std_bias", "std_scale")


def hf_config(cfg: dict[str, Any]):
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_") and k not in ("architectures",)}
    model_type = cfg.pop("model_type")
    return AutoConfig.for_model(model_type, **cfg)


def build(cfg: dict[str, Any]):
    """The model transformers builds for ``cfg``, on the meta device."""
    config = hf_config(cfg)
    cls = AutoModelForImageTextToText if cfg["model_type"] in MULTIMODAL else AutoModelForCausalLM
    with torch.device("meta"):
        return cls.from_config(config), config


def oracle_params(model) -> int:
    total = sum(p.numel() for p in model.parameters())
    state = model.state_dict(keep_vars=True)
    return total + sum(t.numel() for name, t in state.items()
                       if not isinstance(t, torch.nn.Parameter) and name.endswith(CHECKPOINT_BUFFERS))


def decoder_layers(model, config):
    """The text decoder's layers (a ModuleList as long as num_hidden_layers, not the vision tower's)."""
    n = config.get_text_config(decoder=True).num_hidden_layers
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n and not re.search(r"vision|visual", name):
            return list(module)
    raise AssertionError("no decoder ModuleList found")


def _kv_width(layer, text_config) -> int | None:
    """K + V output width of one decoder layer's attention, or None for a linear-attention layer."""
    mods = dict(layer.named_modules())
    for name, m in mods.items():
        if name.endswith("kv_a_proj_with_mqa"):
            return m.out_features
    k = next((m for n, m in mods.items() if n.endswith("k_proj")), None)
    v = next((m for n, m in mods.items() if n.endswith("v_proj")), None)
    if k is not None:      # Gemma-4's attention_k_eq_v: no v_proj, the cache holds the normed keys as values
        return k.out_features + (v.out_features if v is not None else k.out_features)
    for name, m in mods.items():
        if name.endswith(("query_key_value", "qkv_proj")):   # falcon, gpt_neox, phi3: fused q, k, v
            heads = text_config.num_attention_heads
            head_dim = getattr(text_config, "head_dim", None) or text_config.hidden_size // heads
            return m.out_features - heads * head_dim
        if name.endswith("c_attn"):                # gpt2 Conv1D: q, k, v of n_embd each
            return 2 * m.nf // 3
    return None


def oracle_kv_widths(model, config) -> list[int]:
    text = config.get_text_config(decoder=True)
    widths = [_kv_width(layer, text) for layer in decoder_layers(model, config)]
    return [w for w in widths if w is not None]


def oracle_windows(config) -> tuple[list[int | None], int]:
    """(window per attention layer, number of linear-attention layers), as DynamicCache would lay them out."""
    text = config.get_text_config(decoder=True)
    types, kwargs = get_layer_types_and_kwargs(text)
    windows, linear = [], 0
    for t, kw in zip(types, kwargs):
        if t in ("linear_attention", "conv"):
            linear += 1
        elif t == "dummy":           # Gemma-4's KV-sharing layers: no cache of their own
            continue
        elif t in ("sliding_attention", "chunked_attention"):
            windows.append(kw.get("sliding_window"))
        elif t == "full_attention":
            windows.append(None)
        else:
            raise AssertionError(f"cache layer type {t!r} not handled by the oracle")
    return windows, linear


def oracle_states(model, config) -> list[tuple[int, int, int]]:
    """(recurrent values, conv channels, conv kernel) per linear-attention layer, from the built module."""
    out = []
    for layer in decoder_layers(model, config):
        m = getattr(layer, "linear_attn", None)
        if m is not None:
            out.append((m.num_v_heads * m.head_k_dim * m.head_v_dim, m.conv_dim, m.conv_kernel_size))
    return out


@lru_cache(maxsize=None)
def transformers_version() -> str:
    return transformers.__version__

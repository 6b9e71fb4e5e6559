"""The independent oracle: transformers builds each family on the meta device (no memory, no weights).

What the oracle says, for a config dict:

* ``oracle_params``: every parameter of the built model (``model.parameters()``
  counts a tied weight once), as transformers counts them;
* ``oracle_buffers``: the persistent buffers of its ``state_dict`` (DeepSeek-V3's
  ``e_score_correction_bias``, Gemma-4's ``layer_scalar``): stored and loaded, not parameters;
* ``oracle_kv_widths``: per attention layer, the K + V output width of the
  built projections (MLA: ``kv_a_proj_with_mqa``, the latent + rope key);
* ``oracle_windows``: per layer, the cache layer transformers would build
  (``get_layer_types_and_kwargs``, which DynamicCache uses): its type and window;
* ``oracle_states``: per linear-attention layer, the Gated DeltaNet module's
  head counts and dims.

transformers and torch are dev/test dependencies only: course_lib never imports them.
"""

from __future__ import annotations

import inspect
import re
from functools import lru_cache
from typing import Any

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText
from transformers.cache_utils import get_layer_types_and_kwargs

transformers.logging.set_verbosity_error()

MULTIMODAL = {"gemma3", "llama4", "qwen3_5", "qwen3_5_moe", "gemma4", "mllama", "qwen2_5_vl"}


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
    return sum(p.numel() for p in model.parameters())


def oracle_buffers(model) -> int:
    """Values of the persistent buffers: what ``state_dict`` holds beyond the parameters (each tensor once)."""
    params = {id(p) for p in model.parameters()}
    seen: dict[int, int] = {}
    for t in model.state_dict(keep_vars=True).values():
        if id(t) not in params:
            seen[id(t)] = t.numel()
    return sum(seen.values())


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


# ------------------------------------------------------------------ any decoder (every_decoder.py)

class CannotBuild(Exception):
    """transformers cannot build this config (on the meta device)."""


class CannotRun(Exception):
    """transformers built it but cannot run its text decoder on the meta device."""


#: Two lengths other than course_lib.model.meta_model's, so the two measurements do not share their arithmetic.
ORACLE_LENGTHS = (4, 7)


def _layer_values(layer) -> tuple[int, int, int]:
    """(K/V-like values, recurrent-state values, conv-state values kept by vLLM) one cache layer holds."""
    kv = 0
    keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
    for t in ([keys] if keys is values else [keys, values]) + [getattr(layer, "indexer_keys", None)]:
        kv += t.numel() if isinstance(t, torch.Tensor) else 0
    recurrent = sum(t.numel() for t in (getattr(layer, "recurrent_states", None) or {}).values() if t is not None)
    conv = sum(t.numel() // t.shape[-1] * (t.shape[-1] - 1)          # vLLM keeps kernel - 1 inputs
               for t in (getattr(layer, "conv_states", None) or {}).values() if t is not None)
    return kv, recurrent, conv


def _filled_cache(model, tokens: int):
    """The cache layers of the text decoder after ``tokens`` tokens: a DynamicCache handed in (to the
    decoder, then the whole model), else whatever cache the whole model makes of its own."""
    from transformers import DynamicCache

    ids = torch.zeros((1, tokens), dtype=torch.long, device="meta")
    errors = []
    for module, hand_in in ((model.get_decoder(), True), (model, True), (model, False)):
        try:
            cache = DynamicCache(config=model.config) if hand_in else None
            names = inspect.signature(module.forward).parameters
            name = "cache" if "cache" in names else "cache_params" if "cache_params" in names else "past_key_values"
            with torch.no_grad():
                out = module(input_ids=ids, use_cache=True, **({name: cache} if hand_in else {}))
            if cache is None:
                cache = out.get("cache", None) or out.get("past_key_values", None)
            return list(cache.layers)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    raise CannotRun(errors[0])


def measure(cfg: dict[str, Any]) -> dict[str, Any]:
    """What transformers' meta-built model holds for ``cfg``: parameters, buffers, per-layer cache.

    Built in bf16 (fused-expert kernels accept nothing else), then in fp32 if a kernel refuses bf16.
    """
    try:
        return _measure(cfg, torch.bfloat16)
    except CannotRun:
        return _measure(cfg, torch.float32)


def _measure(cfg: dict[str, Any], dtype) -> dict[str, Any]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    model_type = cfg["model_type"]
    try:
        config = hf_config(cfg)
        if hasattr(config, "is_decoder"):
            config.is_decoder = True
        cls = AutoModelForImageTextToText if model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES \
            else AutoModelForCausalLM
        with torch.device("meta"):
            model = cls.from_config(config, dtype=dtype).eval()
    except Exception as exc:
        raise CannotBuild(f"{type(exc).__name__}: {exc}") from None
    try:
        runs = [_filled_cache(model, n) for n in ORACLE_LENGTHS]
    except CannotRun:
        raise
    except Exception as exc:
        raise CannotRun(f"{type(exc).__name__}: {exc}") from None
    kv, windows, states = [], [], []
    (n1, n2) = ORACLE_LENGTHS
    for short, long in zip(*runs):
        (kv1, _, _), (kv2, recurrent, conv) = _layer_values(short), _layer_values(long)
        if kv2 > kv1:
            kv.append((kv2 - kv1) // (n2 - n1))
            windows.append(long.sliding_window if getattr(long, "is_sliding", False) else None)
        if recurrent or conv:
            states.append((recurrent, conv))
    return {"params": oracle_params(model), "buffers": oracle_buffers(model), "kv": kv, "windows": windows,
            "states": states}

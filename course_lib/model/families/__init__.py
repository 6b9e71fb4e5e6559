"""One formula per model family, each a function ``(Config, name) -> ModelSpec``.

:data:`FAMILIES` maps a Hugging Face ``model_type`` to its formula. Every
formula counts the tensors transformers builds for that family (the tests
build each family on the meta device and compare, tensor for tensor).

=================  =================================================================
module             families
=================  =================================================================
``dense``          llama, mistral, qwen2, qwen3, gemma2, gemma3_text, phi3, olmo2,
                   smollm3, cohere, granite, glm4, starcoder2
``moe``            mixtral, phimoe, qwen2_moe, qwen3_moe, gpt_oss, llama4_text
``mla``            deepseek_v2, deepseek_v3
``classic``        gpt2, opt, falcon, gpt_neox
``hybrid``         qwen3_next, qwen3_5_text, qwen3_5_moe_text (linear-attention state)
``vision``         gemma3, llama4, qwen3_5, qwen3_5_moe (text_config + vision tower)
``mllama``         mllama (Llama-3.2-Vision: cross-attention decoder + tiled vision tower)
``gemma4``         gemma4_text, gemma4 (KV sharing, per-layer head sizes, vision and audio towers)
(other)            a wrapper whose text_config is a known family: its decoder exactly, towers named
                   as not counted (:func:`build_text_only`)
=================  =================================================================

>>> sorted(FAMILIES)[:4]
['cohere', 'deepseek_v2', 'deepseek_v3', 'falcon']
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..spec import ModelSpec
from . import classic, dense, gemma4, hybrid, mla, mllama, moe
from .parts import add
from .reader import Config
from .vision import FLAT_TEXT, MULTIMODAL

Family = Callable[[Config, str], ModelSpec]

FAMILIES: dict[str, Family] = {
    **{mt: dense.dense for mt in dense.RULES},
    **{mt: moe.moe for mt in ("mixtral", "phimoe", "qwen2_moe", "qwen3_moe", "gpt_oss", "llama4_text")},
    "deepseek_v2": mla.deepseek, "deepseek_v3": mla.deepseek,
    "gpt2": classic.gpt2, "opt": classic.opt, "falcon": classic.falcon, "gpt_neox": classic.gpt_neox,
    "qwen3_next": hybrid.qwen3_hybrid, "qwen3_5_text": hybrid.qwen3_hybrid, "qwen3_5_moe_text": hybrid.qwen3_hybrid,
    "gemma4_text": gemma4.gemma4_text, "gemma4": gemma4.gemma4,
    "mllama_text_model": mllama.mllama_text,
}

#: Where a multimodal family reads tie_word_embeddings: its top level (the lm_head sits beside the
#: language model) or its text_config (the lm_head sits inside it, as Llama-4's does).
_TIE_AT_TOP = {"gemma3": True, "qwen3_5": False, "qwen3_5_moe": False}
MULTIMODAL["mllama"] = ("mllama_text_model", mllama.mllama_vision_params, mllama.mllama_projector,
                        "tiled vision encoder + projector")


def supported() -> list[str]:
    """Every model_type with an exact formula, text-only and multimodal."""
    return sorted({*FAMILIES, *MULTIMODAL})


def build(c: Config, name: str) -> ModelSpec:
    """The spec of a known family (multimodal ones through their ``text_config``)."""
    if c.model_type in MULTIMODAL:
        return _multimodal(c, name)
    return FAMILIES[c.model_type](c, name)


def text_family(c: Config) -> str | None:
    """The known family of an unknown wrapper's ``text_config`` (e.g. mistral3 around a mistral), if any."""
    text = c.sub("text_config")           # refuses a text_config that is not a JSON object
    if text is not None:
        mt = text.cfg.get("model_type")
        if mt is not None and not isinstance(mt, str):
            raise c.refuse(f"text_config.model_type={mt!r:.60} is not a string; use e.g. \"llama\"")
        if mt in FAMILIES:
            return mt
    return None


def build_text_only(c: Config, name: str) -> ModelSpec:
    """An unknown multimodal wrapper around a known text family: the text decoder exactly, towers not counted."""
    text = c.sub("text_config")
    spec = build(Config(dict(text.cfg), text.model_type), name)
    others = [k for k in ("vision_config", "audio_config") if c.cfg.get(k) is not None]
    missing = f"its {' and '.join(others)} towers have no formula here and are not counted" if others else ""
    counted = (f"text decoder ({text.model_type})",) + ((f"{c.model_type}: {missing}",) if missing else ())
    notes = spec.notes + ((f"approximate: model_type={c.model_type!r} wraps a {text.model_type} decoder, counted "
                           f"exactly; {missing}; a model folder's safetensors give the exact bytes",)
                          if missing else ())
    return replace(spec, model_type=c.model_type, counted=counted, notes=notes)


def _multimodal(c: Config, name: str) -> ModelSpec:
    text_type, tower, projector, words = MULTIMODAL[c.model_type]
    text = c.sub("text_config")
    if text is None and c.model_type in FLAT_TEXT:      # the text keys at the top level, as published
        text = Config({k: v for k, v in c.cfg.items() if k not in ("vision_config", "model_type", "architectures")},
                      text_type)
    if text is None:
        raise c.refuse("lacks 'text_config' (the language model's settings); add it to config.json")
    text_cfg = dict(text.cfg)
    if c.model_type in _TIE_AT_TOP:
        text_cfg["tie_word_embeddings"] = c.flag("tie_word_embeddings", _TIE_AT_TOP[c.model_type])
    spec = FAMILIES[text_type](Config(text_cfg, text_type), name)
    counted = [f"text decoder ({text_type})"]
    params = dict(spec.params)
    vision = c.sub("vision_config")
    if vision is not None:
        tower_params = tower(vision) + projector(vision, spec.hidden_size)
        add(params, "vision", tower_params)
        counted.append(f"{words}: {tower_params:,} params")
    else:
        counted.append("no vision_config: no vision tower counted")
    return replace(spec, model_type=c.model_type, params=params, counted=tuple(counted),
                   vision_config=dict(vision.cfg) if vision is not None else {})

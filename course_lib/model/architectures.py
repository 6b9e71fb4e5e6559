"""Which formula a config gets: by its ``architectures`` first, then its ``model_type``, as vLLM resolves a model.

vLLM picks the model class from the config's ``architectures`` list (``ModelConfig.architectures``;
``vllm/model_executor/models/registry.py``, ``_VLLM_MODELS``, v0.33.0: the first listed architecture it
has a class for), never from ``model_type``. A checkpoint can name a new ``model_type`` and an existing
architecture: Kimi-K2's config says ``"model_type": "kimi_k2"`` and ``"architectures":
["DeepseekV3ForCausalLM"]``, and vLLM serves it as DeepSeek-V3. :data:`ARCHITECTURES` maps each
architecture to the family formula of :mod:`course_lib.model.families` whose config keys it reads.

>>> resolve_family({"model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"]}, {"deepseek_v3"})
('deepseek_v3', "architectures: 'DeepseekV3ForCausalLM' (model_type 'kimi_k2')")
>>> resolve_family({"model_type": "llama"}, {"llama"})
('llama', "model_type: 'llama' (no architectures listed)")
"""

from __future__ import annotations

from typing import Any, Collection, Mapping

#: Architecture class -> the family formula (a ``model_type`` of :mod:`course_lib.model.families`), after vLLM's
#: registry (vllm/model_executor/models/registry.py, v0.33.0), restricted to families with a formula here.
ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2", "Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe", "Qwen3NextForCausalLM": "qwen3_next",
    "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3_text", "Gemma3ForConditionalGeneration": "gemma3",
    "Gemma4ForCausalLM": "gemma4_text", "Gemma4ForConditionalGeneration": "gemma4",
    "Phi3ForCausalLM": "phi3", "PhiMoEForCausalLM": "phimoe", "Olmo2ForCausalLM": "olmo2",
    "SmolLM3ForCausalLM": "smollm3", "CohereForCausalLM": "cohere", "GraniteForCausalLM": "granite",
    "Glm4ForCausalLM": "glm4", "Starcoder2ForCausalLM": "starcoder2",
    "DeepseekV2ForCausalLM": "deepseek_v2", "DeepseekV3ForCausalLM": "deepseek_v3",
    "GptOssForCausalLM": "gpt_oss", "GPT2LMHeadModel": "gpt2", "OPTForCausalLM": "opt",
    "FalconForCausalLM": "falcon", "GPTNeoXForCausalLM": "gpt_neox",
    "Llama4ForCausalLM": "llama4_text", "Llama4ForConditionalGeneration": "llama4",
    "MllamaForConditionalGeneration": "mllama",
}

#: The architecture a family's own checkpoints list (the first of ARCHITECTURES naming it).
ARCHITECTURE_OF: dict[str, str] = {}
for _arch, _family in ARCHITECTURES.items():
    ARCHITECTURE_OF.setdefault(_family, _arch)


def listed_architectures(cfg: Mapping[str, Any]) -> tuple[str, ...]:
    """The config's ``architectures`` as strings (anything else is ignored, as vLLM ignores it)."""
    archs = cfg.get("architectures")
    if isinstance(archs, str):
        archs = [archs]
    if not isinstance(archs, (list, tuple)):
        return ()
    return tuple(a for a in archs if isinstance(a, str))[:16]


def resolve_family(cfg: Mapping[str, Any], known: Collection[str]) -> tuple[str | None, str]:
    """(the family formula to use or None, how it was chosen in words): ``architectures`` first, then ``model_type``.

    ``known``: the families with a formula. The first listed architecture that maps to a known family wins
    (vLLM tries them in order); otherwise the ``model_type`` if it is known; otherwise None.
    """
    model_type = cfg.get("model_type")
    archs = listed_architectures(cfg)
    for arch in archs:
        family = ARCHITECTURES.get(arch)
        if family is not None and family in known:
            return family, f"architectures: {arch!r} (model_type {model_type!r})"
    where = f"architectures {list(archs)} name no family here" if archs else "no architectures listed"
    if model_type in known:
        return model_type, f"model_type: {model_type!r} ({where})"
    return None, f"neither architectures nor model_type {model_type!r} names a family here ({where})"


def spec_architectures(spec: Any) -> tuple[str, ...]:
    """A spec's architectures: as its config listed them, or its family's usual one (a preset lists none)."""
    archs = tuple(getattr(spec, "architectures", ()) or ())
    if archs:
        return archs
    arch = ARCHITECTURE_OF.get(getattr(spec, "model_type", ""))
    return (arch,) if arch else ()

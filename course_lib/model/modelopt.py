"""NVIDIA ModelOpt checkpoints (``quant_method: modelopt``): NVFP4 and FP8 weights, and the modules they leave out.

A ModelOpt checkpoint says how it is quantized in ``config.json``'s ``quantization_config`` (``quant_method:
modelopt``, ``quant_algo``, ``group_size``, ``exclude_modules`` or ``ignore``) or in ``hf_quant_config.json``
(``{"quantization": {"quant_algo": ..., "exclude_modules": [...]}}``; :func:`from_hf_quant_config` turns it into
the same mapping). What each tensor of an NVFP4 linear layer stores (ModelOpt's export, and what vLLM allocates:
``KNvfp4Static.create_weights``, vllm/model_executor/layers/quantization/modelopt.py, 0.33.0):

==================  ========  ================================  =====================
tensor              dtype     shape                             bytes per weight
==================  ========  ================================  =====================
``weight``          uint8     [out, in / 2] (two e2m1 values)   0.5
``weight_scale``    fp8 e4m3  [out, in / 16]                    1/16
``weight_scale_2``  fp32      [] (the per-tensor global scale)  4 B per tensor
``input_scale``     fp32      []                                4 B per tensor
==================  ========  ================================  =====================

so 4 + 8/16 = 4.5 bits per weight; the two fp32 scalars are 8 B per linear tensor (Qwen3.6-35B-A3B's 30,720
expert matrices: 0.25 MB) and are not counted. A module matched by ``exclude_modules`` (fnmatch patterns over
module names, as ModelOpt writes them: ``lm_head``, ``model.visual*``, ``*mlp.gate``, ``*linear_attn*``, ...)
stays in the compute dtype; embeddings, the LM head, norms, routers and a vision tower are never quantized here.

A hand-worked example: one 4096 x 4096 NVFP4 linear stores 8,388,608 B of values, 1,048,576 fp8 scales and
8 B of fp32 scalars (9,437,192 B); the model counts 4096 * 4096 * 4.5 / 8 = 9,437,184 B.

>>> from course_lib.model.quantization import format_from_config
>>> fmt = format_from_config({"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "modelopt",
...     "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head", "*linear_attn*"]}})
>>> fmt.name, fmt.quantized.bytes_for(4096 * 4096), "linear_attention" in fmt.quantized_groups
('nvfp4', 9437184, False)
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Mapping

from ..dtypes import DType, get_dtype
from ..errors import CourseInputError

#: NVFP4: a 4-bit e2m1 value, one fp8 (e4m3) scale per 16 values.
NVFP4 = DType("nvfp4", 4, 16, 8)

#: Module names standing for each quantizable group, at two layers (a pattern must match both layers to
#: exclude the group), with and without a multimodal model's ``language_model`` prefix.
_GROUP_MODULES = {
    "attention": ("self_attn.q_proj", "self_attn.o_proj"),
    "attention_kv": ("self_attn.k_proj", "self_attn.v_proj"),
    "mlp": ("mlp.gate_proj", "mlp.down_proj"),
    "experts": ("mlp.experts.0.gate_proj", "mlp.experts.7.down_proj"),
    "shared_experts": ("mlp.shared_expert.gate_proj", "mlp.shared_experts.down_proj"),
    "linear_attention": ("linear_attn.in_proj_qkvz", "linear_attn.out_proj"),
}
_PREFIXES = ("model.layers.{}.", "model.language_model.layers.{}.", "language_model.model.layers.{}.")
_LAYERS = (1, 17)

#: ``quant_algo`` values whose weights are NVFP4 (W4A16_NVFP4 keeps activations 16-bit; the weights are the same).
NVFP4_ALGOS = ("NVFP4", "NVFP4_AWQ", "W4A16_NVFP4", "W4A8_NVFP4_FP8")


def from_hf_quant_config(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``hf_quant_config.json`` as a ``quantization_config`` mapping (``quant_method: modelopt``).

    >>> from_hf_quant_config({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4",
    ...     "group_size": 16, "exclude_modules": ["lm_head"]}})["quant_method"]
    'modelopt'
    """
    q = doc.get("quantization") if isinstance(doc, Mapping) else None
    if not isinstance(q, Mapping):
        raise CourseInputError("hf_quant_config.json: no 'quantization' object; ModelOpt writes "
                               "{\"quantization\": {\"quant_algo\": ..., \"exclude_modules\": [...]}}")
    return {"quant_method": "modelopt", **q}


def excluded_groups(patterns: Any) -> tuple[str, ...]:
    """The groups every one of whose stand-in module names (at two layers) an exclude pattern matches.

    As vLLM's ``ModelOptQuantConfigBase.is_layer_excluded`` (vllm/model_executor/layers/quantization/modelopt.py,
    0.33.0): a wildcard match, or the pattern as a substring of the module name (older ModelOpt exports).

    >>> excluded_groups(["lm_head", "model.visual*", "*mlp.gate", "*self_attn*"])
    ('attention', 'attention_kv')
    >>> excluded_groups(["model.layers.1.*"])      # one layer only: not a whole group
    ()
    """
    if patterns is None:
        return ()
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise CourseInputError(f"config: quantization_config.exclude_modules={patterns!r:.60} is not a list of "
                               f"module-name patterns")
    out = []
    for group, names in _GROUP_MODULES.items():
        def hit(name: str) -> bool:
            return any(fnmatchcase(name, p) or p in name for p in patterns)
        if any(all(hit(prefix.format(layer) + name) for layer in _LAYERS for name in names) for prefix in _PREFIXES):
            out.append(group)
    return tuple(out)


def modelopt_weights(q: Mapping[str, Any]) -> tuple[str, str, DType | None, tuple[str, ...]] | None:
    """What a ModelOpt ``quantization_config`` stores: ``(name, why, stored dtype, excluded groups)``, or None
    for an algorithm not modelled here. ``stored`` None: the compute dtype (FP8's ``fp8-e4m3`` is named).
    :func:`course_lib.model.quantization.format_from_config` builds the weight format from it.

    >>> name, why, stored, skipped = modelopt_weights({"quant_algo": "NVFP4", "exclude_modules": ["*linear_attn*"]})
    >>> name, stored.bytes_for(4096 * 4096), skipped
    ('nvfp4', 9437184, ('linear_attention',))
    """
    algo = q.get("quant_algo")
    patterns = q.get("exclude_modules", q.get("ignore"))
    skipped = excluded_groups(patterns)
    left = f"; excluded: {', '.join(skipped)}" if skipped else ""
    if isinstance(algo, str) and algo.upper() in NVFP4_ALGOS:
        group = q.get("group_size", 16)
        if group != 16:
            raise CourseInputError(f"config: quantization_config.group_size={group!r:.20} is not NVFP4's; "
                                   f"NVFP4 scales groups of 16")
        return ("nvfp4", f"from quantization_config: modelopt {algo}, e2m1 values with an fp8 scale per 16 "
                f"(per-tensor fp32 scales not counted){left}", NVFP4, skipped)
    if isinstance(algo, str) and algo.upper() == "FP8":
        return "fp8-e4m3", f"from quantization_config: modelopt FP8, per-tensor scales{left}", get_dtype("fp8-e4m3"), \
            skipped
    return None

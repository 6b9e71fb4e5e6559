"""How a checkpoint stores its weights: ``torch_dtype`` / ``dtype`` and ``quantization_config``.

A quantized checkpoint does not store every tensor the same way: the linear
layers of the decoder are quantized, while embeddings, the LM head, norms
and (often) routers stay in the 16-bit compute dtype. A :class:`WeightFormat`
says which groups are quantized and at what bytes per value, with its scales:

=================  =============================================  ======================
method             what is stored per weight                      bits per weight
=================  =============================================  ======================
awq / gptq int4    4-bit value; per group of 128: fp16 scale +    4 + 20/128 = 4.156
                   4-bit zero point
fp8 (block)        e4m3 byte; one fp32 scale per 128 x 128 block  8 + 32/16384 = 8.002
mxfp4              4-bit e2m1; one 8-bit (e8m0) scale per 32      4 + 8/32 = 4.25
modelopt nvfp4     4-bit e2m1; one fp8 (e4m3) scale per 16        4 + 8/16 = 4.5
                   (:mod:`course_lib.model.modelopt`)
bitsandbytes nf4   4-bit; fp32 absmax per 64 (or 8-bit absmax     4.5 (4.127 with
                   per 64 + fp32 per 256 blocks, double quant)    double quant)
bitsandbytes int8  int8; fp32 scale per output row (not counted)  8
=================  =============================================  ======================

>>> from fractions import Fraction
>>> fmt = format_from_config({"torch_dtype": "float16",
...     "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}})
>>> fmt.describe()
'int4-g128 (from quantization_config: awq, group_size 128); embeddings, lm_head, norms and routers stay fp16'
>>> fmt.quantized.bytes_per_value == Fraction(4, 8) + Fraction(16 + 4, 8 * 128)
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..bounds import check_int
from ..dtypes import DType, get_dtype
from ..errors import CourseInputError

#: The decoder's linear layers: what weight quantization methods quantize by default.
LINEAR_GROUPS = ("attention", "attention_kv", "mlp", "experts", "shared_experts", "linear_attention")

_TORCH_DTYPES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "half": "fp16", "float": "fp32",
                 "float8_e4m3fn": "fp8-e4m3", "float8_e5m2": "fp8-e5m2"}


@dataclass(frozen=True)
class WeightFormat:
    """A checkpoint's storage: one dtype for quantized groups, another for the rest.

    name: the format shown ("bf16", "int4-g128", "fp8-block128", "mxfp4").
    reason: where it comes from, in words.
    base: dtype of every tensor that is not quantized (the compute dtype).
    quantized: dtype (scales included) of the quantized groups, or None.
    quantized_groups: the parameter groups stored as ``quantized``.
    compute_dtype: activations' and (by default) the KV cache's dtype name.
    """

    name: str
    reason: str
    base: DType
    quantized: DType | None = None
    quantized_groups: tuple[str, ...] = ()
    compute_dtype: str = "fp16"

    def dtype_for(self, group: str) -> DType:
        if self.quantized is not None and group in self.quantized_groups:
            return self.quantized
        return self.base

    def describe(self) -> str:
        """One line: the format and why, and what stays unquantized."""
        text = f"{self.name} ({self.reason})"
        if self.quantized is not None:
            kept = "embeddings, lm_head, norms and routers" if "experts" not in self.quantized_groups or \
                "attention" in self.quantized_groups else "attention, embeddings, lm_head, norms and routers"
            text += f"; {kept} stay {self.base.name}"
        return text


def uniform(dtype: str | DType, reason: str = "given") -> WeightFormat:
    """Every tensor in one 16- or 32-bit dtype (a quantized dtype goes to :func:`format_for_dtype`)."""
    dt = get_dtype(dtype)
    compute = dt.name if dt.bits >= 16 and not dt.group_size else "fp16"
    return WeightFormat(dt.name, reason, dt, compute_dtype=compute)


#: What ``--dtype int4`` stores: AWQ/GPTQ's layout, a 4-bit value plus, per group of 128, an fp16 scale and
#: a 4-bit zero point (4 + 20/128 bits per weight).
INT4_AWQ = DType("int4-g128", 4, 128, 16 + 4)


def format_for_dtype(dtype: str | DType, compute_dtype: str = "fp16",
                     reason: str = "given: --dtype overrides the config") -> WeightFormat:
    """The weights a checkpoint of ``dtype`` really holds: what ``--dtype`` means everywhere.

    A 16- or 32-bit dtype stores every tensor that way. A quantized dtype (fp8, int8, int4)
    quantizes the decoder's linear layers only: embeddings, the LM head, norms and routers stay
    in the 16-bit ``compute_dtype``, as real AWQ, GPTQ and fp8 checkpoints do. ``int4`` means
    AWQ/GPTQ's 128-value groups with an fp16 scale and a 4-bit zero point each. The KV cache is
    not touched: it follows the compute dtype unless ``kv_dtype`` says otherwise.

    Llama-3-8B in int4: 6,979,321,856 linear weights x (4 + 20/128) / 8 B + 1,050,939,392
    embedding, head and norm values x 2 B = 3,625,975,808 + 2,101,878,784 = 5,727,854,592 B
    (5.73 GB, as a real AWQ checkpoint of it), not 8,030,261,248 x 0.5 B = 4.02 GB.

    >>> fmt = format_for_dtype("int4", "bf16")
    >>> fmt.name, fmt.base.name, fmt.compute_dtype
    ('int4-g128', 'bf16', 'bf16')
    >>> format_for_dtype("fp16").quantized is None
    True
    """
    dt = get_dtype(dtype)
    if dt.bits >= 16 and not dt.group_size:
        return uniform(dt, reason)
    base = get_dtype(compute_dtype)
    if base.bits < 16 or base.group_size:
        base = get_dtype("fp16")
    if dt.name == "int4":
        dt = INT4_AWQ
    return WeightFormat(dt.name, reason, base, dt, LINEAR_GROUPS, base.name)


def _compute_dtype(cfg: Mapping[str, Any], model_type: str) -> tuple[str, str]:
    """(dtype name, reason) from ``torch_dtype`` / ``dtype`` (top level or text_config)."""
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), Mapping) else {}
    for where in (cfg, text):
        for key in ("torch_dtype", "dtype"):
            value = where.get(key)
            if value is None:
                continue
            if not isinstance(value, str) or value.removeprefix("torch.") not in _TORCH_DTYPES:
                raise CourseInputError(f"config: {key}={value!r:.60} is not a dtype; use one of {', '.join(_TORCH_DTYPES)}")
            name = _TORCH_DTYPES[value.removeprefix("torch.")]
            if name == "fp32":
                # vLLM's dtype="auto" serves a float32 checkpoint in 16 bits (bf16 for Gemma, fp16 otherwise)
                half = "bf16" if model_type.startswith("gemma") else "fp16"
                return half, f"config {key}={value}; served in {half}, as vLLM's dtype=auto does"
            return name, f"from config {key}={value}"
    return "fp16", "config gives no torch_dtype; fp16 assumed"


def _flag(q: Mapping[str, Any], key: str, default: bool) -> bool:
    value = q.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise CourseInputError(f"config: quantization_config.{key}={value!r:.60} is not a JSON boolean; use true or false")
    return value


def _int(q: Mapping[str, Any], keys: tuple[str, ...], default: int, lo: int, hi: int) -> int:
    for key in keys:
        if q.get(key) is not None:
            return check_int(f"quantization_config.{key}", q[key], lo, hi)
    return default


def format_from_config(cfg: Mapping[str, Any], model_type: str = "") -> WeightFormat:
    """The :class:`WeightFormat` a config describes (its default for ``estimate``)."""
    compute, compute_reason = _compute_dtype(cfg, model_type)
    base = get_dtype(compute)
    q = cfg.get("quantization_config")
    if q is None:
        return WeightFormat(compute, compute_reason, base, compute_dtype=compute)
    if not isinstance(q, Mapping):
        raise CourseInputError(f"config: quantization_config={q!r:.60} is not a JSON object")
    method = q.get("quant_method")
    if not isinstance(method, str):
        raise CourseInputError(f"config: quantization_config.quant_method={method!r:.60} is not a method name; "
                               f"use e.g. awq, gptq, fp8, mxfp4, bitsandbytes")
    if method in ("awq", "gptq"):
        bits = _int(q, ("bits", "w_bit"), 4, 2, 8)
        group = _int(q, ("group_size", "q_group_size"), 128, -1, 1 << 20)
        zero = method == "gptq" or _flag(q, "zero_point", True)   # GPTQ always stores qzeros; AWQ unless false
        if group in (-1, 0):
            dt = DType(f"int{bits}", bits)
            shown = f"int{bits} per-channel"
            why = f"from quantization_config: {method}, per-channel scales (not counted)"
        else:
            dt = DType(f"int{bits}-g{group}", bits, group, 16 + (bits if zero else 0))
            shown = dt.name
            why = f"from quantization_config: {method}, group_size {group}"
        return WeightFormat(shown, why, base, dt, LINEAR_GROUPS, compute)
    if method == "fp8":
        block = q.get("weight_block_size")
        if block is None:
            dt = DType("fp8-e4m3", 8)
            return WeightFormat("fp8-e4m3", "from quantization_config: fp8, per-tensor scales", base, dt,
                                LINEAR_GROUPS, compute)
        if not (isinstance(block, list) and len(block) == 2):
            raise CourseInputError(f"config: quantization_config.weight_block_size={block!r:.60} is not [rows, cols]")
        rows, cols = (_int({f"weight_block_size[{i}]": n}, (f"weight_block_size[{i}]",), 128, 1, 1 << 16)
                      for i, n in enumerate(block))
        dt = DType(f"fp8-block{rows}x{cols}", 8, rows * cols, 32)
        return WeightFormat(dt.name, f"from quantization_config: fp8, weight_block_size [{rows}, {cols}], "
                            f"fp32 scales", base, dt, LINEAR_GROUPS, compute)
    if method == "mxfp4":
        dt = DType("mxfp4", 4, 32, 8)
        return WeightFormat("mxfp4", "from quantization_config: mxfp4 experts (4-bit values, one 8-bit scale "
                            "per 32)", base, dt, ("experts",), compute)
    if method == "bitsandbytes":
        if _flag(q, "load_in_4bit", False):
            kind = q.get("bnb_4bit_quant_type") or "fp4"
            if kind not in ("fp4", "nf4"):
                raise CourseInputError(f"config: quantization_config.bnb_4bit_quant_type={kind!r:.40} is not "
                                       f"valid; use fp4 or nf4")
            if _flag(q, "bnb_4bit_use_double_quant", False):
                dt = DType(f"{kind}-dq", 4, 64 * 256, 8 * 256 + 32)
                why = f"from quantization_config: bitsandbytes 4-bit {kind}, double quant"
            else:
                dt = DType(str(kind), 4, 64, 32)
                why = f"from quantization_config: bitsandbytes 4-bit {kind}, fp32 absmax per 64"
            return WeightFormat(dt.name, why, base, dt, LINEAR_GROUPS, compute)
        if _flag(q, "load_in_8bit", False):
            return WeightFormat("int8", "from quantization_config: bitsandbytes 8-bit", base, DType("int8", 8),
                                LINEAR_GROUPS, compute)
    if method in ("modelopt", "modelopt_fp4"):
        from .modelopt import modelopt_weights
        found = modelopt_weights(q)
        if found is not None:
            name, why, stored, skipped = found
            return WeightFormat(name, why, base, stored, tuple(g for g in LINEAR_GROUPS if g not in skipped), compute)
    return WeightFormat(compute, f"quantization_config quant_method={method!r:.40} is not modelled; "
                        f"weights counted at {compute}, an overestimate", base, compute_dtype=compute)


def format_with_hf_quant_config(cfg: Mapping[str, Any], doc: Any, model_type: str = "") -> WeightFormat | None:
    """The weight format of a config whose quantization is only in ``hf_quant_config.json`` (``doc``), or None.

    >>> format_with_hf_quant_config({"torch_dtype": "bfloat16"}, {"quantization": {"quant_algo": "NVFP4",
    ...     "group_size": 16, "exclude_modules": ["lm_head"]}}).name
    'nvfp4'
    """
    from .modelopt import from_hf_quant_config

    if cfg.get("quantization_config") is not None or not isinstance(doc, Mapping):
        return None
    return format_from_config({**cfg, "quantization_config": from_hf_quant_config(doc)}, model_type)


def weight_format(c: Any) -> WeightFormat:
    """The format a :class:`~course_lib.model.families.reader.Config` describes."""
    return format_from_config(c.cfg, c.model_type)


def raw_torch_dtype(cfg: Mapping[str, Any]) -> str | None:
    """The config's ``torch_dtype`` / ``dtype`` as written (top level, else text_config)."""
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), Mapping) else {}
    for where in (cfg, text):
        for key in ("torch_dtype", "dtype"):
            if isinstance(where.get(key), str):
                return where[key]
    return None

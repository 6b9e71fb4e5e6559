"""Model shapes from a Hugging Face ``config.json``: parameter count and KV cache.

A :class:`ModelSpec` holds what memory depends on: the parameter count (split
into named groups, so tensor parallelism knows what is sharded and what is
replicated) and, per layer, what attention caches for each token.

Weights are the big, mostly fixed pool: ``params x bytes per value``.
The KV cache grows with tokens: for ordinary (MHA/GQA/MQA) attention each
layer stores a key and a value vector per KV head per token, hence the ``2 x``:

    kv_bytes_per_token = 2 x layers x kv_heads x head_dim x bytes

Worked example (Llama-3.2-3B, fp16): 2 x 28 x 8 x 128 x 2 = 114,688 B per token,
so a 4,096-token sequence holds 469,762,048 B = 0.47 GB (0.4375 GiB).

>>> spec = from_hf_config({"model_type": "llama", "hidden_size": 3072,
...     "intermediate_size": 8192, "num_hidden_layers": 28, "num_attention_heads": 24,
...     "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256, "tie_word_embeddings": True})
>>> spec.params_total
3212749824
>>> kv_cache_bytes_per_token(spec, "fp16")
114688
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from .architectures import listed_architectures, resolve_family
from ..bounds import MAX_CONFIG_FILE_BYTES, MAX_PARAMS, check_int
from .checkpoint import Checkpoint, read_checkpoint
from . import meta_model
from ..dtypes import DType, get_dtype
from ..errors import CourseInputError, check_count
from .families import FAMILIES, build, build_text_only, supported, text_family
from .families.generic import generic
from .families.reader import Config, MissingKey, check_model_types
from .quantization import WeightFormat, format_for_dtype, raw_torch_dtype, uniform, weight_format
from .spec import KV_GROUPS, REPLICATED_GROUPS, SHARDED_GROUPS, LayerCache, LayerState, ModelSpec

__all__ = ["active_params", "FAMILIES", "KV_GROUPS", "REPLICATED_GROUPS", "SHARDED_GROUPS", "LayerCache", "LayerState", "ModelSpec",
           "from_hf_config", "kv_cache_bytes_per_sequence", "kv_cache_bytes_per_token", "load_config",
           "params_per_gpu", "params_per_gpu_by_group", "replicated_params", "state_bytes_per_sequence",
           "weight_bytes", "weights_format", "formula_weight_bytes", "buffer_bytes", "checkpoint_served_bytes",
           "checkpoint_words"]


# --------------------------------------------------------------------- loading

class _NonFinite:
    """A NaN / Infinity read from JSON, kept until its key is known (shown as written, should it leak)."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _finite_float(text: str) -> float | _NonFinite:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


def _non_finite_in(value: Any) -> _NonFinite | None:
    """The first NaN / Infinity in a value and the lists inside it (objects are checked as they are read)."""
    if isinstance(value, _NonFinite):
        return value
    if isinstance(value, list):
        return next((bad for bad in map(_non_finite_in, value) if bad is not None), None)
    return None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    for key, value in pairs:
        bad = _non_finite_in(value)
        if bad is not None:
            raise CourseInputError(f"{key}={bad.text} is not finite; use a finite number")
    return dict(pairs)


def parse_config_text(text: str, where: str) -> dict[str, Any]:
    """Parse a config.json's text strictly: finite numbers, bounded nesting and digits, an object."""
    try:
        data = json.loads(text, parse_float=_finite_float, parse_constant=_NonFinite, object_pairs_hook=_object)
    except CourseInputError as exc:
        raise CourseInputError(f"config={where!r}: {exc}") from None
    except RecursionError:
        raise CourseInputError(f"config={where!r} nests JSON arrays or objects too deeply to read; "
                               f"give a Hugging Face config.json") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CourseInputError(f"config={where!r} is not valid JSON ({exc}); give a Hugging Face config.json") from None
    except ValueError as exc:        # e.g. an integer of more than 4,300 digits
        raise CourseInputError(f"config={where!r} holds a value Python refuses to read ({exc}); "
                               f"give a Hugging Face config.json") from None
    if not isinstance(data, dict):
        shown = "a non-finite number" if _non_finite_in(data) is not None else f"a {type(data).__name__}"
        raise CourseInputError(f"config={where!r} holds {shown}, not a JSON object; give a Hugging Face config.json")
    return data


def read_config_file(source: str | Path) -> tuple[Path, bytes]:
    """The config.json that ``source`` names (the file, or a model folder holding one) and its bytes:
    a regular, readable file of at most 10 MB (bounds.MAX_CONFIG_FILE_BYTES), read once."""
    text = str(source)
    what = "give a model folder or the path of a Hugging Face config.json"
    if not text.strip():
        raise CourseInputError(f"config={text!r} is empty; {what}")
    if "\x00" in text:
        raise CourseInputError(f"config={text!r} holds a NUL character; {what}")
    try:
        mode = os.stat(text).st_mode
    except OSError:
        raise CourseInputError(f"config={text!r} is not a file; {what}") from None
    config = text
    if stat.S_ISDIR(mode):
        config = os.path.join(text, "config.json")
        try:
            mode = os.stat(config).st_mode
        except OSError:
            raise CourseInputError(f"config={text!r} is a folder without config.json; {what}") from None
    if not stat.S_ISREG(mode):
        raise CourseInputError(f"config={config!r} is not a regular file (a device, pipe or socket); {what}")
    try:
        with open(config, "rb") as fh:    # /proc files report size 0: read at most one byte past the bound
            data = fh.read(MAX_CONFIG_FILE_BYTES + 1)
    except OSError as exc:
        raise CourseInputError(f"config={config!r} cannot be read ({exc.strerror or exc}); {what}") from None
    if len(data) > MAX_CONFIG_FILE_BYTES:
        raise CourseInputError(f"config={config!r} is larger than {MAX_CONFIG_FILE_BYTES:,} bytes "
                               f"({MAX_CONFIG_FILE_BYTES.why}); {what}")
    return Path(config), data


def load_config(source: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """Return a config dict from a dict, a ``config.json`` path, or a model folder holding one."""
    if isinstance(source, Mapping):
        return dict(source)
    path, data = read_config_file(source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CourseInputError(f"config={str(path)!r} is not valid JSON ({exc}); give a Hugging Face config.json") from None
    return parse_config_text(text, str(path))


def from_hf_config(source: Mapping[str, Any] | str | Path, *, name: str | None = None,
                   params_total: int | None = None, checkpoint: Checkpoint | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from a Hugging Face config (a dict, a path, or a model folder).

    ``params_total`` overrides the count; ``checkpoint`` gives the weights' bytes read elsewhere (a Hub
    repo's headers, :mod:`course_lib.model.hub`). A folder's safetensors (their
    headers only) give the exact bytes of the weights (see
    :mod:`course_lib.model.checkpoint`); with them, a family without a formula still
    gets an estimate, marked approximate. Without either, an unknown family is
    refused with the way out.

    >>> gpt2 = from_hf_config({"model_type": "gpt2", "n_embd": 768, "n_layer": 12,
    ...                        "n_head": 12, "n_positions": 1024, "vocab_size": 50257})
    >>> gpt2.params_total          # the published 124,439,808 of openai-community/gpt2
    124439808

    A ``model_type`` without a formula is built by transformers on the meta
    device when it is installed (:mod:`course_lib.model.meta_model`): its
    parameters, buffers and cache are read from the model itself.

    >>> from_hf_config({"model_type": "brandnew"})
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: model_type='brandnew' is not supported: no formula here, and ... (or give the parameter count explicitly: params_total=... / --params N, or a model folder with its safetensors)
    """
    cfg = load_config(source)
    if checkpoint is None and not isinstance(source, Mapping) and Path(source).is_dir():
        checkpoint = read_checkpoint(Path(source))
    model_type = cfg.get("model_type")
    label = name or str(cfg.get("_name_or_path") or model_type or "model")
    c = Config(cfg)
    check_model_types(cfg)
    if params_total is not None:
        params_total = check_int("params_total", params_total, 1, MAX_PARAMS)
    family, resolved_by = resolve_family(cfg, supported())
    if family is not None:
        # vLLM picks the class by `architectures` first (architectures.py): Kimi-K2's kimi_k2 is a DeepSeek-V3
        as_family = cfg if family == model_type else {**cfg, "model_type": family}
        try:
            spec = build(Config(as_family), label)
        except MissingKey as missing:   # a key the config leaves to its transformers class's default
            if meta_model.why_not(family) is not None:
                raise
            left_out = str(missing).split(": lacks ", 1)[-1].split(";")[0]
            spec = build(Config(meta_model.completed(as_family)), label)
            spec = replace(spec, notes=spec.notes + (
                f"the config leaves out {left_out}: the default of transformers' {family} config class "
                f"applies, as it does when the model is served",))
    else:
        spec = _without_formula(c, label, params_total, checkpoint)
    spec = replace(spec, architectures=listed_architectures(cfg), resolved_by=resolved_by)
    if params_total is not None:
        spec = _override_params(spec, params_total)
    if spec.params_total > MAX_PARAMS:
        raise CourseInputError(f"config for model_type={model_type!r} describes {spec.params_total:.3g} parameters, "
                               f"above the bound 10^13 (20x the largest published checkpoints); "
                               f"check hidden_size, num_hidden_layers, vocab_size and the expert counts")
    fmt = weight_format(c)
    return replace(spec, torch_dtype=raw_torch_dtype(cfg), quantization=fmt, checkpoint=checkpoint)


def _without_formula(c: Config, label: str, params_total: int | None, checkpoint: Any) -> ModelSpec:
    """A model_type with no formula: built on the meta device when transformers knows it, else the
    decoder of a known text family, else the common keys with a given count or a folder's bytes."""
    reason = meta_model.why_not(c.model_type)
    if reason is None:
        return meta_model.meta_spec(c.cfg, label)
    if text_family(c):
        return build_text_only(c, label)
    if params_total is not None or checkpoint is not None:
        return generic(c, label, params_total, checkpoint, reason)
    raise CourseInputError(
        f"model_type={c.model_type!r:.60} is not supported: no formula here, and {reason}; supported: "
        f"{', '.join(supported())} (or give the parameter count explicitly: params_total=... / --params N, "
        f"or a model folder with its safetensors)")


def _override_params(spec: ModelSpec, params_total: int) -> ModelSpec:
    if dict(spec.params) == {"given": params_total}:
        return spec
    return replace(spec, params={"given": params_total},
                   notes=spec.notes + ("parameter count given explicitly",))


# ------------------------------------------------------------------ the formulas

def weight_bytes(spec: ModelSpec, dtype: str | DType | WeightFormat | None = "fp16", tensor_parallel: int = 1) -> int:
    """Bytes of weights on one GPU: about params x bytes / N, plus the persistent buffers.

    Norms, MoE routers and learned position tables are replicated on every GPU;
    K/V projections split by KV head but never below one head per GPU. Buffers
    (``spec.buffers``: a router's bias, per-layer scalars) are loaded too, never
    quantized, and held whole by every GPU (:func:`buffer_bytes`).
    ``dtype`` is what ``--dtype`` means everywhere (:func:`~course_lib.model.quantization.format_for_dtype`):
    a 16- or 32-bit dtype stores every tensor that way; a quantized one (fp8, int8,
    int4) quantizes the decoder's linear layers and keeps embeddings, the LM head,
    norms and routers in 16 bits, as real checkpoints do. A
    :class:`~course_lib.model.quantization.WeightFormat` is used as given. ``dtype=None``
    uses the checkpoint's own format (``spec.quantization``), or, when read from a
    model folder's safetensors (``spec.checkpoint``), its exact bytes in the dtype
    it is served in (:func:`checkpoint_served_bytes`).

    >>> spec = from_hf_config({"model_type": "llama", "hidden_size": 4096,
    ...     "intermediate_size": 11008, "num_hidden_layers": 32,
    ...     "num_attention_heads": 32, "vocab_size": 32000})     # Llama-2-7B
    >>> weight_bytes(spec, "fp16")                              # 6,738,415,616 params x 2 B
    13476831232
    >>> weight_bytes(spec, "int4")     # 6,476,005,376 linear x (4 + 20/128)/8 B + 262,410,240 x 2 B
    3889307648
    >>> from course_lib.model.presets import get_model                # + 58 x 256 router biases at 2 B
    >>> weight_bytes(get_model("deepseek-v3"), "bf16") == 2 * 671_026_404_352 + 2 * 14_848
    True
    """
    tensor_parallel = check_count("tensor_parallel", tensor_parallel, 1)
    if dtype is None and spec.checkpoint is not None:
        share = params_per_gpu(spec, tensor_parallel) / max(1, spec.params_total)
        return math.ceil(checkpoint_served_bytes(spec) * share)
    fmt = dtype if isinstance(dtype, WeightFormat) else weights_format(spec, dtype)
    by_group = params_per_gpu_by_group(spec, tensor_parallel)
    return sum(fmt.dtype_for(group).bytes_for(count) for group, count in by_group.items()) + \
        buffer_bytes(spec, fmt.base)


def buffer_bytes(spec: ModelSpec, dtype: str | DType = "fp16") -> int:
    """Bytes of the persistent buffers: in ``dtype`` when it is a 16-bit or wider float, else fp16
    (a quantization method quantizes weights, never buffers)."""
    dt = get_dtype(dtype)
    if dt.bits < 16 or dt.group_size or not dt.name.startswith(("fp", "bf")):
        dt = get_dtype("fp16")
    return dt.bytes_for(spec.buffers_total)


def checkpoint_served_bytes(spec: ModelSpec) -> int:
    """A model folder's weights once loaded, in the dtype the config says it is served in.

    An unquantized checkpoint's float tensors are cast to that dtype at load
    (vLLM's ``dtype="auto"`` serves a float32 checkpoint in 16 bits); a
    quantized one keeps what it stores (int4 packs, fp8, their fp32 scales).

    >>> import json, struct, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 4,
    ...     "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 1, "vocab_size": 2,
    ...     "torch_dtype": "float32"}))
    >>> h = json.dumps({"w": {"dtype": "F32", "shape": [10], "data_offsets": [0, 40]}}).encode()
    >>> _ = (d / "model.safetensors").write_bytes(struct.pack("<Q", len(h)) + h + bytes(40))
    >>> spec = from_hf_config(d)
    >>> spec.checkpoint.total_bytes, checkpoint_served_bytes(spec)     # 10 floats stored in 4 B, served in 2 B
    (40, 20)
    """
    checkpoint, fmt = spec.checkpoint, spec.quantization
    if fmt is not None and fmt.quantized is None:
        served = checkpoint.served_bytes(fmt.base.bytes_per_value)
        if served is not None:
            return served
    return checkpoint.total_bytes


def checkpoint_words(spec: ModelSpec) -> str:
    """A model folder's weights in words: the bytes as stored, and as served when they differ."""
    checkpoint = spec.checkpoint
    served = checkpoint_served_bytes(spec)
    stored = f"{checkpoint.total_bytes:,} B read from the checkpoint ({checkpoint.source})"
    if served == checkpoint.total_bytes:
        return stored
    return (f"{stored}, stored as {checkpoint.stored_dtypes}; served in {spec.quantization.base.name}: "
            f"{served:,} B")


def weights_format(spec: ModelSpec, dtype: str | DType | None = None) -> WeightFormat:
    """The :class:`~course_lib.model.quantization.WeightFormat` of ``spec`` served in ``dtype``.

    ``None`` is the checkpoint's own format (fp16 when the config names none); a dtype
    name is what ``--dtype`` means (quantized dtypes quantize the linear layers only,
    the rest stays in the checkpoint's 16-bit compute dtype).

    >>> from course_lib.model.presets import get_model
    >>> fmt = weights_format(get_model("llama-3-8b"), "int4")
    >>> fmt.name, fmt.base.name
    ('int4-g128', 'bf16')
    """
    if dtype is None:
        return spec.quantization or uniform("fp16", "config gives no torch_dtype; fp16 assumed")
    compute = spec.quantization.compute_dtype if spec.quantization is not None else "fp16"
    return format_for_dtype(dtype, compute)


def formula_weight_bytes(spec: ModelSpec, tensor_parallel: int = 1) -> int:
    """The formula's bytes in the checkpoint's own format (ignoring any bytes read from safetensors)."""
    return weight_bytes(replace(spec, checkpoint=None), None, tensor_parallel)


def active_params(spec: ModelSpec) -> int:
    """Parameters one token runs through: all of a dense model; a mixture of experts' routed share of its experts.

    A token visits ``num_experts_per_tok`` of ``num_experts`` routed experts (shared experts, attention,
    embeddings and the head always): Mixtral-8x7B's 46,702,792,704 parameters hold 45,097,156,608 in
    experts, of which a token uses 2 of 8, so 46,702,792,704 - 45,097,156,608 x 6/8 = 12,879,925,248
    (Mistral's "12.9B active").

    >>> from course_lib.model.presets import get_model
    >>> active_params(get_model("mixtral-8x7b")), active_params(get_model("llama-3-8b")) == 8_030_261_248
    (12879925248, True)
    """
    if not spec.num_experts or not spec.num_experts_per_tok:
        return spec.params_total
    routed = spec.params.get("experts", 0) + spec.params.get("expert_bias", 0)
    return spec.params_total - routed * (spec.num_experts - spec.num_experts_per_tok) // spec.num_experts


def params_per_gpu_by_group(spec: ModelSpec, tensor_parallel: int = 1) -> dict[str, int]:
    """Parameters one GPU holds, per group, under tensor parallelism of degree N."""
    n = check_count("tensor_parallel", tensor_parallel, 1)
    out: dict[str, int] = {}
    for group, count in spec.params.items():
        if n == 1 or group in REPLICATED_GROUPS:
            out[group] = count
        elif group in KV_GROUPS and spec.attention != "mla":
            kv = spec.num_kv_heads
            out[group] = count * max(1, kv // n) // kv
        elif group in KV_GROUPS:   # MLA's latent projection is small and replicated
            out[group] = count
        else:
            out[group] = math.ceil(count / n)
    return out


def params_per_gpu(spec: ModelSpec, tensor_parallel: int = 1) -> int:
    """Parameters held by one GPU under tensor parallelism of degree N (see :func:`weight_bytes`)."""
    return sum(params_per_gpu_by_group(spec, tensor_parallel).values())


def replicated_params(spec: ModelSpec, tensor_parallel: int) -> dict[str, int]:
    """Parameter groups every GPU holds in full under tensor parallelism (for reporting)."""
    out = {g: spec.params[g] for g in REPLICATED_GROUPS if spec.params.get(g)}
    if tensor_parallel > spec.num_kv_heads and "attention_kv" in spec.params and spec.attention != "mla":
        out["attention_kv (KV heads replicated)"] = spec.params["attention_kv"] // spec.num_kv_heads
    return out


def state_bytes_per_sequence(spec: ModelSpec, state_dtype: str | DType = "fp32", conv_dtype: str | DType = "bf16",
                             tensor_parallel: int = 1) -> int:
    """Bytes of linear-attention state one sequence holds, at any length (0 for pure attention models).

    The recurrent state is kept in fp32 (transformers' Gated DeltaNet
    kernels accumulate it in fp32); the convolution state in the activations'
    dtype. Qwen3-Next-80B-A3B: 36 layers x (524,288 x 4 B + 24,576 x 2 B) =
    77,266,944 B per sequence, whether it holds 10 tokens or 100,000.

    >>> from course_lib.model.presets import get_model
    >>> state_bytes_per_sequence(get_model("qwen3-next-80b-a3b"))
    77266944
    """
    tp = check_count("tensor_parallel", tensor_parallel, 1)
    sdt, cdt = get_dtype(state_dtype), get_dtype(conv_dtype)
    return sum(sdt.bytes_for(s.per_gpu(s.recurrent_values, tp)) + cdt.bytes_for(s.per_gpu(s.conv_values, tp))
               for s in spec.states)


def kv_cache_bytes_per_token(spec: ModelSpec, kv_dtype: str | DType = "fp16", tensor_parallel: int = 1) -> int:
    """KV-cache bytes one token adds, across all layers, on one GPU (no window cap).

    MHA/GQA/MQA: 2 x layers x kv_heads x head_dim x bytes.
    MLA: (kv_lora_rank + qk_rope_head_dim) x layers x bytes.

    >>> opt13b = from_hf_config({"model_type": "opt", "hidden_size": 5120, "num_hidden_layers": 40,
    ...     "num_attention_heads": 40, "ffn_dim": 20480, "vocab_size": 50272,
    ...     "max_position_embeddings": 2048})
    >>> kv_cache_bytes_per_token(opt13b, "fp16")    # PagedAttention paper: 800 KB/token
    819200
    """
    tp = check_count("tensor_parallel", tensor_parallel, 1)
    dt = get_dtype(kv_dtype)
    values = sum(layer.values_per_token_per_gpu(tp) for layer in spec.layers)
    return dt.bytes_for(values)


def kv_cache_bytes_per_sequence(spec: ModelSpec, tokens: int, kv_dtype: str | DType = "fp16",
                                tensor_parallel: int = 1) -> int:
    """KV-cache bytes of one sequence of ``tokens``, with sliding-window layers capped.

    A sliding-window layer never keeps more than ``window`` tokens, so past the
    window only the full-attention layers keep growing. Mistral-7B-v0.1 windows
    every layer at 4096, so an 8,192-token sequence holds 4096 x 131,072 B, not 8192 x.

    >>> mistral = from_hf_config({"model_type": "mistral", "hidden_size": 4096,
    ...     "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    ...     "num_key_value_heads": 8, "vocab_size": 32000, "sliding_window": 4096})
    >>> kv_cache_bytes_per_sequence(mistral, 8192) == 4096 * 131072
    True
    """
    tokens = check_count("tokens", tokens, 0)
    tp = check_count("tensor_parallel", tensor_parallel, 1)
    dt = get_dtype(kv_dtype)
    values = sum(layer.values_per_token_per_gpu(tp) * layer.cached_tokens(tokens) for layer in spec.layers)
    return dt.bytes_for(values)

"""Any decoder transformers can build: parameters, buffers and the per-layer cache, read from the model itself.

A ``model_type`` without a formula here (:mod:`course_lib.model.families`) is built
by transformers (an optional extra: ``pip install 'course-model-memory[transformers]'``)
from its config on PyTorch's ``meta`` device: every tensor has a shape and no
storage, so a 671B model costs no memory, no weight is read and nothing is
downloaded (the Hub is switched off while it builds; remote code is never run).
From the built model:

* **parameters**: ``model.parameters()`` (a tied weight once), as transformers
  counts them, grouped by module for tensor parallelism (:func:`param_group`);
* **buffers**: the persistent buffers of its ``state_dict`` beyond the
  parameters (a router's ``e_score_correction_bias``): loaded, not parameters;
* **the cache**: two forwards on the meta device, of :data:`LENGTHS` tokens,
  fill transformers' own ``DynamicCache``. Per layer, every floating tensor it
  holds is measured at both lengths: what grows by a token's worth per token
  is that layer's KV cache (full or sliding K/V, MLA's latent, a sparse
  indexer's key), what stays the same is per-sequence state (a recurrent
  state, a causal convolution's inputs), see :func:`split_growth`.

Worked example of the split, by hand: a layer holding 1,152 values after 2
tokens and 1,728 after 3 caches 576 per token (DeepSeek-V3's MLA latent,
512 + 64) and nothing fixed; a Gated DeltaNet layer holding 557,056 values at
both lengths grows with sequences only.

>>> split_growth((2, 3), (1152, 1728))
(576, 0)
>>> split_growth((2, 3), (557056, 557056))
(0, 557056)

transformers and torch are imported inside the functions that need them, so
importing this module is light.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import warnings
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping

from ..bounds import Bound
from ..errors import CourseInputError
from .families import deepseek_v4
from .spec import LayerCache, LayerState, ModelSpec

#: How to get the optional extra, in every refusal that needs it.
INSTALL = "pip install 'course-model-memory[transformers]'"
#: Tokens of the two measuring forwards (both below every sliding window, see :data:`MIN_WINDOW`).
LENGTHS = (2, 3)
#: A sliding window must keep more tokens than the longer forward for the two lengths to tell growth
#: from state (transformers keeps ``window - 1`` tokens); real windows are 128 and up.
MIN_WINDOW = LENGTHS[1] + 1
#: Building and running a layer on the meta device takes ~20 ms; the deepest published decoders have
#: 126 layers (Llama-3.1-405B), so 256 keeps a call within seconds.
MAX_META_LAYERS = Bound(256, "building and running a layer on the meta device takes ~20 ms; real decoders have "
                             "at most ~130")
#: Experts built as separate modules (older families) cost ~1 ms each to build; most real models have at most 512.
MAX_META_EXPERTS = Bound(2**16, "the most experts of a real config are 16,384 (Doge-MoE's tiny ones)")
#: Cache layer classes whose tensors mean what :func:`split_growth` assumes (keys/values/indexer keys grow
#: with tokens, conv/recurrent states do not). DeepSeek-V4's compressed layers, which add an entry every 4 or 128
#: tokens, take their layout from :mod:`.families.deepseek_v4`; any other class is refused by name.
KNOWN_CACHE_LAYERS = ("DynamicLayer", "DynamicSlidingWindowLayer", "DynamicIndexedLayer", "LinearAttentionLayer",
                      "LinearAttentionAndFullAttentionLayer", "LinearAttentionAndSlidingWindowAttentionLayer",
                      "DummyLayer")

_LAYER_KEYS = re.compile(r"^(\w+_)?(num|n)_\w*layers?$")         # num_hidden_layers, n_layer, mtp_num_hidden_layers
_EXPERT_KEYS = re.compile(r"^(\w+_)?(num|n)_\w*experts$")          # num_experts, n_routed_experts, num_local_experts


def split_growth(lengths: tuple[int, int], values: tuple[int, int]) -> tuple[int, int]:
    """(values per token, values fixed per sequence) of a cache measured at two lengths.

    The lengths differ by one token, so the difference is one token's worth.
    """
    (l1, l2), (v1, v2) = lengths, values
    per_token = (v2 - v1) // (l2 - l1)
    return per_token, v1 - per_token * l1


# ------------------------------------------------------------------ transformers, lazily

def _import() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise CourseInputError(f"building a model on the meta device needs transformers and torch, which are "
                               f"not installed ({exc.name or exc}); install them with {INSTALL}") from None
    except Exception as exc:          # an install that is there but broken (a torch that does not load)
        raise CourseInputError(f"building a model on the meta device needs transformers and torch, which do "
                               f"not import here ({_one_line(exc)}); reinstall them with {INSTALL}") from None
    return torch, transformers


def available() -> bool:
    """Whether transformers and torch can be imported (without importing them)."""
    import importlib.util

    try:
        return all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers"))
    except (ImportError, ValueError):       # a module set to None in sys.modules, a broken install
        return False


def registered(model_type: str) -> bool:
    """Whether the installed transformers registers ``model_type`` as a causal LM or an image-text-to-text model."""
    if not available():
        return False
    _import()
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)

    return model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES or model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES


def why_not(model_type: Any) -> str | None:
    """Why ``model_type`` cannot be built here, in words; ``None`` when it can."""
    if not available():
        return f"transformers is not installed to build it on the meta device ({INSTALL})"
    if not isinstance(model_type, str) or not registered(model_type):
        _, transformers = _import()
        return f"transformers {transformers.__version__} has no causal-LM or image-text-to-text model for it either"
    return None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}{'...' if len(text) > 200 else ''}"


@contextlib.contextmanager
def _quiet_and_offline() -> Iterator[None]:
    """transformers' warnings and prints silenced, and the Hub switched off, while a model is built."""
    import huggingface_hub.constants as hub
    import transformers

    offline, verbosity = hub.HF_HUB_OFFLINE, transformers.logging.get_verbosity()
    hub.HF_HUB_OFFLINE = True
    transformers.logging.set_verbosity_error()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        hub.HF_HUB_OFFLINE = offline
        transformers.logging.set_verbosity(verbosity)


def _check_sizes(cfg: Mapping[str, Any], where: str = "") -> None:
    """Bound what makes building slow (layers, experts as modules), in every nested config."""
    for key, value in cfg.items():
        name = f"{where}{key}"
        if isinstance(value, Mapping):
            _check_sizes(value, f"{name}.")
        elif isinstance(value, int) and not isinstance(value, bool) and isinstance(key, str):
            for pattern, bound in ((_LAYER_KEYS, MAX_META_LAYERS), (_EXPERT_KEYS, MAX_META_EXPERTS)):
                if pattern.search(key) and value > bound:
                    raise CourseInputError(f"config: {name}={value} is above the bound {bound:,} for building "
                                           f"on the meta device ({bound.why}); use at most {bound:,}")


def _kwargs(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in cfg.items() if isinstance(k, str) and not k.startswith("_")
            and k not in ("model_type", "architectures", "auto_map", "transformers_version")}


def hf_config(cfg: Mapping[str, Any]) -> Any:
    """transformers' config object for ``cfg`` (its class's defaults for what ``cfg`` leaves out); one line if refused."""
    _, transformers = _import()
    from transformers import AutoConfig

    _check_sizes(cfg)
    with _quiet_and_offline():
        try:
            return AutoConfig.for_model(cfg.get("model_type"), **_kwargs(cfg))
        except Exception as exc:        # transformers' own validation of an untrusted config: one line
            raise CourseInputError(f"config (model_type={cfg.get('model_type')!r:.60}): transformers "
                                   f"{transformers.__version__} refuses it ({_one_line(exc)}); fix that key in "
                                   f"config.json") from None


def completed(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` as transformers reads it: every key its config class defaults, filled in (``to_dict()``)."""
    return hf_config(cfg).to_dict()


def build(cfg: Mapping[str, Any], dtype: str = "bfloat16") -> tuple[Any, Any]:
    """(model, config) transformers builds from ``cfg`` on the meta device; a refusal is one line.

    bf16 by default: fused-expert kernels (``grouped_mm``) accept nothing else.
    """
    torch, transformers = _import()
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    model_type = cfg.get("model_type")
    where = f"config (model_type={model_type!r:.60})"
    config = hf_config(cfg)
    with _quiet_and_offline():
        if getattr(config, "is_encoder_decoder", False):
            raise CourseInputError(f"{where} is an encoder-decoder model; only decoder-only models are budgeted here")
        if hasattr(config, "is_decoder"):
            config.is_decoder = True    # an encoder family's causal-LM head caches only when it decodes
        # a checkpoint with towers loads them: its image-text-to-text class when it has one, as serving does
        cls = AutoModelForImageTextToText if model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES \
            else AutoModelForCausalLM
        try:
            with torch.device("meta"):
                model = cls.from_config(config, dtype=getattr(torch, dtype))
        except Exception as exc:
            raise CourseInputError(f"{where}: transformers {transformers.__version__} cannot build it on the meta "
                                   f"device ({_one_line(exc)})") from None
    return model.eval(), config


# ------------------------------------------------------------------ what the built model holds

#: Name fragments of a module outside the text decoder: towers and projectors.
_TOWER = re.compile(r"(^|\.)(vision|visual|audio|image|video|speech|multi_modal|mm_|vit|siglip|patch|"
                    r"connector|projector|embed_vision|embed_audio)", re.IGNORECASE)


def param_group(name: str, module_class: str, embedding_ids: bool = False) -> str:
    """The parameter group (see :mod:`course_lib.model.spec`) of one tensor, from its name and its module's class.

    >>> param_group("model.layers.0.self_attn.k_proj.weight", "Linear")
    'attention_kv'
    >>> param_group("model.layers.3.mlp.experts.gate_up_proj", "DeepseekV3NaiveMoe")
    'experts'
    >>> param_group("model.vision_tower.blocks.0.attn.qkv.weight", "Linear")
    'vision'
    """
    low = name.lower()
    if _TOWER.search(low) and not low.startswith(("lm_head", "model.language_model", "language_model")):
        return "vision"
    if embedding_ids:
        return "embedding"
    if "norm" in module_class.lower() or re.search(r"(^|\.|_)(ln|norm|layernorm)[\w]*(\.|$)", low):
        return "norms"
    if "shared_expert" in low:
        return "router" if low.endswith("shared_expert_gate.weight") else "shared_experts"
    if "expert" in low:
        return "experts"
    if re.search(r"\.(gate|router)(\.|$)", low) and "gate_proj" not in low:
        return "router"
    if re.search(r"(position|pos_emb|wpe\b|embed_positions)", low):
        return "position_embedding"
    if re.search(r"(linear_attn|mamba|mixer|ssm|recurrent|conv|rwkv|xlstm|time_mix)", low):
        return "linear_attention"
    if re.search(r"(attn|attention)", low):
        return "attention_kv" if re.search(r"\.(k_proj|v_proj)\.", low) else "attention"
    return "mlp"


def _groups(model: Any) -> tuple[dict[str, int], dict[str, int]]:
    """(parameters, persistent buffers) by group, each tensor once."""
    torch, _ = _import()
    owner = {}
    for mod_name, module in model.named_modules():
        for t in list(module.parameters(recurse=False)) + list(module.buffers(recurse=False)):
            owner.setdefault(id(t), type(module).__name__)
    out_emb = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    in_emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    emb_ids = {id(p) for m in (in_emb,) if isinstance(m, torch.nn.Module) for p in m.parameters()}
    head_ids = {id(p) for m in (out_emb,) if isinstance(m, torch.nn.Module) for p in m.parameters()}
    params: dict[str, int] = {}
    param_ids = set()
    for name, p in model.named_parameters():          # a tied weight appears once
        param_ids.add(id(p))
        if id(p) in emb_ids:
            group = "embedding"
        elif id(p) in head_ids:
            group = "lm_head"
        else:
            group = param_group(name, owner.get(id(p), ""))
        params[group] = params.get(group, 0) + p.numel()
    buffers: dict[str, int] = {}
    seen = set()
    for name, t in model.state_dict(keep_vars=True).items():
        if id(t) in param_ids or id(t) in seen:
            continue
        seen.add(id(t))
        group = param_group(name, owner.get(id(t), ""))
        buffers[group] = buffers.get(group, 0) + t.numel()
    return params, buffers


@dataclass(frozen=True)
class CacheLayout:
    """The cache one sequence holds, layer by layer, as the meta forward filled it."""

    layers: tuple[LayerCache, ...]
    states: tuple[LayerState, ...]
    kinds: tuple[str, ...]          # the cache layer class of every decoder layer, in order


def _tensors(obj: Any, path: str, out: dict[int, tuple[str, Any]], depth: int = 0) -> None:
    """Every floating tensor an object of the cache holds, each once, with where it is."""
    import torch

    if depth > 4 or obj is None:
        return
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point():
            out.setdefault(id(obj), (path, obj))
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            _tensors(value, f"{path}[{key}]", out, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            _tensors(value, f"{path}[{i}]", out, depth + 1)
    elif hasattr(obj, "__dict__") and not isinstance(obj, (torch.nn.Module, type)):
        for key, value in vars(obj).items():
            if not key.startswith("_"):
                _tensors(value, f"{path}.{key}" if path else key, out, depth + 1)


def _counts(layer: Any) -> dict[str, int]:
    """Values per tensor of one cache layer; a causal convolution's state counted as vLLM keeps it (kernel - 1)."""
    found: dict[int, tuple[str, Any]] = {}
    _tensors(layer, "", found)
    out = {}
    for path, t in found.values():
        count = t.numel()
        if path.startswith("conv_states") and t.dim() >= 2 and t.shape[-1] > 1:
            count = count // t.shape[-1] * (t.shape[-1] - 1)     # transformers pads it to the full kernel
        out[path] = count
    return out


def cache_argument(model: Any) -> str:
    """The name a model's forward takes its cache by: ``cache`` in transformers 5, older names before it."""
    import inspect

    names = inspect.signature(model.forward).parameters
    return next((n for n in ("cache", "past_key_values", "cache_params") if n in names), "past_key_values")


def _forward(model: Any, tokens: int, hand_in: bool = True) -> list[Any]:
    """The cache layers a meta forward of ``tokens`` tokens fills.

    The cache is handed in (``hand_in``), built from the model's config as ``generate`` builds it:
    without one, some models first look for packed sequences in the position ids, a data-dependent
    check the meta device cannot answer. A model with a cache class of its own builds it itself.
    """
    torch, transformers = _import()
    from transformers import DynamicCache

    ids = torch.zeros((1, tokens), dtype=torch.long, device="meta")
    given = {cache_argument(model): DynamicCache(config=model.config)} if hand_in else {}
    with _quiet_and_offline(), torch.no_grad():
        out = model(input_ids=ids, use_cache=True, **given)
    cache = getattr(out, "cache", None)
    if cache is None:
        cache = getattr(out, "past_key_values", None)
    cache = getattr(cache, "self_attention_cache", cache)
    layers = getattr(cache, "layers", None)
    if not isinstance(layers, list):
        raise CourseInputError(f"transformers {transformers.__version__} keeps no per-layer cache for it "
                               f"({type(cache).__name__}), so its KV cache cannot be measured here")
    return layers


def measure_cache(model: Any, where: str) -> CacheLayout:
    """Per attention layer its :class:`LayerCache`, per stateful layer its :class:`LayerState`.

    The whole model runs first; if its text-only forward fails (some image-text models expect an
    image), its text decoder (``get_decoder()``), which holds the cache, runs alone; then the whole
    model with a cache of its own making.
    """
    _, transformers = _import()
    runs, failure = None, None
    decoder = getattr(model, "get_decoder", lambda: None)()
    for module, hand_in in ((model, True), (decoder, True), (model, False)):
        if module is None:
            continue
        try:
            runs = [_forward(module, n, hand_in) for n in LENGTHS]
            break
        except CourseInputError:
            raise
        except Exception as exc:
            failure = exc
    if runs is None:
        raise CourseInputError(f"{where}: transformers {transformers.__version__} cannot run it on the meta "
                               f"device to fill its cache ({_one_line(failure)})") from None
    kinds = [type(layer).__name__ for layer in runs[1]]
    if any(kind in deepseek_v4.CACHE_LAYERS for kind in kinds):       # compressed layers: a formula, see its module
        caches, states = deepseek_v4.cache_layout(model.config.get_text_config(decoder=True))
        return CacheLayout(caches, states, tuple(kinds))
    caches, states, kinds = [], [], []
    for index, (short, long) in enumerate(zip(*runs)):
        kind = type(long).__name__
        kinds.append(kind)
        if kind not in KNOWN_CACHE_LAYERS:
            raise CourseInputError(f"{where}: transformers caches layer {index} in a {kind}, whose tensors this "
                                   f"measurement does not model; its KV cache cannot be budgeted here")
        window = getattr(long, "sliding_window", None) if getattr(long, "is_sliding", False) else None
        if window is not None and window < MIN_WINDOW:
            raise CourseInputError(f"{where}: layer {index} has a sliding window of {window} tokens; "
                                   f"use a window of at least {MIN_WINDOW}")
        counts = [_counts(run) for run in (short, long)]
        per_token = fixed_recurrent = fixed_conv = 0
        for path in sorted(set(counts[0]) | set(counts[1])):
            grows, fixed = split_growth(LENGTHS, (counts[0].get(path, 0), counts[1].get(path, 0)))
            if grows < 0 or (grows and fixed):
                raise CourseInputError(f"{where}: layer {index}'s cache tensor {path} neither grows by a fixed "
                                       f"amount per token nor stays the same; it cannot be budgeted here")
            per_token += grows
            if path.startswith("conv_states"):
                fixed_conv += fixed
            else:
                fixed_recurrent += fixed
        if per_token:
            keys = getattr(long, "keys", None)
            heads = int(keys.shape[1]) if keys is not None and keys.dim() == 4 else 0
            caches.append(LayerCache(per_token, window, heads))
        if fixed_recurrent or fixed_conv:
            held = [t for t in (getattr(long, "recurrent_states", None) or {}).values() if t is not None]
            heads = int(held[0].shape[1]) if held and held[0].dim() >= 3 else 1
            states.append(LayerState(fixed_recurrent, fixed_conv, heads))
    return CacheLayout(tuple(caches), tuple(states), tuple(kinds))


# ------------------------------------------------------------------ the spec

def _ssm_dtyped(states: tuple[LayerState, ...], text: Any) -> tuple[LayerState, ...]:
    """``states`` with the recurrent state's dtype the config names (``mamba_ssm_cache_dtype``, Nemotron-H;
    ``mamba_ssm_dtype``, Qwen3.5), if it names one."""
    named = _attr(text, "mamba_ssm_cache_dtype") or _attr(text, "mamba_ssm_dtype")
    return tuple(replace(s, ssm_dtype=str(named)) for s in states) if isinstance(named, str) else states


def _attr(config: Any, name: str) -> Any:
    """``config.name``, or ``None`` (also for a per-layer attribute that differs from layer to layer)."""
    try:
        return getattr(config, name, None)
    except Exception:          # e.g. AmbiguousGlobalPerLayerAttributeError
        return None


def _dim(config: Any, *names: str, default: int = 0) -> int:
    """The first of ``names`` the config gives as a positive int."""
    for name in names:
        value = _attr(config, name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


#: The specs built in this process, newest last: the same config, name and reason give the same frozen spec,
#: so a notebook's explorer or a second verb on the same model does not build and run it again (building
#: DeepSeek-V4-Flash and running its forward on the meta device takes ~13 s of CPU). Only what was built is kept;
#: a refusal is raised again each time.
_BUILT: OrderedDict[str, ModelSpec] = OrderedDict()
_BUILT_MOST = 32


def meta_spec(cfg: Mapping[str, Any], name: str, why: str | None = None) -> ModelSpec:
    """The :class:`ModelSpec` of the model transformers builds from ``cfg``: every figure read from the model.

    Built in bf16, and once more in fp32 if a kernel refuses bf16 on the meta device (the counts do not
    depend on it). Whatever transformers raises on an untrusted config becomes one line. ``why`` says why
    the model is built here (default: its model_type has no formula). A spec already built in this process
    for the same config (as JSON, keys sorted), name, reason and transformers release is returned as built.
    """
    _, transformers = _import()
    try:
        key = json.dumps([cfg, name, why, transformers.__version__], sort_keys=True, default=repr)
    except (TypeError, ValueError):   # keys of mixed types, a circular value: build it, keep nothing
        return _meta_spec(cfg, name, why)
    if key in _BUILT:
        _BUILT.move_to_end(key)
        return _BUILT[key]
    spec = _meta_spec(cfg, name, why)
    _BUILT[key] = spec
    while len(_BUILT) > _BUILT_MOST:
        _BUILT.popitem(last=False)
    return spec


def _meta_spec(cfg: Mapping[str, Any], name: str, why: str | None) -> ModelSpec:
    where = f"config (model_type={cfg.get('model_type')!r:.60})"
    model, config = build(cfg)
    try:
        return _spec(model, config, cfg, name, where, why)
    except CourseInputError as first:
        if "cannot run it on the meta device" not in str(first):
            raise
        model, config = build(cfg, "float32")
        try:
            return _spec(model, config, cfg, name, where, why)
        except CourseInputError:
            raise first from None


def _spec(model: Any, config: Any, cfg: Mapping[str, Any], name: str, where: str, why: str | None) -> ModelSpec:
    _, transformers = _import()
    try:
        params, buffers = _groups(model)
        layout = measure_cache(model, where)
        return _assemble(model, config, cfg, name, params, buffers, layout, why)
    except CourseInputError:
        raise
    except Exception as exc:          # reading a model transformers built from an untrusted config
        raise CourseInputError(f"{where}: transformers {transformers.__version__} built it, but reading its "
                               f"shape failed ({_one_line(exc)})") from None


def _assemble(model: Any, config: Any, cfg: Mapping[str, Any], name: str, params: dict[str, int],
              buffers: dict[str, int], layout: CacheLayout, why: str | None) -> ModelSpec:
    _, transformers = _import()
    text = config.get_text_config(decoder=True)
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    shape = tuple(getattr(getattr(emb, "weight", None), "shape", ()) or ())
    vocab = _dim(text, "vocab_size", default=int(shape[0]) if len(shape) == 2 else 1)
    hidden = _dim(text, "hidden_size", "d_model", "n_embd", default=int(shape[1]) if len(shape) == 2 else 1)
    heads = _dim(text, "num_attention_heads", "n_head", "num_heads", default=1)
    kv_heads = max((layer.kv_heads for layer in layout.layers), default=0) or \
        _dim(text, "num_key_value_heads", default=heads)
    mla = any(n.endswith("kv_a_proj_with_mqa") for n, _ in model.named_modules())
    attention = "mla" if mla else ("mha" if kv_heads == heads else ("mqa" if kv_heads == 1 else "gqa"))
    if not layout.layers:
        attention = "none"               # no layer caches K/V (a Mamba or RWKV-like model)
    towers = params.get("vision", 0)
    default_why = f"model_type={cfg.get('model_type')!r} has no formula here"
    counted = (f"built by transformers {transformers.__version__} on the meta device: text decoder"
               + (f" + towers and projectors ({towers:,} params)" if towers else ""),)
    return ModelSpec(
        name=name, model_type=str(cfg.get("model_type")), hidden_size=hidden,
        num_layers=_dim(text, "num_hidden_layers", "n_layer", "num_layers", default=len(layout.kinds)),
        num_attention_heads=heads, num_kv_heads=max(1, kv_heads),
        head_dim=_dim(text, "head_dim", default=max(1, hidden // max(1, heads))),
        intermediate_size=_dim(text, "intermediate_size", "ffn_dim", "n_inner", default=4 * hidden),
        vocab_size=vocab, params=params, layers=layout.layers, states=_ssm_dtyped(layout.states, text), buffers=buffers,
        tie_word_embeddings=_attr(config, "tie_word_embeddings") is True, attention=attention,
        num_experts=_dim(text, "num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"),
        num_experts_per_tok=_dim(text, "num_experts_per_tok", "moe_topk", "top_k_experts"),
        max_position_embeddings=_dim(text, "max_position_embeddings", "n_positions") or None,
        counted=counted,
        vision_config=dict(cfg["vision_config"]) if isinstance(cfg.get("vision_config"), Mapping) else {},
        notes=(f"{why or default_why}: parameters, buffers and the cache were measured on the model transformers "
               f"{transformers.__version__} builds from the config on the meta device (no weights)",),
    )

"""Model shapes from a Hugging Face ``config.json``: parameter count and KV cache.

A :class:`ModelSpec` holds what memory depends on: the parameter count (split
into named groups, so tensor parallelism knows what is sharded and what is
replicated) and, per layer, what attention caches for each token.

Weights are the big, mostly fixed pool: ``params x bytes per value``.
The KV cache grows with tokens: for ordinary (MHA/GQA/MQA) attention each
layer stores a key and a value vector per KV head per token, hence the ``2 x``:

    kv_bytes_per_token = 2 x layers x kv_heads x head_dim x bytes

Worked example (Llama-3-8B, fp16): 2 x 32 x 8 x 128 x 2 = 131,072 B per token,
so a 4,096-token sequence holds 536,870,912 B = 0.54 GB (exactly 0.5 GiB).

>>> spec = from_hf_config({"model_type": "llama", "hidden_size": 4096,
...     "intermediate_size": 14336, "num_hidden_layers": 32,
...     "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256})
>>> spec.params_total
8030261248
>>> kv_cache_bytes_per_token(spec, "fp16")
131072
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .dtypes import DType, get_dtype
from .errors import CourseInputError, check_count

# Parameter groups and how tensor parallelism treats them (vLLM's layout):
#   sharded    - split across the N GPUs (column/row-parallel linears, vocab-parallel embeddings)
#   kv         - key/value projections: split by KV head, replicated once N > kv_heads
#   replicated - every GPU holds a full copy (norms, MoE routers, learned position tables)
SHARDED_GROUPS = ("embedding", "lm_head", "attention", "mlp", "experts", "shared_experts")
KV_GROUPS = ("attention_kv",)
REPLICATED_GROUPS = ("norms", "router", "position_embedding")


@dataclass(frozen=True)
class LayerCache:
    """What one attention layer caches per token.

    values_per_token: cached values for one token in this layer, for the whole
        model width (``2 x kv_heads x head_dim`` for MHA/GQA/MQA; ``kv_lora_rank
        + qk_rope_head_dim`` for MLA, which caches one compressed latent, no 2x).
    window: sliding-window size, the most tokens this layer ever keeps
        (``None`` for full attention).
    kv_heads: KV heads the values are split over (0 for MLA, whose latent is
        not split by head and is replicated on every tensor-parallel GPU).
    """

    values_per_token: int
    window: int | None = None
    kv_heads: int = 0

    def cached_tokens(self, tokens: int) -> int:
        """Tokens this layer holds for a sequence of ``tokens``: min(tokens, window)."""
        return tokens if self.window is None else min(tokens, self.window)

    def values_per_token_per_gpu(self, tensor_parallel: int) -> int:
        """Values per token on one GPU; KV heads are split, but never below one head."""
        if self.kv_heads == 0 or tensor_parallel == 1:
            return self.values_per_token
        per_head = self.values_per_token // self.kv_heads
        return per_head * max(1, self.kv_heads // tensor_parallel)


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a decoder-only model, as memory sees it.

    params: parameter count by group (see SHARDED_GROUPS / KV_GROUPS /
        REPLICATED_GROUPS); ``params_total`` is their sum.
    layers: one :class:`LayerCache` per layer, in order.
    The remaining fields are the config's dimensions, with uniform names.
    """

    name: str
    model_type: str
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    params: Mapping[str, int]
    layers: tuple[LayerCache, ...]
    tie_word_embeddings: bool = False
    attention: str = "gqa"  # mha, gqa, mqa or mla
    num_experts: int = 0
    num_experts_per_tok: int = 0
    max_position_embeddings: int | None = None
    torch_dtype: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def params_total(self) -> int:
        """Every parameter of the checkpoint (tied embeddings counted once)."""
        return sum(self.params.values())

    @property
    def sliding_window_layers(self) -> int:
        return sum(1 for layer in self.layers if layer.window is not None)


# --------------------------------------------------------------------- loading

def load_config(source: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """Return a config dict from a dict, or from a path to a ``config.json``."""
    if isinstance(source, Mapping):
        return dict(source)
    path = Path(source)
    if not path.is_file():
        raise CourseInputError(f"config={str(path)!r} is not a file; give the path of a Hugging Face config.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CourseInputError(f"config={str(path)!r} is not valid JSON ({exc}); give a Hugging Face config.json") from None
    if not isinstance(data, dict):
        raise CourseInputError(f"config={str(path)!r} holds a {type(data).__name__}, not a JSON object; give a Hugging Face config.json")
    return data


_MISSING = object()
#: No real config has a dimension (layers, heads, hidden size, vocab) near this; it guards
#: against typos that would otherwise build huge per-layer tables.
MAX_DIMENSION = 100_000_000


class _Config:
    """Read config keys under any of the names a family uses, with checks."""

    def __init__(self, cfg: Mapping[str, Any]):
        self.cfg = cfg
        self.model_type = str(cfg.get("model_type", "?"))

    def get(self, *keys: str, default: Any = _MISSING) -> Any:
        for key in keys:
            if key in self.cfg and self.cfg[key] is not None:
                return self.cfg[key]
        if default is _MISSING:
            raise CourseInputError(
                f"config for model_type={self.model_type!r} lacks {' / '.join(repr(k) for k in keys)}; "
                f"add it to config.json"
            )
        return default

    def count(self, *keys: str, default: Any = _MISSING, minimum: int = 1) -> int:
        value = self.get(*keys, default=default)
        try:
            value = check_count(keys[0], value, minimum)
        except CourseInputError as exc:
            raise CourseInputError(f"config for model_type={self.model_type!r}: {exc}") from None
        if value > MAX_DIMENSION:
            raise CourseInputError(
                f"config for model_type={self.model_type!r}: {keys[0]}={value} is implausibly large; "
                f"use a value <= {MAX_DIMENSION:,}"
            )
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key, default)
        return default if value is None else bool(value)


def _heads(c: _Config, hidden: int, heads: int, kv_heads: int) -> int:
    if kv_heads > heads or heads % kv_heads:
        raise CourseInputError(
            f"config for model_type={c.model_type!r}: num_key_value_heads={kv_heads} must divide "
            f"num_attention_heads={heads}"
        )
    head_dim = c.get("head_dim", default=None)
    if head_dim is None:
        if hidden % heads:
            raise CourseInputError(
                f"config for model_type={c.model_type!r}: hidden_size={hidden} is not divisible by "
                f"num_attention_heads={heads}; add head_dim"
            )
        return hidden // heads
    return check_count("head_dim", head_dim, 1)


def _windows(c: _Config, num_layers: int, *, sliding_window: int | None,
             default_sliding: Callable[[int], bool]) -> list[int | None]:
    """Per-layer window: an explicit ``layer_types`` list wins over the family rule."""
    layer_types = c.cfg.get("layer_types")
    if layer_types is not None and not isinstance(layer_types, (list, tuple)):
        raise CourseInputError(f"config: layer_types={layer_types!r} is not a list; use one entry per layer")
    if layer_types:
        if len(layer_types) != num_layers:
            raise CourseInputError(
                f"config: layer_types has {len(layer_types)} entries for num_hidden_layers={num_layers}"
            )
        sliding = [t == "sliding_attention" for t in layer_types]
    else:
        sliding = [default_sliding(i) for i in range(num_layers)]
    if sliding_window is None:
        return [None] * num_layers
    window = check_count("sliding_window", sliding_window, 1)
    return [window if s else None for s in sliding]


def _decoder(c: _Config, *, name: str, hidden: int, heads: int, kv_heads: int, head_dim: int,
             layers: int, intermediate: int, vocab: int, params: dict[str, int], tied: bool,
             windows: list[int | None], **extra: Any) -> ModelSpec:
    attention = "mha" if kv_heads == heads else ("mqa" if kv_heads == 1 else "gqa")
    cache = tuple(LayerCache(2 * kv_heads * head_dim, w, kv_heads) for w in windows)
    return ModelSpec(
        name=name, model_type=c.model_type, hidden_size=hidden, num_layers=layers,
        num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
        intermediate_size=intermediate, vocab_size=vocab, params=params, layers=cache,
        tie_word_embeddings=tied, attention=extra.pop("attention", attention),
        max_position_embeddings=c.get("max_position_embeddings", "n_positions", default=None),
        torch_dtype=c.get("torch_dtype", default=None), **extra,
    )


# ------------------------------------------------------------ per-family counts

def _llama_family(c: _Config, name: str) -> ModelSpec:
    """llama, mistral, mixtral, qwen2, gemma2, phi3: RMSNorm, rotary, gated MLP.

    Per layer: q/o are hidden x (heads*head_dim); k/v are hidden x (kv_heads*head_dim);
    the gated MLP is 3 x hidden x intermediate (phi3 fuses qkv and gate/up, same count);
    mixtral has that MLP per expert plus a hidden x experts router.
    """
    mt = c.model_type
    hidden = c.count("hidden_size")
    layers = c.count("num_hidden_layers")
    heads = c.count("num_attention_heads")
    kv_heads = c.count("num_key_value_heads", default=heads)
    head_dim = _heads(c, hidden, heads, kv_heads)
    intermediate = c.count("intermediate_size")
    vocab = c.count("vocab_size")
    tied = c.flag("tie_word_embeddings", mt == "gemma2")  # HF defaults: Gemma2Config ties, the others don't
    q_width, kv_width = heads * head_dim, kv_heads * head_dim

    attn_bias = c.flag("attention_bias", False)          # llama/mistral: one switch for q,k,v,o
    qkv_bias = attn_bias or mt == "qwen2"                # qwen2: bias on q, k, v only
    attention = hidden * q_width + q_width * hidden + (q_width if qkv_bias else 0) + (hidden if attn_bias else 0)
    attention_kv = 2 * hidden * kv_width + (2 * kv_width if qkv_bias else 0)
    mlp_one = 3 * hidden * intermediate + (2 * intermediate + hidden if c.flag("mlp_bias", False) else 0)
    norms_per_layer = 4 if mt == "gemma2" else 2          # gemma2 adds pre/post-feedforward norms

    params = {
        "embedding": vocab * hidden,
        "attention": layers * attention,
        "attention_kv": layers * attention_kv,
        "norms": layers * norms_per_layer * hidden + hidden,
    }
    extra: dict[str, Any] = {}
    if mt == "mixtral":
        experts = c.count("num_local_experts")
        params["experts"] = layers * experts * mlp_one
        params["router"] = layers * hidden * experts
        extra = {"num_experts": experts, "num_experts_per_tok": c.count("num_experts_per_tok", default=2)}
    else:
        params["mlp"] = layers * mlp_one
    if not tied:
        params["lm_head"] = vocab * hidden

    # Which layers use a sliding window, per family (HF's defaults when keys are absent).
    if mt == "gemma2":
        window = c.get("sliding_window", default=4096)
        windows = _windows(c, layers, sliding_window=window, default_sliding=lambda i: i % 2 == 0)
    elif mt == "qwen2":
        use = c.flag("use_sliding_window", False)
        first = c.count("max_window_layers", default=layers, minimum=0)
        window = c.get("sliding_window", default=None) if use else None
        windows = _windows(c, layers, sliding_window=window, default_sliding=lambda i: i >= first)
    else:
        # mistral's HF default is 4096 when the key is absent; v0.2+ configs set null.
        default_window = 4096 if mt == "mistral" and "sliding_window" not in c.cfg else None
        window = c.get("sliding_window", default=default_window)
        windows = _windows(c, layers, sliding_window=window, default_sliding=lambda i: True)

    return _decoder(c, name=name, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                    layers=layers, intermediate=intermediate, vocab=vocab, params=params,
                    tied=tied, windows=windows, **extra)


def _gpt2(c: _Config, name: str) -> ModelSpec:
    """GPT-2: LayerNorm with bias, fused qkv (Conv1D) with bias, learned positions, tied head."""
    hidden = c.count("n_embd", "hidden_size")
    layers = c.count("n_layer", "num_hidden_layers")
    heads = c.count("n_head", "num_attention_heads")
    head_dim = _heads(c, hidden, heads, heads)
    inner = c.count("n_inner", default=4 * hidden)
    vocab = c.count("vocab_size")
    positions = c.count("n_positions", "max_position_embeddings")
    params = {
        "embedding": vocab * hidden,
        "position_embedding": positions * hidden,
        # c_attn (q,k,v) and c_proj with biases; the k/v third is split out for TP
        "attention": layers * (hidden * hidden + hidden + hidden * hidden + hidden),
        "attention_kv": layers * (2 * hidden * hidden + 2 * hidden),
        "mlp": layers * (hidden * inner + inner + inner * hidden + hidden),
        "norms": layers * 2 * 2 * hidden + 2 * hidden,     # ln_1, ln_2 (weight+bias), ln_f
    }
    return _decoder(c, name=name, hidden=hidden, heads=heads, kv_heads=heads, head_dim=head_dim,
                    layers=layers, intermediate=inner, vocab=vocab, params=params, tied=True,
                    windows=[None] * layers)


def _opt(c: _Config, name: str) -> ModelSpec:
    """OPT: learned positions with an offset of 2 rows, biases everywhere, optional projections."""
    hidden = c.count("hidden_size")
    layers = c.count("num_hidden_layers")
    heads = c.count("num_attention_heads")
    head_dim = _heads(c, hidden, heads, heads)
    ffn = c.count("ffn_dim")
    vocab = c.count("vocab_size")
    positions = c.count("max_position_embeddings")
    proj = c.count("word_embed_proj_dim", default=hidden)
    bias = c.flag("enable_bias", True)
    b = 1 if bias else 0
    affine = c.flag("layer_norm_elementwise_affine", True)
    ln = 2 * hidden if affine else 0
    final_ln = c.flag("do_layer_norm_before", True) and not c.flag("_remove_final_layer_norm", False)
    params = {
        "embedding": vocab * proj + (2 * proj * hidden if proj != hidden else 0),  # + project_in/out
        "position_embedding": (positions + 2) * hidden,  # OPTLearnedPositionalEmbedding offset = 2
        "attention": layers * 2 * (hidden * hidden + b * hidden),
        "attention_kv": layers * 2 * (hidden * hidden + b * hidden),
        "mlp": layers * (hidden * ffn + b * ffn + ffn * hidden + b * hidden),
        "norms": layers * 2 * ln + (ln if final_ln else 0),
    }
    return _decoder(c, name=name, hidden=hidden, heads=heads, kv_heads=heads, head_dim=head_dim,
                    layers=layers, intermediate=ffn, vocab=vocab, params=params,
                    tied=c.flag("tie_word_embeddings", True), windows=[None] * layers)


def _falcon(c: _Config, name: str) -> ModelSpec:
    """Falcon: fused query_key_value; multi-query (7B) or grouped KV (new_decoder_architecture)."""
    hidden = c.count("hidden_size", "n_embed")
    layers = c.count("num_hidden_layers", "n_layer")
    heads = c.count("num_attention_heads", "n_head")
    new_arch = c.flag("new_decoder_architecture", False)
    if new_arch:
        kv_heads = c.count("num_kv_heads", "n_head_kv", default=heads)
    elif c.flag("multi_query", True):
        kv_heads = 1
    else:
        kv_heads = heads
    head_dim = _heads(c, hidden, heads, kv_heads)
    ffn = c.count("ffn_hidden_size", default=4 * hidden)
    vocab = c.count("vocab_size")
    b = 1 if c.flag("bias", False) else 0
    q_width, kv_width = heads * head_dim, 2 * kv_heads * head_dim
    n_ln = c.get("num_ln_in_parallel_attn", default=2 if new_arch else None)
    if not c.flag("parallel_attn", True):
        lns = 2
    else:
        lns = 2 if n_ln == 2 else 1
    params = {
        "embedding": vocab * hidden,
        "attention": layers * (hidden * q_width + b * q_width + q_width * hidden + b * hidden),
        "attention_kv": layers * (hidden * kv_width + b * kv_width),
        "mlp": layers * (hidden * ffn + b * ffn + ffn * hidden + b * hidden),
        "norms": layers * lns * 2 * hidden + 2 * hidden,
    }
    tied = c.flag("tie_word_embeddings", True)
    if not tied:
        params["lm_head"] = vocab * hidden
    return _decoder(c, name=name, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                    layers=layers, intermediate=ffn, vocab=vocab, params=params, tied=tied,
                    windows=[None] * layers)


def _deepseek_v2(c: _Config, name: str) -> ModelSpec:
    """DeepSeek-V2: multi-head latent attention (MLA) and DeepSeekMoE.

    MLA caches one compressed latent per token per layer: kv_lora_rank values
    plus the shared rotary key (qk_rope_head_dim): no 2x, no per-head copies.
    Layers before ``first_k_dense_replace`` use a dense MLP; the rest have
    routed experts, shared experts and a router (gate).
    """
    hidden = c.count("hidden_size")
    layers = c.count("num_hidden_layers")
    heads = c.count("num_attention_heads")
    vocab = c.count("vocab_size")
    intermediate = c.count("intermediate_size")
    kv_lora = c.count("kv_lora_rank")
    q_lora = c.get("q_lora_rank", default=None)
    rope = c.count("qk_rope_head_dim")
    nope = c.count("qk_nope_head_dim")
    v_head = c.count("v_head_dim")
    b = 1 if c.flag("attention_bias", False) else 0
    q_head = nope + rope
    if q_lora is None:
        q_params = hidden * heads * q_head
    else:
        q_lora = check_count("q_lora_rank", q_lora, 1)
        q_params = hidden * q_lora + b * q_lora + q_lora + q_lora * heads * q_head   # q_a, q_a_layernorm, q_b
    attn = (q_params
            + heads * v_head * hidden + b * hidden                                 # o_proj
            + kv_lora * heads * (nope + v_head))                                  # kv_b_proj
    attn_kv = hidden * (kv_lora + rope) + b * (kv_lora + rope) + kv_lora          # kv_a_proj_with_mqa + kv_a_layernorm
    routed = c.get("n_routed_experts", default=None)
    shared = c.count("n_shared_experts", default=0, minimum=0)
    first_dense = c.count("first_k_dense_replace", default=0, minimum=0)
    freq = c.count("moe_layer_freq", default=1)
    moe_inter = c.count("moe_intermediate_size", default=intermediate)
    moe_layers = 0 if routed is None else sum(
        1 for i in range(layers) if i >= first_dense and i % freq == 0)
    routed_n = 0 if routed is None else check_count("n_routed_experts", routed, 1)
    params = {
        "embedding": vocab * hidden,
        "attention": layers * attn,
        "attention_kv": layers * attn_kv,
        "mlp": (layers - moe_layers) * 3 * hidden * intermediate,
        "experts": moe_layers * routed_n * 3 * hidden * moe_inter,
        "shared_experts": moe_layers * 3 * hidden * moe_inter * shared,
        "router": moe_layers * routed_n * hidden,
        "norms": layers * 2 * hidden + hidden,
    }
    tied = c.flag("tie_word_embeddings", False)
    if not tied:
        params["lm_head"] = vocab * hidden
    cache = tuple(LayerCache(kv_lora + rope) for _ in range(layers))
    return ModelSpec(
        name=name, model_type=c.model_type, hidden_size=hidden, num_layers=layers,
        num_attention_heads=heads, num_kv_heads=c.count("num_key_value_heads", default=heads),
        head_dim=q_head, intermediate_size=intermediate, vocab_size=vocab, params=params,
        layers=cache, tie_word_embeddings=tied, attention="mla", num_experts=routed_n,
        num_experts_per_tok=c.count("num_experts_per_tok", default=0, minimum=0),
        max_position_embeddings=c.get("max_position_embeddings", default=None),
        torch_dtype=c.get("torch_dtype", default=None),
    )


FAMILIES: dict[str, Callable[[_Config, str], ModelSpec]] = {
    "llama": _llama_family, "mistral": _llama_family, "mixtral": _llama_family,
    "qwen2": _llama_family, "gemma2": _llama_family, "phi3": _llama_family,
    "gpt2": _gpt2, "opt": _opt, "falcon": _falcon, "deepseek_v2": _deepseek_v2,
}


def _generic(c: _Config, name: str, params_total: int) -> ModelSpec:
    """An unsupported family with an explicit parameter count: read the common keys for the KV cache."""
    hidden = c.count("hidden_size", "n_embd", "d_model")
    layers = c.count("num_hidden_layers", "n_layer", "num_layers")
    heads = c.count("num_attention_heads", "n_head", "num_heads")
    kv_heads = c.count("num_key_value_heads", "num_kv_heads", default=heads)
    head_dim = _heads(c, hidden, heads, kv_heads)
    window = c.get("sliding_window", default=None)
    windows = _windows(c, layers, sliding_window=window, default_sliding=lambda i: True)
    return _decoder(c, name=name, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                    layers=layers, intermediate=c.count("intermediate_size", default=4 * hidden),
                    vocab=c.count("vocab_size", default=1), params={"given": params_total},
                    tied=c.flag("tie_word_embeddings", False), windows=windows,
                    notes=("parameter count given explicitly; tensor parallelism treats it as fully sharded",))


def from_hf_config(source: Mapping[str, Any] | str | Path, *, name: str | None = None,
                   params_total: int | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from a Hugging Face config (a dict or a path).

    ``params_total`` overrides the count (and is required for a model_type we
    do not know; the KV cache is then read from the common keys).

    >>> gpt2 = from_hf_config({"model_type": "gpt2", "n_embd": 768, "n_layer": 12,
    ...                        "n_head": 12, "n_positions": 1024, "vocab_size": 50257})
    >>> gpt2.params_total          # the published 124,439,808 of openai-community/gpt2
    124439808
    >>> from_hf_config({"model_type": "mamba"})
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: model_type='mamba' is not supported; supported: deepseek_v2, falcon, gemma2, gpt2, llama, mistral, mixtral, opt, phi3, qwen2 (or give the parameter count explicitly: params_total=... / --params N)
    """
    cfg = load_config(source)
    model_type = cfg.get("model_type")
    label = name or str(cfg.get("_name_or_path") or model_type or "model")
    c = _Config(cfg)
    if params_total is not None:
        params_total = check_count("params_total", params_total, 1)
    if isinstance(model_type, str) and model_type in FAMILIES:
        spec = FAMILIES[model_type](c, label)
        if params_total is not None:
            spec = _override_params(spec, params_total)
        return spec
    if params_total is not None:
        return _generic(c, label, params_total)
    raise CourseInputError(
        f"model_type={model_type!r} is not supported; supported: {', '.join(sorted(FAMILIES))} "
        f"(or give the parameter count explicitly: params_total=... / --params N)"
    )


def _override_params(spec: ModelSpec, params_total: int) -> ModelSpec:
    from dataclasses import replace
    return replace(spec, params={"given": params_total},
                   notes=spec.notes + ("parameter count given explicitly",))


# ------------------------------------------------------------------ the formulas

def weight_bytes(spec: ModelSpec, dtype: str | DType = "fp16", tensor_parallel: int = 1) -> int:
    """Bytes of weights on one GPU: about params x bytes / N.

    Norms, MoE routers and learned position tables are replicated on every GPU;
    K/V projections split by KV head but never below one head per GPU.

    >>> spec = from_hf_config({"model_type": "llama", "hidden_size": 4096,
    ...     "intermediate_size": 11008, "num_hidden_layers": 32,
    ...     "num_attention_heads": 32, "vocab_size": 32000})     # Llama-2-7B
    >>> weight_bytes(spec, "fp16")                              # 6,738,415,616 params x 2 B
    13476831232
    >>> weight_bytes(spec, "int4")
    3369207808
    """
    tensor_parallel = check_count("tensor_parallel", tensor_parallel, 1)
    dt = get_dtype(dtype)
    return dt.bytes_for(params_per_gpu(spec, tensor_parallel))


def params_per_gpu(spec: ModelSpec, tensor_parallel: int = 1) -> int:
    """Parameters held by one GPU under tensor parallelism of degree N (see :func:`weight_bytes`)."""
    n = check_count("tensor_parallel", tensor_parallel, 1)
    total = 0
    for group, count in spec.params.items():
        if n == 1 or group in REPLICATED_GROUPS:
            total += count
        elif group in KV_GROUPS and spec.attention != "mla":
            kv = spec.num_kv_heads
            total += count * max(1, kv // n) // kv
        elif group in KV_GROUPS:   # MLA's latent projection is small and replicated
            total += count
        else:
            total += math.ceil(count / n)
    return total


def replicated_params(spec: ModelSpec, tensor_parallel: int) -> dict[str, int]:
    """Parameter groups every GPU holds in full under tensor parallelism (for reporting)."""
    out = {g: spec.params[g] for g in REPLICATED_GROUPS if spec.params.get(g)}
    if tensor_parallel > spec.num_kv_heads and "attention_kv" in spec.params and spec.attention != "mla":
        out["attention_kv (KV heads replicated)"] = spec.params["attention_kv"] // spec.num_kv_heads
    return out


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

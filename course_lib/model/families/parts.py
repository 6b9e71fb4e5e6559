"""Building blocks every family formula shares: heads, windows, projections, the final spec.

Each helper counts the parameters of one module the way transformers builds
it, so a family formula reads like its ``modeling_*.py``: attention, MLP,
norms, embeddings.

Worked example: one Llama-3-8B attention block, by hand: q and o are
4096 x 4096 each (33,554,432), k and v are 4096 x 1024 each (8,388,608).

>>> attention(hidden=4096, heads=32, kv_heads=8, head_dim=128)
(33554432, 8388608)
>>> gated_mlp(4096, 14336)         # gate, up, down: 3 x 4096 x 14336
176160768
"""

from __future__ import annotations

from typing import Any, Sequence

from ..spec import LayerCache, LayerState, ModelSpec
from .reader import ATTENTION_LAYER_TYPES, Config

Params = dict[str, int]


def add(params: Params, group: str, count: int) -> None:
    """Add ``count`` parameters to ``group`` (groups with 0 are left out)."""
    if count:
        params[group] = params.get(group, 0) + count


def kv_heads_and_head_dim(c: Config, hidden: int, heads: int, *, kv_default: int | None = None,
                          head_dim_default: int | None = None) -> tuple[int, int]:
    """``num_key_value_heads`` (the family's default when absent) and ``head_dim``.

    ``head_dim`` absent means the family's default, else ``hidden / heads``
    (a family such as Qwen3 defaults to 128 whatever the hidden size).
    """
    kv_heads = c.width("num_key_value_heads", "num_kv_heads", "n_head_kv",
                       default=heads if kv_default is None else kv_default)
    if kv_heads > heads or heads % kv_heads:
        raise c.refuse(f"num_key_value_heads={kv_heads} must divide num_attention_heads={heads}")
    head_dim = c.optional_width("head_dim")
    if head_dim is None:
        head_dim = head_dim_default
    if head_dim is None:
        if hidden % heads:
            raise c.refuse(f"hidden_size={hidden} is not divisible by num_attention_heads={heads}; add head_dim")
        head_dim = hidden // heads
    return kv_heads, head_dim


def attention(*, hidden: int, heads: int, kv_heads: int, head_dim: int, q_bias: bool = False,
              kv_bias: bool = False, o_bias: bool = False, q_mult: int = 1) -> tuple[int, int]:
    """(q + o, k + v) parameters of one attention block; ``q_mult=2`` for a gated q (Qwen3-Next)."""
    q_width, kv_width = heads * head_dim, kv_heads * head_dim
    q_and_o = (hidden * q_width * q_mult + (q_width * q_mult if q_bias else 0)
               + q_width * hidden + (hidden if o_bias else 0))
    k_and_v = 2 * hidden * kv_width + (2 * kv_width if kv_bias else 0)
    return q_and_o, k_and_v


def gated_mlp(hidden: int, intermediate: int, bias: bool = False) -> int:
    """gate, up (hidden -> intermediate) and down (intermediate -> hidden)."""
    return 3 * hidden * intermediate + (2 * intermediate + hidden if bias else 0)


def plain_mlp(hidden: int, intermediate: int, bias: bool = True) -> int:
    """up (hidden -> intermediate) and down, as in GPT-2, GPT-NeoX, StarCoder2."""
    return 2 * hidden * intermediate + (intermediate + hidden if bias else 0)


def types_to_windows(types: Sequence[str], sliding_window: int | None,
                     chunk: int | None = None) -> list[int | None]:
    """Per-layer window from per-layer types: sliding -> the window, chunked -> the chunk."""
    out: list[int | None] = []
    for t in types:
        if t == "sliding_attention":
            out.append(sliding_window)
        elif t == "chunked_attention":
            out.append(chunk)
        else:
            out.append(None)
    return out


def layer_types(c: Config, num_layers: int, default: Sequence[str],
                valid: Sequence[str] = ATTENTION_LAYER_TYPES) -> list[str]:
    """The config's ``layer_types`` when it gives them, else the family's rule."""
    given = c.layer_types(num_layers, valid)
    return given if given is not None else list(default)


def sliding_window(c: Config, default: int | None) -> int | None:
    """``sliding_window``: absent means the family default, an explicit null means none."""
    if "sliding_window" not in c.cfg:
        return default
    return c.optional_width("sliding_window")


def caches(kv_heads: int, head_dim: int, windows: Sequence[int | None]) -> tuple[LayerCache, ...]:
    """One K/V cache entry per attention layer: 2 x kv_heads x head_dim values per token."""
    return tuple(LayerCache(2 * kv_heads * head_dim, w, kv_heads) for w in windows)


def finish(c: Config, *, name: str, hidden: int, heads: int, kv_heads: int, head_dim: int, layers: int,
           intermediate: int, vocab: int, params: Params, tied: bool,
           cache: Sequence[LayerCache] | None = None, windows: Sequence[int | None] | None = None,
           states: Sequence[LayerState] = (), **extra: Any) -> ModelSpec:
    """Assemble the :class:`ModelSpec` (attention kind from the head counts)."""
    if cache is None:
        cache = caches(kv_heads, head_dim, windows if windows is not None else [None] * layers)
    attention_kind = "mha" if kv_heads == heads else ("mqa" if kv_heads == 1 else "gqa")
    return ModelSpec(
        name=name, model_type=c.model_type, hidden_size=hidden, num_layers=layers,
        num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
        intermediate_size=intermediate, vocab_size=vocab, params=params, layers=tuple(cache),
        tie_word_embeddings=tied, attention=extra.pop("attention", attention_kind),
        max_position_embeddings=c.tokens("max_position_embeddings", "n_positions", default=None),
        torch_dtype=None, states=tuple(states), **extra,
    )


def embeddings(params: Params, vocab: int, hidden: int, tied: bool, lm_head_bias: bool = False) -> None:
    """Token embedding, plus an lm_head unless tied (a tied head is the same tensor, counted once)."""
    add(params, "embedding", vocab * hidden)
    if not tied:
        add(params, "lm_head", vocab * hidden)
    if lm_head_bias:
        add(params, "lm_head", vocab)

"""Dense decoders of the Llama lineage: RMSNorm (or LayerNorm), rotary, GQA, one MLP per layer.

llama, mistral, qwen2, qwen3, gemma2, gemma3_text, phi3, olmo2, smollm3,
cohere, granite, glm4, starcoder2. They differ in a few switches, each
written down in :data:`RULES` with transformers' default for a config that
leaves the key out:

* biases: q/k/v/o (``attention_bias``), q/k/v only (Qwen2), MLP (``mlp_bias``);
* extra norms: per-head q/k norms (Qwen3, Gemma-3), full-width q/k norms
  (OLMo-2, Cohere's ``use_qk_norm``), four norms per layer (Gemma, GLM-4);
* which layers slide (see each rule's ``types``);
* ``tie_word_embeddings`` and ``num_key_value_heads`` when absent.

Worked example, Qwen3-0.6B by hand: 28 layers, hidden 1024, 16 q heads /
8 KV heads of 128 (q is 16 x 128 = 2,048 wide, wider than hidden), MLP 3,072,
151,936 x 1,024 tied embeddings (155,582,464); per layer q + o =
2 x 1,024 x 2,048, k + v = 2 x 1,024 x 1,024, MLP 3 x 1,024 x 3,072, norms
2 x 1,024 + q/k norms 2 x 128: 15,730,944; final norm 1,024.

>>> from course_lib.model.families import build
>>> from course_lib.model.families.reader import Config
>>> qwen3 = build(Config({"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
...     "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
...     "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": True}), "qwen3-0.6b")
>>> qwen3.params_total == 155_582_464 + 28 * 15_730_944 + 1024 == 596_049_920
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..spec import ModelSpec
from .parts import (Params, add, attention, embeddings, finish, gated_mlp, kv_heads_and_head_dim,
                    layer_types, plain_mlp, sliding_window, types_to_windows)
from .reader import Config

Types = Callable[[Config, int, "int | None"], list[str]]


def _all_sliding(c: Config, n: int, window: int | None) -> list[str]:
    return ["sliding_attention" if window is not None else "full_attention"] * n


def _qwen_types(c: Config, n: int, window: int | None) -> list[str]:
    # Qwen2/Qwen3Config: sliding only with use_sliding_window, on layers >= max_window_layers
    first = c.layers("max_window_layers", default=28, minimum=0)
    return ["sliding_attention" if window is not None and i >= first else "full_attention" for i in range(n)]


def _every(pattern_key: str | None, default_pattern: int) -> Types:
    # Gemma2: (i + 1) % 2 slides; Gemma3: 5 sliding then 1 global, (i + 1) % 6
    def types(c: Config, n: int, window: int | None) -> list[str]:
        p = c.layers(pattern_key, default=default_pattern) if pattern_key else default_pattern
        return ["sliding_attention" if (i + 1) % p else "full_attention" for i in range(n)]
    return types


def _smollm3_types(c: Config, n: int, window: int | None) -> list[str]:
    # SmolLM3Config: with use_sliding_window, the NoPE layers (no_rope_layers[i] == 0) slide
    interval = c.layers("no_rope_layer_interval", default=4)
    no_rope = c.cfg.get("no_rope_layers")
    if not isinstance(no_rope, list) or len(no_rope) != n or any(x not in (0, 1) or isinstance(x, bool) for x in no_rope):
        if no_rope is not None:
            raise c.refuse(f"no_rope_layers must be a list of {n} zeros and ones")
        no_rope = [int((i + 1) % interval != 0) for i in range(n)]
    slide = window is not None and c.flag("use_sliding_window", False)
    return ["sliding_attention" if slide and not has_rope else "full_attention" for has_rope in no_rope]


@dataclass(frozen=True)
class Rule:
    """How one family differs from Llama (defaults are transformers' for an absent key)."""

    tied: bool = False                   # tie_word_embeddings when absent
    kv_default: int | None = None        # num_key_value_heads when absent (None: = heads)
    head_dim_default: int | None = None  # head_dim when absent (None: hidden / heads)
    bias: str = "attention_bias"         # "attention_bias" (q,k,v,o), "qkv" (q,k,v only), "qkv_flag",
                                         # "use_bias" (StarCoder2: every linear), "none"
    mlp_bias: bool = False               # reads mlp_bias
    mlp: str = "gated"                   # "gated" (gate, up, down) or "plain" (c_fc, c_proj)
    qk_norm: str = "none"                # "head" (head_dim each), "full" (q and kv widths), "flag" (Cohere)
    norms_per_layer: int = 2
    layer_norm_bias: bool = False        # LayerNorm with bias (StarCoder2)
    window_default: int | None = None    # sliding_window when absent
    window_switch: str | None = None     # a flag that must be true for the window to apply
    types: Types = _all_sliding
    vocab_default: int | None = None     # vocab_size when absent (Gemma-3's text_config leaves it out)


RULES: dict[str, Rule] = {
    "llama": Rule(mlp_bias=True),
    "granite": Rule(mlp_bias=True),
    "mistral": Rule(kv_default=8, bias="none", window_default=4096),
    "qwen2": Rule(kv_default=32, bias="qkv", window_default=4096, window_switch="use_sliding_window",
                  types=_qwen_types),
    "qwen3": Rule(kv_default=32, head_dim_default=128, qk_norm="head", window_default=4096,
                  window_switch="use_sliding_window", types=_qwen_types),
    "gemma2": Rule(tied=True, kv_default=4, head_dim_default=256, norms_per_layer=4, window_default=4096,
                   types=_every(None, 2)),
    "gemma3_text": Rule(tied=True, kv_default=4, head_dim_default=256, qk_norm="head", norms_per_layer=4,
                        window_default=4096, types=_every("sliding_window_pattern", 6), vocab_default=262208),
    "phi3": Rule(bias="none"),
    "olmo2": Rule(qk_norm="full"),
    "smollm3": Rule(tied=True, kv_default=4, mlp_bias=True, types=_smollm3_types),
    "cohere": Rule(tied=True, qk_norm="flag", norms_per_layer=1),
    "glm4": Rule(kv_default=2, head_dim_default=128, bias="qkv_flag", norms_per_layer=4),
    "starcoder2": Rule(tied=True, kv_default=2, bias="use_bias", mlp="plain", layer_norm_bias=True),
}
#: Every family in RULES has an untied default except those marked; OLMo-2 has no input norm but a
#: post-feedforward one, still two per layer.


def _biases(c: Config, rule: Rule) -> tuple[bool, bool, bool]:
    """(q bias, k/v bias, o bias)."""
    if rule.bias == "none":
        return False, False, False
    if rule.bias == "qkv":
        return True, True, False
    if rule.bias == "qkv_flag":       # GLM-4: attention_bias (default true) on q, k, v; o has none
        b = c.flag("attention_bias", True)
        return b, b, False
    if rule.bias == "use_bias":
        b = c.flag("use_bias", True)
        return b, b, b
    b = c.flag("attention_bias", False)
    return b, b, b


def dense(c: Config, name: str) -> ModelSpec:
    """A family of :data:`RULES`: embeddings, per-layer attention + MLP + norms, final norm, head."""
    rule = RULES[c.model_type]
    hidden = c.width("hidden_size")
    n = c.layers("num_hidden_layers")
    heads = c.width("num_attention_heads")
    kv_heads, head_dim = kv_heads_and_head_dim(c, hidden, heads, kv_default=rule.kv_default,
                                               head_dim_default=rule.head_dim_default)
    inter = c.width("intermediate_size")
    vocab = c.width("vocab_size") if rule.vocab_default is None else c.width("vocab_size", default=rule.vocab_default)
    tied = c.flag("tie_word_embeddings", rule.tied)
    q_bias, kv_bias, o_bias = _biases(c, rule)
    q_and_o, k_and_v = attention(hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                                 q_bias=q_bias, kv_bias=kv_bias, o_bias=o_bias)
    mlp_bias = rule.mlp_bias and c.flag("mlp_bias", False)
    if rule.mlp == "plain":
        mlp = plain_mlp(hidden, inter, c.flag("use_bias", True))
    else:
        mlp = gated_mlp(hidden, inter, mlp_bias)
    norm = 2 * hidden if rule.layer_norm_bias else hidden      # StarCoder2's LayerNorms keep a bias
    qk_norm = {"none": 0, "head": 2 * head_dim, "full": (heads + kv_heads) * head_dim,
               "flag": (heads + kv_heads) * head_dim if c.flag("use_qk_norm", False) else 0}[rule.qk_norm]

    params: Params = {}
    embeddings(params, vocab, hidden, tied)
    add(params, "attention", n * q_and_o)
    add(params, "attention_kv", n * k_and_v)
    add(params, "mlp", n * mlp)
    add(params, "norms", n * (rule.norms_per_layer * norm + qk_norm) + norm)

    window = sliding_window(c, rule.window_default)
    if rule.window_switch and not c.flag(rule.window_switch, False):
        window = None
    if c.model_type == "gemma3_text" and window is not None and c.flag("use_bidirectional_attention", False):
        window = window // 2 + 1       # Gemma3TextConfig halves the window for bidirectional attention
    types = layer_types(c, n, rule.types(c, n, window))
    return finish(c, name=name, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, layers=n,
                  intermediate=inter, vocab=vocab, params=params, tied=tied,
                  windows=types_to_windows(types, window))

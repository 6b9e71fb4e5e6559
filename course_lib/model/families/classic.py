"""Pre-Llama layouts: GPT-2, OPT, Falcon, GPT-NeoX (Pythia). LayerNorm with bias, fused or biased projections.

Worked example, GPT-NeoX's Pythia-160M: 12 layers, hidden 768, MLP 3,072,
vocab 50,304, untied. Per layer: fused qkv 768 x 2,304 + 2,304, dense
768 x 768 + 768, MLP 768 x 3,072 + 3,072 + 3,072 x 768 + 768, two LayerNorms
4 x 768: 7,087,872. Embeddings in and out: 2 x 50,304 x 768 = 77,266,944;
final LayerNorm 1,536. Total 162,322,944, the published count.

>>> from course_lib.model.families import build
>>> from course_lib.model.families.reader import Config
>>> build(Config({"model_type": "gpt_neox", "hidden_size": 768, "intermediate_size": 3072,
...     "num_hidden_layers": 12, "num_attention_heads": 12, "vocab_size": 50304}), "pythia-160m").params_total
162322944
"""

from __future__ import annotations

from ..spec import ModelSpec
from .parts import Params, add, finish, kv_heads_and_head_dim
from .reader import Config


def gpt2(c: Config, name: str) -> ModelSpec:
    """GPT-2: LayerNorm with bias, fused qkv (Conv1D) with bias, learned positions, tied head."""
    hidden = c.width("n_embd", "hidden_size")
    layers = c.layers("n_layer", "num_hidden_layers")
    heads = c.width("n_head", "num_attention_heads")
    if hidden % heads:
        raise c.refuse(f"n_embd={hidden} is not divisible by n_head={heads}")
    inner = c.width("n_inner", default=4 * hidden)
    vocab = c.width("vocab_size", default=50257)
    positions = c.width("n_positions", "max_position_embeddings", default=1024)
    params: Params = {
        "embedding": vocab * hidden,
        "position_embedding": positions * hidden,
        # c_attn (q,k,v) and c_proj with biases; the k/v third is split out for TP
        "attention": layers * (hidden * hidden + hidden + hidden * hidden + hidden),
        "attention_kv": layers * (2 * hidden * hidden + 2 * hidden),
        "mlp": layers * (hidden * inner + inner + inner * hidden + hidden),
        "norms": layers * 2 * 2 * hidden + 2 * hidden,     # ln_1, ln_2 (weight+bias), ln_f
    }
    return finish(c, name=name, hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads,
                  layers=layers, intermediate=inner, vocab=vocab, params=params, tied=True)


def opt(c: Config, name: str) -> ModelSpec:
    """OPT: learned positions with an offset of 2 rows, biases everywhere, optional projections."""
    hidden = c.width("hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.width("num_attention_heads")
    _, head_dim = kv_heads_and_head_dim(c, hidden, heads)
    ffn = c.width("ffn_dim")
    vocab = c.width("vocab_size")
    positions = c.width("max_position_embeddings")
    proj = c.width("word_embed_proj_dim", default=hidden)
    b = 1 if c.flag("enable_bias", True) else 0
    ln = 2 * hidden if c.flag("layer_norm_elementwise_affine", True) else 0
    final_ln = c.flag("do_layer_norm_before", True) and not c.flag("_remove_final_layer_norm", False)
    params: Params = {
        "embedding": vocab * proj + (2 * proj * hidden if proj != hidden else 0),  # + project_in/out
        "position_embedding": (positions + 2) * hidden,  # OPTLearnedPositionalEmbedding offset = 2
        "attention": layers * 2 * (hidden * hidden + b * hidden),
        "attention_kv": layers * 2 * (hidden * hidden + b * hidden),
        "mlp": layers * (hidden * ffn + b * ffn + ffn * hidden + b * hidden),
        "norms": layers * 2 * ln + (ln if final_ln else 0),
    }
    return finish(c, name=name, hidden=hidden, heads=heads, kv_heads=heads, head_dim=head_dim, layers=layers,
                  intermediate=ffn, vocab=vocab, params=params, tied=c.flag("tie_word_embeddings", True))


def falcon(c: Config, name: str) -> ModelSpec:
    """Falcon: fused query_key_value; multi-query (7B) or grouped KV (new_decoder_architecture)."""
    hidden = c.width("hidden_size", "n_embed")
    layers = c.layers("num_hidden_layers", "n_layer")
    heads = c.width("num_attention_heads", "n_head")
    new_arch = c.flag("new_decoder_architecture", False)
    if new_arch:
        kv_heads = c.width("num_kv_heads", "n_head_kv", default=heads)
    elif c.flag("multi_query", True):
        kv_heads = 1
    else:
        kv_heads = heads
    if kv_heads > heads or heads % kv_heads:
        raise c.refuse(f"num_kv_heads={kv_heads} must divide num_attention_heads={heads}")
    if hidden % heads:
        raise c.refuse(f"hidden_size={hidden} is not divisible by num_attention_heads={heads}")
    head_dim = hidden // heads
    ffn = c.width("ffn_hidden_size", default=4 * hidden)
    vocab = c.width("vocab_size")
    b = 1 if c.flag("bias", False) else 0
    q_width, kv_width = heads * head_dim, 2 * kv_heads * head_dim
    n_ln = c.width("num_ln_in_parallel_attn", default=2 if new_arch else None)
    lns = 2 if not c.flag("parallel_attn", True) or n_ln == 2 else 1
    params: Params = {
        "embedding": vocab * hidden,
        "attention": layers * (hidden * q_width + b * q_width + q_width * hidden + b * hidden),
        "attention_kv": layers * (hidden * kv_width + b * kv_width),
        "mlp": layers * (hidden * ffn + b * ffn + ffn * hidden + b * hidden),
        "norms": layers * lns * 2 * hidden + 2 * hidden,
    }
    tied = c.flag("tie_word_embeddings", True)
    if not tied:
        params["lm_head"] = vocab * hidden
    return finish(c, name=name, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, layers=layers,
                  intermediate=ffn, vocab=vocab, params=params, tied=tied)


def gpt_neox(c: Config, name: str) -> ModelSpec:
    """GPT-NeoX / Pythia: fused query_key_value with bias, two LayerNorms, untied embed_out."""
    hidden = c.width("hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.width("num_attention_heads")
    if hidden % heads:
        raise c.refuse(f"hidden_size={hidden} is not divisible by num_attention_heads={heads}")
    inter = c.width("intermediate_size")
    vocab = c.width("vocab_size")
    b = 1 if c.flag("attention_bias", True) else 0
    tied = c.flag("tie_word_embeddings", False)
    params: Params = {
        "embedding": vocab * hidden,
        "attention": layers * (2 * hidden * hidden + 2 * b * hidden),      # q third + dense, each with a bias
        "attention_kv": layers * (2 * hidden * hidden + 2 * b * hidden),
        "mlp": layers * (2 * hidden * inter + inter + hidden),
        "norms": layers * 4 * hidden + 2 * hidden,
    }
    add(params, "lm_head", 0 if tied else vocab * hidden)
    return finish(c, name=name, hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads,
                  layers=layers, intermediate=inter, vocab=vocab, params=params, tied=tied)

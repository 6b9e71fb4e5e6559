"""Llama-3.2-Vision (``mllama``): a Llama decoder with cross-attention layers, and a tiled ViT.

The text decoder (``text_config``, ``mllama_text_model``) is a Llama whose layers listed in
``cross_attention_layers`` attend to the image instead of the text: the same q/k/v/o and MLP
shapes, plus per-head q/k norms and two tanh gates. Its embedding holds 8 more rows than the
vocabulary (the image and special tokens). The vision tower (``vision_config``) cuts an image
into up to ``max_num_tiles`` tiles of ``(image_size / patch_size)^2 + 1`` patches and runs a
local encoder and a gated global encoder over them; a linear projector maps its
``vision_output_dim`` features into the text width.

KV cache: vLLM's V0 engine gave every one of the 40 decoder layers KV blocks (the cross-attention
layers included), which is what its start-up log counts; here every layer is a full-attention
cache of the text model's shape.

Worked example, meta-llama/Llama-3.2-11B-Vision (10,670,220,835 parameters in its safetensors
index): text 9,775,192,080 (40 layers of 218,112,000, 8 cross-attention layers 258 more each,
embedding 128,264 x 4,096, head 128,256 x 4,096, norm 4,096), vision 863,567,379, projector
7,680 x 4,096 + 4,096 = 31,461,376.

>>> from course_lib.model.families.reader import Config
>>> mllama_vision_params(Config({"hidden_size": 1280, "image_size": 560, "patch_size": 14,
...     "intermediate_size": 5120, "num_hidden_layers": 32, "num_global_layers": 8, "max_num_tiles": 4,
...     "supported_aspect_ratios": [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]]}))
863567379
"""

from __future__ import annotations

from .parts import Params, add, attention, embeddings, finish, gated_mlp
from .reader import Config


def mllama_text(c: Config, name: str):
    """The mllama text decoder: Llama layers, cross-attention layers with q/k norms and gates, 8 extra embeddings."""
    hidden = c.width("hidden_size", default=4096)
    layers = c.layers("num_hidden_layers", default=40)
    heads = c.width("num_attention_heads", default=32)
    kv = c.width("num_key_value_heads", default=8)
    head_dim = hidden // heads
    inter = c.width("intermediate_size", default=14336)
    vocab = c.width("vocab_size", default=128256)
    cross = c.layer_list("cross_attention_layers", layers) or []
    params: Params = {}
    add(params, "embedding", (vocab + 8) * hidden)
    add(params, "lm_head", vocab * hidden)
    q_o, k_v = attention(hidden=hidden, heads=heads, kv_heads=kv, head_dim=head_dim)
    add(params, "attention", layers * q_o)
    add(params, "attention_kv", layers * k_v)
    add(params, "mlp", layers * gated_mlp(hidden, inter))
    add(params, "norms", layers * 2 * hidden + hidden + len(cross) * (2 * head_dim + 2))
    spec = finish(c, name=name, hidden=hidden, heads=heads, kv_heads=kv, head_dim=head_dim, layers=layers,
                  intermediate=inter, vocab=vocab, params=params, tied=False)
    return spec


def mllama_vision_params(v: Config) -> int:
    """The tiled ViT: patch conv, class token, gated position and tile embeddings, local and global encoders."""
    h = v.width("hidden_size", default=1280)
    i = v.width("intermediate_size", default=5120)
    image = v.width("image_size", default=560)
    patch = v.width("patch_size", default=14)
    tiles = v.width("max_num_tiles", default=4)
    local = v.layers("num_hidden_layers", default=32)
    global_ = v.layers("num_global_layers", default=8, minimum=0)
    channels = v.width("num_channels", default=3)
    ratios = v.cfg.get("supported_aspect_ratios")
    ratio_ids = (len(ratios) if isinstance(ratios, list) else 8) + 1
    patches = (image // patch) ** 2 + 1
    layer = 4 * h * h + (h * i + i) + (i * h + h) + 4 * h         # attention (no biases), fc1/fc2, two LayerNorms
    total = channels * patch * patch * h + h                        # patch conv (no bias), class embedding
    total += 1 + patches * h + ratio_ids * tiles * patches * h      # gated position + tile position embeddings
    total += 2 * (1 + ratio_ids * tiles * h)                        # pre/post tile positional embeddings
    total += 2 * 2 * h                                              # layernorm_pre, layernorm_post
    total += local * layer + global_ * (layer + 2)                  # global layers carry two gates each
    return total


def mllama_projector(v: Config, text_hidden: int) -> int:
    return v.width("vision_output_dim", default=7680) * text_hidden + text_hidden

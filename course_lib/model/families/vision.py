"""Multimodal checkpoints: a text decoder in ``text_config`` plus a vision tower and projector.

The KV cache comes from the text decoder alone (image tokens are cached like
any other token). The weights pool counts the text decoder, the vision tower
and the projector, because serving loads all three; ``spec.counted`` says so.

Worked example, Gemma-3-4B's SigLIP tower (hidden 1,152, MLP 4,304, 27 layers,
896 / 14 = 64 x 64 = 4,096 patches, no pooling head): patch conv 3 x 14 x 14
x 1,152 + 1,152, positions 4,096 x 1,152, per layer 4 x (1,152^2 + 1,152) +
2 x 1,152 x 4,304 + 4,304 + 1,152 + 4 x 1,152, post-LayerNorm 2 x 1,152.

>>> siglip_params(Config({"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
...     "image_size": 896, "patch_size": 14, "vision_use_head": False}))
416866032
"""

from __future__ import annotations

from typing import Callable

from .reader import Config


def _encoder_layer(h: int, i: int) -> int:
    """q, k, v, o with biases, fc1/fc2 with biases, two LayerNorms with biases."""
    return 4 * (h * h + h) + h * i + i + i * h + h + 4 * h


def siglip_params(v: Config) -> int:
    """SigLIP vision tower (Gemma-3): patch conv, learned positions, encoder, post-LayerNorm, optional head."""
    h = v.width("hidden_size", default=768)
    i = v.width("intermediate_size", default=3072)
    layers = v.layers("num_hidden_layers", default=12)
    channels = v.width("num_channels", default=3)
    patch = v.width("patch_size", default=16)
    image = v.width("image_size", default=224)
    total = channels * patch * patch * h + h + (image // patch) ** 2 * h
    total += layers * _encoder_layer(h, i) + 2 * h
    if v.flag("vision_use_head", True):       # attention-pooling head: probe, MHA, LayerNorm, MLP
        total += h + 3 * h * h + 3 * h + h * h + h + 2 * h + h * i + i + i * h + h
    return total


def gemma3_projector(v: Config, text_hidden: int) -> int:
    """mm_input_projection_weight (vision hidden x text hidden) + mm_soft_emb_norm."""
    h = v.width("hidden_size", default=768)
    return h * text_hidden + h


def llama4_vision_params(v: Config) -> int:
    """Llama-4's vision encoder (unfold-conv patches, class token, encoder, pixel-shuffle adapter)."""
    h = v.width("hidden_size", default=768)
    i = v.width("intermediate_size", default=5632)
    layers = v.layers("num_hidden_layers", default=34)
    channels = v.width("num_channels", default=3)
    patch = v.width("patch_size", default=14)
    image = v.width("image_size", default=448)
    p_in = v.width("projector_input_dim", default=4096)
    p_out = v.width("projector_output_dim", default=4096)
    total = h + ((image // patch) ** 2 + 1) * h + channels * patch * patch * h + 4 * h
    total += layers * _encoder_layer(h, i)
    total += i * p_in + p_out * p_out                 # vision_adapter fc1, fc2 (no biases)
    return total


def llama4_projector(v: Config, text_hidden: int) -> int:
    return v.width("vision_output_dim", default=7680) * text_hidden


def qwen3_5_vision_params(v: Config) -> int:
    """Qwen3.5's vision transformer: 3-D patch conv, learned positions, blocks, a 2x2 patch merger."""
    h = v.width("hidden_size", default=1152)
    i = v.width("intermediate_size", default=4304)
    depth = v.layers("depth", "num_hidden_layers", default=27)
    channels = v.width("in_channels", default=3)
    patch = v.width("patch_size", default=16)
    temporal = v.width("temporal_patch_size", default=2)
    merge = v.width("spatial_merge_size", default=2)
    out = v.width("out_hidden_size", default=3584)
    positions = v.width("num_position_embeddings", default=2304)
    merged = h * merge * merge
    total = channels * temporal * patch * patch * h + h + positions * h
    total += depth * (4 * h + 3 * h * h + 3 * h + h * h + h + h * i + i + i * h + h)
    total += 2 * h + merged * merged + merged + merged * out + out      # merger: norm, fc1, fc2
    return total


def qwen3_5_projector(v: Config, text_hidden: int) -> int:
    return 0     # the merger above projects to the text width itself


def qwen2_5_vision_params(v: Config) -> int:
    """Qwen2.5-VL's vision transformer: 3-D patch conv (no bias), rotary positions, blocks with RMSNorms and a
    gated MLP with biases, a 2x2 patch merger (RMSNorm, fc1, GELU, fc2 to the text width).

    Worked example, Qwen2.5-VL-7B (hidden 1,280, MLP 3,420, 32 blocks, out 3,584): patch conv
    3 x 2 x 14 x 14 x 1,280 = 1,505,280; a block 2 x 1,280 + (3 x 1,280^2 + 3 x 1,280) + (1,280^2 + 1,280) +
    3 x 1,280 x 3,420 + 2 x 3,420 + 1,280 = 19,702,200; merger 1,280 + 5,120^2 + 5,120 + 5,120 x 3,584 + 3,584
    = 44,574,464; transformers counts the same 676,550,144 on the meta device.

    >>> qwen2_5_vision_params(Config({"hidden_size": 1280, "intermediate_size": 3420, "depth": 32,
    ...     "out_hidden_size": 3584, "patch_size": 14, "temporal_patch_size": 2, "spatial_merge_size": 2}))
    676550144
    """
    h = v.width("hidden_size", default=1280)
    i = v.width("intermediate_size", default=3420)
    depth = v.layers("depth", default=32)
    channels = v.width("in_chans", "in_channels", default=3)
    patch = v.width("patch_size", default=14)
    temporal = v.width("temporal_patch_size", default=2)
    merge = v.width("spatial_merge_size", default=2)
    out = v.width("out_hidden_size", default=3584)
    merged = h * merge * merge
    total = channels * temporal * patch * patch * h
    total += depth * (2 * h + 3 * h * h + 3 * h + h * h + h + 3 * h * i + 2 * i + h)
    total += h + merged * merged + merged + merged * out + out      # merger: RMSNorm, fc1, fc2
    return total


#: model_type -> (text model_type, vision tower, projector, words for what was counted)
MULTIMODAL: dict[str, tuple[str, Callable[[Config], int], Callable[[Config, int], int], str]] = {
    "gemma3": ("gemma3_text", siglip_params, gemma3_projector, "SigLIP vision tower + projector"),
    "llama4": ("llama4_text", llama4_vision_params, llama4_projector, "vision encoder + projector"),
    "qwen3_5": ("qwen3_5_text", qwen3_5_vision_params, qwen3_5_projector, "vision transformer + merger"),
    "qwen3_5_moe": ("qwen3_5_moe_text", qwen3_5_vision_params, qwen3_5_projector,
                    "vision transformer + merger"),
    "qwen2_5_vl": ("qwen2", qwen2_5_vision_params, qwen3_5_projector, "vision transformer + merger"),
}

#: Multimodal configs whose text settings sit at the top level (Qwen2.5-VL's published config.json has no
#: text_config; transformers builds one from the top-level keys).
FLAT_TEXT = {"qwen2_5_vl"}

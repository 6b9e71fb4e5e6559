"""vLLM V1's multimodal encoder profile: the vision tower runs on the largest dummy images before the text forward.

A V1 start-up profiles a multimodal model in two steps (``GPUModelRunner.profile_run``,
vllm/v1/worker/gpu_model_runner.py): it first runs the vision tower on ``mm_max_items_per_batch``
dummy images "of the maximum feature size" (``self.model.embed_multimodal(...)``), keeps their
outputs in ``self.encoder_cache`` (cleared only after the sampler), then runs the text forward at
``max_num_batched_tokens`` and the dummy sampler. So the profile's peak is::

    max(tower peak, kept outputs + max(text forward, sampler))

and it does not depend on ``max_num_seqs`` when the tower dominates. The number of images is
``MultiModalBudget._get_max_items`` (vllm/multimodal/encoder_budget.py)::

    budget          = max(max_num_batched_tokens, tokens per image)       # compute budget = cache size
    items per batch = max(1, min(budget // tokens per image,
                                 max_num_seqs x max(1, min(limit, max_model_len // tokens per image))))

The largest image is the image processor's own limit, as vLLM's ``get_image_size_with_most_features``
reads it: Qwen2-VL / Qwen2.5-VL ``max_pixels`` 12,845,056 with 14-pixel patches, Qwen3-VL and the
Qwen3.5 / 3.6 towers ``size.longest_edge`` 16,777,216 with 16-pixel patches: 65,536 patches, merged
2 x 2 into 16,384 tokens (a published profile failure of a Qwen3.5 tower shows the 65,536: "size
mismatch, got input (65536), mat (65536x1024)"); Gemma 3's SigLIP sees one 896-pixel crop, 4,096
patches for 256 tokens (pan-and-scan is off by default).

The tower's peak is taken the way :func:`course_lib.runtimes.profile.forward_peak_bytes` takes a text
layer's: per patch, the residual and the normed input, the MLP's intermediates (gated: gate/up and
the activation, 3 x width; fc1/fc2: 2 x width) on this GPU's tensor-parallel share, the MLP output,
one more hidden for the all-reduce under TP, in bf16; plus the pixel input (channels x temporal x
patch^2 values a patch). Attention is flash/SDPA (no score matrix is kept).

Worked example, Qwen3.5-27B on 4 GPUs: 65,536 patches x (3 x 1,152 + 2 x 1,076 + 1,152) x 2 B =
886,046,720 B of tower activations, plus 65,536 x 1,536 x 2 B = 201,326,592 B of pixels: 1.01 GiB,
whatever ``max_num_seqs`` is; the kept output is 16,384 x 5,120 x 2 B = 0.16 GiB.

>>> from course_lib.presets import get_model
>>> p = encoder_profile(get_model("qwen3.5-27b"), max_num_batched_tokens=2048, max_num_seqs=1,
...                     max_model_len=50000, tensor_parallel=4)
>>> p.items, p.tokens_per_item, p.patches, p.peak_bytes, p.kept_bytes
(1, 16384, 65536, 1087373312, 167772160)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..spec import ModelSpec

#: The image processors' largest image, in pixels, by the language model's model_type (preprocessor_config.json:
#: Qwen2-VL and Qwen2.5-VL "max_pixels": 12845056; Qwen3-VL "size": {"longest_edge": 16777216}, which the
#: Qwen3.5 and Qwen3.6 checkpoints keep).
QWEN_MAX_PIXELS = {"qwen2_vl": 12_845_056, "qwen2_5_vl": 12_845_056, "qwen3_vl": 16_777_216,
                   "qwen3_vl_moe": 16_777_216, "qwen3_5": 16_777_216, "qwen3_5_moe": 16_777_216}
#: vLLM's default ``limit_mm_per_prompt`` for an image (999 items; the per-prompt limit rarely binds).
DEFAULT_MM_LIMIT = 999


@dataclass(frozen=True)
class EncoderProfile:
    """What V1's encoder profile holds on one GPU.

    items: dummy images encoded together. tokens_per_item: each one's placeholder tokens.
    patches: vision-tower patches of the whole dummy batch. peak_bytes: the tower's activation peak with
    its pixel input. kept_bytes: the outputs kept in the encoder cache through the text forward.
    """

    items: int
    tokens_per_item: int
    patches: int
    peak_bytes: int
    kept_bytes: int
    describe: str


def encoder_profile(spec: ModelSpec, *, max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int,
                    tensor_parallel: int = 1, limit: int = DEFAULT_MM_LIMIT) -> EncoderProfile | None:
    """The encoder profile of ``spec`` under these limits, or None where the tower is not modelled (or absent)."""
    v = spec.vision_config or {}
    if not v or limit <= 0:
        return None
    tower = _tower(spec.model_type, v)
    if tower is None:
        return None
    tokens, patches_per_item, hidden, width, gated, pixel_values = tower
    budget = max(max_num_batched_tokens, tokens)
    per_prompt = max(1, min(limit, max_model_len // tokens))
    items = max(1, min(budget // tokens, max_num_seqs * per_prompt))
    patches = items * patches_per_item
    tp = max(1, tensor_parallel)
    mlp = (3 if gated else 2) * math.ceil(width / tp)
    per_patch = 3 * hidden + mlp + (hidden if tp > 1 else 0)
    peak = patches * per_patch * 2 + patches * pixel_values * 2
    kept = items * tokens * spec.hidden_size * 2
    return EncoderProfile(items, tokens, patches, peak, kept,
                          f"vision tower on {items} dummy image(s) of {tokens:,} tokens ({patches:,} patches)")


def _tower(model_type: str, v) -> tuple[int, int, int, int, bool, int] | None:
    """(tokens per image, patches per image, tower hidden, MLP width, gated, pixel values a patch) by family."""
    if model_type in QWEN_MAX_PIXELS:
        patch = int(v.get("patch_size", 14))
        merge = int(v.get("spatial_merge_size", 2))
        patches = QWEN_MAX_PIXELS[model_type] // (patch * patch)
        if model_type == "qwen2_vl":
            hidden = int(v.get("embed_dim", 1280))
            width, gated = int(v.get("mlp_ratio", 4) * hidden), False
        else:
            hidden = int(v.get("hidden_size", 1152))
            width, gated = int(v.get("intermediate_size", 4304)), model_type == "qwen2_5_vl"
        pixels = int(v.get("in_channels", v.get("in_chans", 3))) * int(v.get("temporal_patch_size", 2)) * patch * patch
        return patches // (merge * merge), patches, hidden, width, gated, pixels
    if model_type == "gemma3":
        patch = int(v.get("patch_size", 14))
        side = int(v.get("image_size", 896)) // patch
        return 256, side * side, int(v.get("hidden_size", 1152)), int(v.get("intermediate_size", 4304)), False, \
            3 * patch * patch
    return None

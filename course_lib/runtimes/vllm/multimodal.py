"""vLLM V1's multimodal encoder profile: the vision tower runs on the largest dummy items before the text forward.

A V1 start-up profiles a multimodal model in two steps (``GPUModelRunner.profile_run``,
vllm/v1/worker/gpu_model_runner.py): it first runs the vision tower on ``mm_max_items_per_batch``
dummy items "of the maximum feature size" of one modality, the one whose largest item has the most tokens
(``get_modality_with_max_tokens``; a tie goes to "video"). For Qwen2-VL and Qwen2.5-VL that is a video as
soon as max_model_len fits two frame pairs: up to 14 frames, 7 x 16,384 = 114,688 tokens at the default
128,000 (the line "Encoder cache will be initialized with a budget of 114688 tokens, and profiled with 1
video items" of a published vLLM 0.23 start-up on an A100). :func:`encoder_budget` gives vLLM's numbers,
checked against vLLM's own ``MultiModalBudget`` (course_lib/runtimes/vllm/oracle_mm.py). It runs the tower
(``self.model.embed_multimodal(...)``), keeps the outputs in ``self.encoder_cache`` (cleared only after the
sampler), then runs the text forward at
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
patch^2 values a patch, float32 as the processor made them). Attention is flash/SDPA (no score matrix is
kept).

Worked example, Qwen3.5-27B on 4 GPUs: 65,536 patches x (3 x 1,152 + 2 x 1,076 + 1,152) x 2 B =
886,046,720 B of tower activations, plus 65,536 x 1,536 x 4 B = 402,653,184 B of pixels: 1.20 GiB,
whatever ``max_num_seqs`` is; the kept output is 16,384 x 5,120 x 2 B = 0.16 GiB.

>>> from course_lib.model.presets import get_model
>>> p = encoder_profile(get_model("qwen3.5-27b"), max_num_batched_tokens=2048, max_num_seqs=1,
...                     max_model_len=50000, tensor_parallel=4)
>>> p.items, p.tokens_per_item, p.patches, p.peak_bytes, p.kept_bytes
(1, 16384, 65536, 1288699904, 167772160)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...model.spec import ModelSpec

#: The image processors' largest image, in pixels, by the language model's model_type (preprocessor_config.json:
#: Qwen2-VL and Qwen2.5-VL "max_pixels": 12845056; Qwen3-VL "size": {"longest_edge": 16777216}, which the
#: Qwen3.5 and Qwen3.6 checkpoints keep).
QWEN_MAX_PIXELS = {"qwen2_vl": 12_845_056, "qwen2_5_vl": 12_845_056, "qwen3_vl": 16_777_216,
                   "qwen3_vl_moe": 16_777_216, "qwen3_5": 16_777_216, "qwen3_5_moe": 16_777_216}
#: The image processors' smallest image (Qwen2-VL / 2.5-VL "min_pixels": 3136; Qwen3-VL "shortest_edge": 65536).
QWEN_MIN_PIXELS = {"qwen3_vl": 65_536, "qwen3_vl_moe": 65_536, "qwen3_5": 65_536, "qwen3_5_moe": 65_536}
#: Qwen3-VL's video processor (video_preprocessor_config.json "size": {"longest_edge": 25165824,
#: "shortest_edge": 4096}); the Qwen3.5 / 3.6 checkpoints are taken to keep it, as they keep the image size.
QWEN3_VIDEO_MAX_PIXELS = {"qwen3_vl": 25_165_824, "qwen3_vl_moe": 25_165_824, "qwen3_5": 25_165_824,
                          "qwen3_5_moe": 25_165_824}
QWEN3_VIDEO_MIN_PIXELS = 4096
#: Qwen2-VL's dummy video has at most 14 frames (vllm/model_executor/models/qwen2_vl.py _MAX_FRAMES_PER_VIDEO).
QWEN2_MAX_FRAMES = 14
#: Qwen3-VL's dummy video before vLLM 0.15: at most 24,576 frames (qwen3_vl.py _MAX_FRAMES_PER_VIDEO, 0.11-0.14).
QWEN3_OLD_MAX_FRAMES = 24_576
#: Bytes of one pixel value held through the tower's forward: the HF processor's float32 ``pixel_values``
#: (the caller's input dict keeps them; the tower's ``input_norm`` / ``.to(dtype)`` makes a bf16 copy for the
#: patch embedding only). vllm/model_executor/models/qwen2_5_vl.py ``Qwen2_5_VisionTransformer.forward``.
PIXEL_VALUE_BYTES = 4
#: vLLM's default ``limit_mm_per_prompt`` for each modality (999 items; the per-prompt limit rarely binds).
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
    modality: str = "image"
    budget_tokens: int = 0


def encoder_profile(spec: ModelSpec, *, max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int,
                    tensor_parallel: int = 1, limit: int | None = None, limits: dict[str, int] | None = None,
                    chunked_prefill: bool = True, max_pixels: int | None = None,
                    tie: str = "video", qwen3_video: str = "two-frames",
                    budget: EncoderBudget | None = None) -> EncoderProfile | None:
    """The encoder profile of ``spec`` under these limits, or None where the tower is not modelled (or absent).

    ``limits`` is vLLM's ``--limit-mm-per-prompt`` ({"image": N, "video": M}; ``limit`` sets every modality);
    ``max_pixels`` is ``--mm-processor-kwargs '{"max_pixels": N}'``. The items profiled are those
    :func:`encoder_budget` picks (one video for Qwen2.5-VL at a long context).
    """
    v = spec.vision_config or {}
    tower = _tower(spec.model_type, v) if v else None
    if tower is None:
        return None
    if limit is not None:
        limits = {m: limit for m in ("image", "video")}
    if budget is None:          # a caller that already holds the launch's budget passes it
        budget = encoder_budget(spec, max_model_len=max_model_len, max_num_batched_tokens=max_num_batched_tokens,
                                max_num_seqs=max_num_seqs, limits=limits, chunked_prefill=chunked_prefill,
                                max_pixels=max_pixels, tie=tie, qwen3_video=qwen3_video)
    if budget is None or budget.modality is None:
        return None
    _, _, hidden, width, gated, pixel_values = tower
    merge = int(v.get("spatial_merge_size", 2)) if spec.model_type in QWEN_MAX_PIXELS else 1
    tokens = budget.tokens[budget.modality]
    items = budget.items[budget.modality]
    vision_tokens = tokens
    if budget.modality == "video" and qwen3_video == "x12.5" and spec.model_type in QWEN3_VIDEO_MAX_PIXELS:
        vision_tokens = round(tokens / 12.5)        # the factor counts timestamp text, not patches
    per_item = vision_tokens * merge * merge if spec.model_type in QWEN_MAX_PIXELS else tower[1]
    patches = items * per_item
    tp = max(1, tensor_parallel)
    mlp = (3 if gated else 2) * math.ceil(width / tp)
    per_patch = 3 * hidden + mlp + (hidden if tp > 1 else 0)
    peak = patches * per_patch * 2 + patches * pixel_values * PIXEL_VALUE_BYTES
    kept = items * tokens * spec.hidden_size * 2
    noun = "image(s)" if budget.modality == "image" else "video(s)"
    return EncoderProfile(items, tokens, patches, peak, kept,
                          f"vision tower on {items} dummy {noun} of {tokens:,} tokens ({patches:,} patches)",
                          modality=budget.modality, budget_tokens=budget.budget)


@dataclass(frozen=True)
class EncoderBudget:
    """vLLM's ``MultiModalBudget`` for one launch: what its start-up log line names.

    budget: the encoder budget in tokens (``get_encoder_budget``). tokens / items: the largest item's tokens and
    the items profiled together, per modality the tower sees. modality: the one profiled (most tokens per item;
    a tie goes to the later name, so "video" over "image"); None when every modality is limited to 0.
    """

    budget: int
    tokens: dict[str, int]
    items: dict[str, int]
    modality: str | None

    def log_line(self) -> str:
        """vLLM's own words (GPUModelRunner.profile_run)."""
        return (f"Encoder cache will be initialized with a budget of {self.budget} tokens, and profiled with "
                f"{self.items[self.modality]} {self.modality} items of the maximum feature size.")


def encoder_budget(spec: ModelSpec, *, max_model_len: int, max_num_batched_tokens: int, max_num_seqs: int,
                   limits: dict[str, int] | None = None, chunked_prefill: bool = True,
                   max_pixels: int | None = None, tie: str = "video",
                   qwen3_video: str = "two-frames") -> EncoderBudget | None:
    """vLLM 0.32's encoder budget for a modelled tower, or None (no tower, or one not modelled).

    ``tie``: the modality profiled when image and video tie on tokens per item, "video" from vLLM 0.17 on,
    "image" before (the release history's ``mm_tie``; 0.16 followed Python's set order). ``qwen3_video``: how the
    release sizes Qwen3-VL's video (the history's ``qwen3_vl_video``; "two-frames" from 0.15).

    Read from vllm/multimodal/encoder_budget.py (``MultiModalBudget``, ``_get_max_items``,
    ``get_modality_with_max_tokens``), vllm/v1/core/encoder_cache_manager.py (``compute_mm_encoder_budget``)
    and the models' ``get_mm_max_tokens_per_item`` (qwen2_vl.py, qwen3_vl.py; Gemma 3: 256 tokens an image)::

        budget   = max(max_num_batched_tokens, most tokens of one item)
        per prompt = max(1, min(limit, max_model_len // tokens))
        items    = max(1, min(budget // tokens, max_num_seqs x per prompt))

    Checked token for token against vLLM's own ``MultiModalBudget`` (tests/course_lib/runtimes/vllm/test_vllm_mm_oracle.py).

    >>> from course_lib.model.presets import get_model
    >>> b = encoder_budget(get_model("qwen2.5-vl-7b"), max_model_len=128000, max_num_batched_tokens=8192,
    ...                    max_num_seqs=256)
    >>> b.modality, b.tokens["video"], b.items["video"], b.budget
    ('video', 114688, 1, 114688)
    """
    v = spec.vision_config or {}
    if not v:
        return None
    per_item = _tokens_per_item(spec.model_type, v, max_model_len, max_pixels, qwen3_video)
    if per_item is None:
        return None
    limits = {m: DEFAULT_MM_LIMIT for m in per_item} | {k: int(n) for k, n in (limits or {}).items()}
    tower = {m: t for m, t in per_item.items() if limits.get(m, DEFAULT_MM_LIMIT) > 0}
    if not tower:
        return EncoderBudget(0, {}, {}, None)
    budget = max(max_num_batched_tokens, max(tower.values()))
    items = {}
    for modality, tokens in tower.items():
        per_prompt = max(1, min(limits[modality], max_model_len // tokens))
        reqs = max_num_seqs if chunked_prefill else min(max_num_seqs, max_num_batched_tokens // tokens)
        items[modality] = max(1, min(budget // tokens, reqs * per_prompt))
    most = max(tower.values())
    tied = sorted(m for m, t in tower.items() if t == most)
    modality = tied[0] if tie == "image" and "image" in tied else tied[-1]
    return EncoderBudget(budget, tower, items, modality)


def _tokens_per_item(model_type: str, v, max_model_len: int, max_pixels: int | None,
                     qwen3_video: str = "two-frames") -> dict[str, int] | None:
    """The largest item's tokens per modality, as the model's processing info computes them."""
    if model_type == "gemma3":
        return {"image": 256}
    if model_type not in QWEN_MAX_PIXELS:
        return None
    patch = int(v.get("patch_size", 14))
    merge = int(v.get("spatial_merge_size", 2))
    temporal = int(v.get("temporal_patch_size", 2))
    unit = patch * merge
    image_max = max_pixels or QWEN_MAX_PIXELS[model_type]
    image_min = QWEN_MIN_PIXELS.get(model_type, 3136)
    height, width = _size_with_most_features(image_max, unit)
    h, w = _smart_resize(height, width, unit, image_min, image_max)
    image = (h // patch) * (w // patch) // (merge * merge)
    if model_type in QWEN3_VIDEO_MAX_PIXELS:
        video_max = max_pixels or QWEN3_VIDEO_MAX_PIXELS[model_type]
        if qwen3_video != "two-frames":
            return {"image": image, "video": _qwen3_video_before_0_15(
                qwen3_video, (height, width), patch, merge, temporal, video_max, max_model_len)}
        # Qwen3VLProcessingInfo.get_max_video_tokens (0.15+): two frames at the video processor's edge
        height, width = _size_with_most_features(video_max // temporal, unit)
        h, w = _smart_resize(height, width, unit, QWEN3_VIDEO_MIN_PIXELS, video_max, frames=2, temporal=temporal)
        return {"image": image, "video": (h // patch) * (w // patch) // (merge * merge)}
    # Qwen2VLProcessingInfo: _get_max_video_frames(max_model_len) from 1 frame, frames padded to the temporal
    # patch (2 frames, one image's tokens), then at most 14 a video
    pairs = max_model_len // image
    frames = min(max(1, temporal * pairs), QWEN2_MAX_FRAMES)
    return {"image": image, "video": max(-(-frames // temporal), 1) * image}


def _qwen3_video_before_0_15(rule: str, image_hw: tuple[int, int], patch: int, merge: int, temporal: int,
                             video_max: int, max_model_len: int) -> int:
    """Qwen3-VL's largest video in vLLM 0.11-0.14 (vllm/model_executor/models/qwen3_vl.py of those releases).

    ``_get_max_video_frames(max_model_len)`` from 2 frames of the largest image, each count resized by the video
    processor's ``smart_resize`` (its ``max_pixels`` caps all frames together), at most 24,576 frames
    (``_MAX_FRAMES_PER_VIDEO``); 0.11-0.12 then multiply by 12.5 ("one video token is converted to
    '<{timestamp} seconds>' (on average 9.5 tokens) + ..."). At 16,384 or 65,536 tokens the frames shrink to
    32 x 32 px and 24,576 frames give 12,288 tokens, 153,600 with the factor: the published 0.11 lines.
    """
    unit = patch * merge

    def tokens(frames: int) -> int:
        h, w = _smart_resize(image_hw[0], image_hw[1], unit, QWEN3_VIDEO_MIN_PIXELS, video_max, frames=frames,
                             temporal=temporal)
        padded = frames + frames % temporal
        return max(padded // temporal, 1) * (h // patch) * (w // patch) // (merge * merge)

    frames = 2
    while frames < QWEN3_OLD_MAX_FRAMES and tokens(frames + 1) <= max_model_len:
        frames += 1
    count = tokens(frames)
    return int(count * 12.5) if rule == "x12.5" else count


def _size_with_most_features(max_pixels: int, unit: int) -> tuple[int, int]:
    """``get_image_size_with_most_features``: the most unit x unit cells, aspect ratio at most 200."""
    most = max_pixels // (unit * unit)
    pair = (1, max(most, 1))
    for cells in range(most, 0, -1):
        d = math.isqrt(cells)
        while cells % d:
            d -= 1
        pair = (d, cells // d)
        if pair[1] / pair[0] <= 200:
            break
    return unit * pair[0], unit * pair[1]


def _smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int, *, frames: int = 1,
                  temporal: int = 1) -> tuple[int, int]:
    """transformers' Qwen-VL ``smart_resize`` (image: frames = temporal = 1; video: Qwen3-VL's frame-aware one)."""
    t = round(frames / temporal) * temporal
    h, w = round(height / factor) * factor, round(width / factor) * factor
    if t * h * w > max_pixels:
        beta = math.sqrt(frames * height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif t * h * w < min_pixels:
        beta = math.sqrt(min_pixels / (frames * height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h, w


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

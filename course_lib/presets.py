"""Presets: real model configs (published facts) and GPUs at the capacity they report.

Model presets are the shape keys of each checkpoint's Hugging Face
``config.json``, copied as published; no weights are involved. GPU presets are
the memory the device itself reports (``nvidia-smi`` / ``cudaMemGetInfo`` total),
in MiB: a card sold as "24 GB" reports 24,564 MiB = 25.76 GB = 23.99 GiB.

>>> gpu_bytes("rtx-4090")
25757220864
>>> get_model("llama-3-8b").params_total
8030261248
"""

from __future__ import annotations

from .errors import CourseInputError
from .model_configs import MODEL_CONFIGS
from .models import ModelSpec, from_hf_config
from .units import MiB, parse_bytes

# ---------------------------------------------------------------- models
# MODEL_CONFIGS (course_lib.model_configs): published configs, each with its source.
DEFAULT_MODEL = "llama-2-7b"
DEFAULT_GPU = "rtx-4090"

# ---------------------------------------------------------------- GPUs
# Total memory as the device reports it (nvidia-smi "MiB"); a card's "GB" means GiB.
# Sources: shared/reference/README.md for the first seven; the rest are the totals printed by
# nvidia-smi (or rocm-smi, in bytes) in public logs of each card.
GPU_MIB: dict[str, int] = {
    "t4": 15_360,
    "l4": 23_034,
    "a10g": 23_028,
    "rtx-4090": 24_564,
    "a100-40gb": 40_960,
    "a100-80gb": 81_920,
    "h100-80gb": 81_559,
    "h200": 143_771,
    "rtx-5090": 32_607,      # nvidia-smi "NVIDIA GeForce RTX 5090 ... / 32607MiB" (sold as 32 GB)
    "l40s": 46_068,          # nvidia-smi "NVIDIA L40S ... / 46068MiB" (48 GB)
    "h20": 97_871,           # nvidia-smi "NVIDIA H20 ... / 97871MiB" (96 GB)
    "gh200": 97_871,         # nvidia-smi "NVIDIA GH200 480GB ... / 97871MiB": the 96 GB HBM3 Hopper of a GH200
    "b200": 183_359,         # nvidia-smi "NVIDIA B200 ... / 183359MiB" (180 GB)
    "mi300x": 196_288,       # rocm-smi "VRAM Total Memory (B): 205822885888" = 196,288 MiB (192 GB)
}
#: The lesson's simplified device: exactly 24 GB = 24 x 10^9 bytes.
LESSON_GPU = "lesson-24gb"
GPU_BYTES: dict[str, int] = {name: mib * MiB for name, mib in GPU_MIB.items()}
GPU_BYTES[LESSON_GPU] = 24 * 10**9


def model_names() -> list[str]:
    return sorted(MODEL_CONFIGS)


def get_model(name: str) -> ModelSpec:
    """A preset model's :class:`ModelSpec` (names are case-insensitive)."""
    key = str(name).strip().lower()
    if key not in MODEL_CONFIGS:
        raise CourseInputError(
            f"model={name!r} is not a preset; use one of {', '.join(model_names())}, or --config PATH"
        )
    return from_hf_config(MODEL_CONFIGS[key], name=key)


def gpu_bytes(name_or_size: str | int) -> int:
    """Device bytes for a GPU preset name or any size ("24GB", "80GiB", 25769803776).

    >>> gpu_bytes("lesson-24gb")
    24000000000
    >>> gpu_bytes("24GiB")
    25769803776
    """
    if isinstance(name_or_size, str) and name_or_size.strip().lower() in GPU_BYTES:
        return GPU_BYTES[name_or_size.strip().lower()]
    try:
        return parse_bytes(name_or_size, name="gpu")
    except CourseInputError:
        if isinstance(name_or_size, str) and name_or_size.strip().lstrip("+-")[:1].isdigit():
            raise  # it looks like a size: the size error says what is wrong with it
        raise CourseInputError(
            f"gpu={name_or_size!r} is neither a GPU preset ({', '.join(GPU_BYTES)}) nor a size such as 24GB or 80GiB"
        ) from None

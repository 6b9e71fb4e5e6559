"""Presets: real model configs (published facts) and GPUs at the memory CUDA reports.

Model presets are the shape keys of each checkpoint's Hugging Face
``config.json``, copied as published; no weights are involved. GPU presets
(:mod:`course_lib.gpus`) are the total CUDA reports to a process, which is what
runtimes plan with: an RTX 4090 sold as "24 GB" shows 24,564 MiB (23.99 GiB) in
nvidia-smi, but CUDA gives a process 23.65 GiB.

>>> round(gpu_bytes("rtx-4090") / 2**30, 2)
23.65
>>> get_model("llama-3-8b").params_total
8030261248
"""

from __future__ import annotations

from ..errors import CourseInputError
from ..gpus import GPU_BYTES, GPUS, LESSON_GPU
from .model_configs import MODEL_CONFIGS
from .models import ModelSpec, from_hf_config
from ..units import parse_bytes

# ---------------------------------------------------------------- models
# MODEL_CONFIGS (course_lib.model.model_configs): published configs, each with its source.
DEFAULT_MODEL = "llama-2-7b"
DEFAULT_GPU = "rtx-4090"

# ---------------------------------------------------------------- GPUs
# course_lib.gpus: each card's CUDA-visible total (what budgets plan with) beside nvidia-smi's, with sources.
__all__ = ["DEFAULT_GPU", "DEFAULT_MODEL", "GPUS", "GPU_BYTES", "LESSON_GPU", "MODEL_CONFIGS", "get_model", "gpu_bytes",
           "model_names"]


def model_names() -> list[str]:
    return sorted(MODEL_CONFIGS)


def get_model(name: str) -> ModelSpec:
    """A preset model's :class:`ModelSpec` (names are case-insensitive), or a Hugging Face Hub id's
    (``ORG/NAME[@REVISION]``, read through huggingface_hub and cached: :mod:`course_lib.model.hub`)."""
    from .hub import hub_spec, is_hub_id

    if is_hub_id(name):
        return hub_spec(str(name).strip())
    key = str(name).strip().lower()
    if key not in MODEL_CONFIGS:
        raise CourseInputError(
            f"model={name!r} is not a preset; use one of {', '.join(model_names())}, a Hub id "
            f"such as Qwen/Qwen3-8B, or --config PATH"
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

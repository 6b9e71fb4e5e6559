"""course_lib: serving-memory budgets for LLMs, pool by pool (course L14.4).

Light to import: no torch, no matplotlib. Those load inside the functions
that need them (``course_lib.measure``, ``course_lib.views.plots``).

>>> from course_lib import plan_budget, GB
>>> plan_budget(device_bytes=24 * GB, weights_bytes=14 * GB, workspace_bytes=2 * GB,
...             reserve_bytes=2 * GB, per_sequence_kv_bytes="1.5GB").max_active_sequences
4
"""

from .serving.budget import (FIXED, GROWS, REQUEST_DEPENDENT, Budget, Estimate, Pool, activation_peak_bytes, estimate,
                     plan_budget, request_state_bytes_per_sequence, resolve_reserve)
from .dtypes import DType, get_dtype
from .errors import CourseInputError
from .model.models import (ModelSpec, from_hf_config, kv_cache_bytes_per_sequence, kv_cache_bytes_per_token,
                     params_per_gpu, weight_bytes)
from .model.presets import GPU_BYTES, get_model, gpu_bytes, model_names
from .units import GB, KB, MB, TB, GiB, KiB, MiB, TiB, format_bytes, format_gb, format_gib, parse_bytes, to_gb, to_gib

__version__ = "0.1.0"

__all__ = [
    "Budget", "CourseInputError", "DType", "Estimate", "FIXED", "GB", "GPU_BYTES", "GiB", "KB", "KiB", "MB",
    "MiB", "ModelSpec", "GROWS", "Pool", "REQUEST_DEPENDENT", "TB", "TiB", "activation_peak_bytes", "estimate",
    "format_bytes", "format_gb", "format_gib", "from_hf_config", "get_dtype", "get_model", "gpu_bytes",
    "kv_cache_bytes_per_sequence", "kv_cache_bytes_per_token", "model_names", "params_per_gpu", "parse_bytes",
    "plan_budget", "request_state_bytes_per_sequence", "resolve_reserve", "to_gb", "to_gib", "weight_bytes",
]

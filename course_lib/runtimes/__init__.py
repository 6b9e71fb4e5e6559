"""What real serving runtimes will allocate: one module per runtime, each following its own sizing rule.

=============  ==========================================================================================
module         rule
=============  ==========================================================================================
``vllm``       ``total x gpu_memory_utilization - weights - activation_peak - non_torch [- CUDA graphs]``
``sglang``     ``free_at_start x mem_fraction_static - weights`` (what the static pool may hold)
``trtllm``     ``kv_cache_free_gpu_mem_fraction x free memory after the engine and its buffers``
=============  ==========================================================================================

The lesson's own ``course_lib.serving.budget.estimate`` is the simple model (one prefill chunk, a fixed
overhead, a reserve share); these follow the runtimes, release by release, so that a learner can
put a prediction beside a real start-up log (:mod:`course_lib.runtimes.log`).

>>> sorted(RUNTIMES)
['sglang', 'trtllm', 'vllm']
"""

from __future__ import annotations

from .result import RuntimeEstimate, Term
from .sglang import SglangLaunch, estimate_sglang
from .trtllm import TrtllmLaunch, estimate_trtllm
from .vllm.estimate import ResolvedLaunch, VllmLaunch, estimate_vllm, resolve_launch

RUNTIMES = {"vllm": estimate_vllm, "sglang": estimate_sglang, "trtllm": estimate_trtllm}

__all__ = ["RUNTIMES", "ResolvedLaunch", "RuntimeEstimate", "SglangLaunch", "Term", "TrtllmLaunch", "VllmLaunch",
           "estimate_sglang", "estimate_trtllm", "estimate_vllm", "resolve_launch"]

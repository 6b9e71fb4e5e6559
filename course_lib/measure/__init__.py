"""Real measurements: hold the budget against the machine in front of you.

Light to import: torch is imported inside the functions that need it, and the
heavy measurements run in a fresh process of their own.

In a notebook cell:

>>> from course_lib import measure
>>> print(measure.snapshot("cpu").describe())                        # doctest: +SKIP
>>> result = measure.measure_pools("course-tiny", sequences=2, context_tokens=512)  # doctest: +SKIP
>>> print(result.table())                                            # doctest: +SKIP

Modules, one idea each:

- :mod:`.device` - device memory now (CUDA: free/allocated/reserved/context; CPU: RSS/peak/available)
- :mod:`.tiny_model` - a small llama-style model built from a ModelSpec, with a preallocated KV cache
- :mod:`.worker` - the fresh process that measures
- :mod:`.run` - measurement against prediction (:func:`measure_pools`)
- :mod:`.loadtime` - the readiness timeline, timed (:func:`measure_load_time`)
- :mod:`.bandwidth` - host<->device copies, pinned and pageable (:func:`measure_bandwidth`)
- :mod:`.report` - :func:`measure`: all of the above as one report (``course-memory measure``)
- :mod:`.plot` - predicted vs measured bar chart
"""

from .bandwidth import BandwidthResult, measure_bandwidth
from .device import CpuSnapshot, CudaSnapshot, snapshot
from .loadtime import LoadTimeline, Phase, measure_load_time
from .report import MeasureReport, measure
from .run import MeasureResult, PoolComparison, measure_pools, predict_pools

__all__ = [
    "BandwidthResult", "CpuSnapshot", "CudaSnapshot", "LoadTimeline", "MeasureReport", "MeasureResult", "Phase",
    "PoolComparison", "measure", "measure_bandwidth", "measure_load_time", "measure_pools", "predict_pools", "snapshot",
]

"""Loaded only in the vLLM oracle's child Python (``course_lib.runtimes.vllm.oracle_mm``), never by the course.

vLLM 0.32's Qwen-VL models import ``smart_resize`` from transformers' torchvision-backed image module, and the
oracle venv has no torchvision (pip's wheels are CUDA builds that fail to load on the CPU torch; see the
Makefile). transformers ships a PIL twin of that module with the same ``smart_resize``; this import hook serves
it under the torchvision module's name, so vLLM's model registry can inspect the architecture. No pixel is
ever processed by the oracle: it asks vLLM for token counts only.
"""

import importlib
import importlib.abc
import importlib.util
import sys

_ALIASES = {"transformers.models.qwen2_vl.image_processing_qwen2_vl":
            "transformers.models.qwen2_vl.image_processing_pil_qwen2_vl"}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        return importlib.util.spec_from_loader(name, self) if name in _ALIASES else None

    def create_module(self, spec):
        module = importlib.import_module(_ALIASES[spec.name])
        if not hasattr(module, "Qwen2VLImageProcessor"):
            module.Qwen2VLImageProcessor = module.Qwen2VLImageProcessorPil
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Alias())

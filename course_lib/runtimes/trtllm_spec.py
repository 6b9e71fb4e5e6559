"""TensorRT-LLM's speculative decoding (the LLM API's ``speculative_config``; ``trtllm-serve --extra_llm_api_options``).

``speculative_config: {decoding_type: Eagle3 | Eagle | MTP | NGram | DraftTarget, max_draft_len: N,
speculative_model_dir: DRAFT}`` (``num_nextn_predict_layers`` for MTP). What it changes in memory, read from
NVIDIA/TensorRT-LLM's ``tensorrt_llm/_torch/pyexecutor/_util.py`` (``KvCacheCreator``) at commit 0004396 of the
main branch (2026; the 1.2 tag could not be read: PyPI's tensorrt-llm 1.2.0 is a 10 kB stub that downloads the wheel
from pypi.nvidia.com, out of reach here) and the feature page ``docs/source/features/speculative-decoding.md``:

* **The drafter is loaded before the KV cache is sized.** The "one model" flavour (MTP, EAGLE-3 one-model) builds
  the draft layers into the target model; the "two model" flavour (EAGLE-3, DraftTarget) builds a second model
  engine (``draft_model_engine``). Either way both are resident when ``_cal_max_memory`` measures the profiling peak,
  so ``free_gpu_memory_fraction`` applies to what is left after the drafter: ``(total - peak) x fraction``.
* **One budget, one token count.** ``_get_kv_size_per_token`` adds the draft's per-token cost to the target's
  (MTP: ``num_nextn_predict_layers`` more layers of the target's shape, in the target's manager class, on the last
  PP rank; EAGLE-3 one-model: the draft config's layers; two-model: the draft model's own cost), and the budget is
  divided by the sum: the target's and the draft's pools hold the same number of tokens.
* **NGram** drafts from the prompt: no model, no KV.

The draft's weights are counted as :func:`course_lib.runtimes.vllm.spec.drafter` counts them (MTP without the
shared embedding and head, an EAGLE head without its embedding and head plus ``fc``, a draft model whole): TensorRT-LLM's
own modules were not traced to the tensor.

>>> sd = parse_trtllm_speculative('{"decoding_type": "MTP", "num_nextn_predict_layers": 1}')
>>> sd.decoding_type, sd.max_draft_len, sd.as_vllm().method
('MTP', 1, 'mtp')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import CourseInputError
from .vllm.spec import SpeculativeDecoding, speculative_mapping

#: ``decoding_type`` values modelled (TensorRT-LLM's DecodingBaseConfig subclasses of the same names).
DECODING_TYPES = ("Eagle3", "Eagle", "MTP", "NGram", "DraftTarget")
_VLLM_METHOD = {"Eagle3": "eagle3", "Eagle": "eagle", "MTP": "mtp", "NGram": "ngram", "DraftTarget": "draft_model"}


@dataclass(frozen=True)
class TrtllmSpeculative:
    """One ``speculative_config``: the decoding type, the draft length and the draft checkpoint (if any)."""

    decoding_type: str
    max_draft_len: int
    speculative_model_dir: str | None = None

    @property
    def loads_drafter(self) -> bool:
        return self.decoding_type != "NGram"

    def as_vllm(self) -> SpeculativeDecoding:
        """The same drafter in vLLM's terms, whose weight and layer count :mod:`.vllm.spec` holds."""
        return SpeculativeDecoding(_VLLM_METHOD[self.decoding_type], self.max_draft_len,
                                   self.speculative_model_dir if self.decoding_type not in ("MTP", "NGram") else None)


def parse_trtllm_speculative(text: Any) -> TrtllmSpeculative | None:
    """``speculative_config`` as a JSON object (YAML's flow form) or a mapping; one line naming a bad value."""
    cfg = speculative_mapping(text, "give TensorRT-LLM's mapping, e.g. '{\"decoding_type\": \"Eagle3\", "
                                    "\"max_draft_len\": 3, \"speculative_model_dir\": \"DRAFT\"}'")
    if cfg is None:
        return None
    kind = cfg.get("decoding_type")
    by_lower = {d.lower(): d for d in DECODING_TYPES}
    if not isinstance(kind, str) or kind.lower() not in by_lower:
        raise CourseInputError(f"--speculative-config decoding_type={kind!r:.40} is not modelled for TensorRT-LLM; use "
                               f"one of {', '.join(DECODING_TYPES)}")
    kind = by_lower[kind.lower()]
    if kind == "MTP":
        n = cfg.get("num_nextn_predict_layers", cfg.get("max_draft_len", 1))
    else:
        n = cfg.get("max_draft_len")
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 64:
        raise CourseInputError(f"--speculative-config {'num_nextn_predict_layers' if kind == 'MTP' else 'max_draft_len'}"
                               f"={n!r:.20} is not a whole number from 1 to 64")
    model = cfg.get("speculative_model_dir", cfg.get("speculative_model"))
    if kind in ("Eagle3", "Eagle", "DraftTarget") and not isinstance(model, str):
        raise CourseInputError(f"--speculative-config decoding_type {kind} needs \"speculative_model_dir\": the draft "
                               f"checkpoint (a folder with a config.json, a Hub id or a preset)")
    return TrtllmSpeculative(kind, n, model if kind not in ("MTP", "NGram") else None)

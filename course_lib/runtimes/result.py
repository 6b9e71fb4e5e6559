"""What a runtime will allocate: :class:`RuntimeEstimate`, shared by the vLLM, SGLang and TensorRT-LLM models.

Every runtime ends in the same place: a KV cache of ``runtime_kv_cache_bytes`` per GPU, cut
into ``num_gpu_blocks`` blocks that hold ``kv_cache_tokens`` tokens, so that
``max_concurrency`` requests of ``max_model_len`` tokens fit at once (vLLM's start-up line
"Maximum concurrency for N tokens per request: X"). How it gets there differs: each runtime
module fills :attr:`terms` with its own arithmetic, in the order the runtime does it.

>>> t = Term("share", 71_260_000_000, "total x gpu_memory_utilization")
>>> t.gib
66.37
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..units import GiB


@dataclass(frozen=True)
class Term:
    """One line of a runtime's memory arithmetic.

    name: the runtime's own name for it (``activation_peak``, ``non_torch``, ...).
    bytes: its size (int); sign: +1 adds to the budget, -1 takes from it (0: reported only).
    note: where the figure comes from, in words (source file, or "fitted on ...").
    """

    name: str
    bytes: int
    note: str = ""
    sign: int = -1

    @property
    def gib(self) -> float:
        return round(self.bytes / GiB, 2)


@dataclass(frozen=True)
class RuntimeEstimate:
    """A runtime's own sizing of one launch, per GPU.

    runtime / version: which rule was followed ("vllm", "0.10.1"; the engine, V0 or V1, in ``launch``).
    launch: every knob the arithmetic used, after the runtime's defaults were applied.
    defaults: the knobs that were not given, each with the default taken and why.
    terms: the arithmetic, in the runtime's order (the budget first, then what is taken from it).
    runtime_kv_cache_bytes: what is left for the KV cache on the GPU that binds (the first stage).
    num_gpu_blocks / kv_cache_tokens / max_concurrency: the pool cut into blocks, as the runtime logs it.
    kv_cache_bytes_per_token: one token's KV bytes on that GPU (all its layers).
    per_stage_kv_cache_bytes: with pipeline parallelism, each stage's own figure (blocks are the minimum).
    fitted: the constants fitted on published logs that this estimate used.
    notes: anything else a reader should know (approximations, what the runtime would refuse).
    unchecked_rules: the release rules this estimate used that were read from the runtime's source but that no
    published log checks (each with its release and file); empty when every rule it used is checked by a log.
    """

    runtime: str
    version: str
    launch: dict[str, Any]
    defaults: dict[str, str]
    terms: tuple[Term, ...]
    runtime_kv_cache_bytes: int
    num_gpu_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    kv_cache_bytes_per_token: int
    block_size: int
    per_stage_kv_cache_bytes: tuple[int, ...] = ()
    fitted: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    unchecked_rules: tuple[str, ...] = ()

    @property
    def checked_by_log(self) -> bool:
        """Whether every release rule this estimate used is checked by a published start-up log."""
        return not self.unchecked_rules

    def term(self, name: str) -> int:
        """The bytes of term ``name`` (0 when this runtime has no such term)."""
        return next((t.bytes for t in self.terms if t.name == name), 0)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values: every size an int of bytes."""
        out: dict[str, Any] = {
            "runtime": self.runtime,
            "runtime_version": self.version,
            "launch": {k: v for k, v in self.launch.items() if k != "encoder_profile"},
            "defaults": dict(self.defaults),
            "runtime_kv_cache_bytes": self.runtime_kv_cache_bytes,
            "kv_cache_tokens": self.kv_cache_tokens,
            "num_gpu_blocks": self.num_gpu_blocks,
            "max_concurrency": round(self.max_concurrency, 2),
            "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token,
            "block_size": self.block_size,
        }
        if self.launch.get("encoder_profile"):
            out["encoder_profile"] = dict(self.launch["encoder_profile"])
        for t in self.terms:
            out[f"{t.name}_bytes"] = t.bytes
        out["terms"] = [{"name": t.name, "bytes": t.bytes, "sign": t.sign, "note": t.note} for t in self.terms]
        if len(self.per_stage_kv_cache_bytes) > 1:
            out["per_stage_kv_cache_bytes"] = list(self.per_stage_kv_cache_bytes)
        out["fitted_constants"] = list(self.fitted)
        out["notes"] = list(self.notes)
        out["checked_by_log"] = self.checked_by_log
        out["unchecked_rules"] = list(self.unchecked_rules)
        return out

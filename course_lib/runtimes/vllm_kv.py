"""vLLM's KV pool: bytes into blocks, blocks into tokens and a maximum concurrency.

V1 (``vllm/v1/core/kv_cache_utils.py``) gives every attention layer a page of ``block_size``
tokens (``2 x block_size x kv_heads x head_dim x bytes``; MLA caches one latent, no 2x). Layers
of one kind form a group; a hybrid model (sliding-window and full layers) splits its kinds into
groups of equal size, padding the last group of a kind (Gemma-3: 5 full and 29 sliding layers
make groups of 5, the sliding ones 6 groups with 1 padding layer: "Add 1 padding layers, may
waste at most 3.45% KV cache memory"). One block id is one page in every layer of a group, and
all groups share the pool, so::

    num_blocks = available // (page_bytes x layers_per_group)

A request of ``max_model_len`` tokens needs, per group, ``cdiv(max_model_len, block_size)``
blocks for full attention, or ``cdiv(min(window - 1 + max_num_batched_tokens, max_model_len),
block_size) + 1`` for a sliding window (the window plus one chunk in flight, one block of
misalignment); ``max_concurrency = num_blocks / sum of those``. The "GPU KV cache size: N tokens"
line is ``num_blocks // groups x block_size`` in releases up to 0.10 and ``int(max_concurrency x
max_model_len)`` after. V0 (``vllm/worker/cache_engine.py``) allocates every layer for every
block, windows ignored: ``num_blocks = available // (block_size x kv_bytes_per_token)``.

Worked example (the visible A100 log, Qwen2-7B bf16, 5.01 GiB): a page is 16 x 2 x 4 x 128 x 2
= 32,768 B, 28 layers make 917,504 B per block; 5,383,000,000 B // 917,504 = 5,867 blocks (the
log's "num_gpu_blocks is: 5867") = 93,872 tokens, 5,867 / 1,024 = 5.73x for 16,384-token requests.

>>> from course_lib.presets import get_model
>>> pool = kv_pool(get_model("qwen2-7b"), available_bytes=5_383_000_000, kv_bytes=2, block_size=16,
...                max_model_len=16384, max_num_batched_tokens=2048, engine="V1", tokens_rule="blocks")
>>> pool.num_blocks, pool.tokens, round(pool.max_concurrency, 2)
(5867, 93872, 5.73)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ..spec import LayerCache, ModelSpec


@dataclass(frozen=True)
class KVPool:
    """The KV pool of one GPU.

    num_blocks: blocks in the pool. tokens: what the runtime logs as "GPU KV cache size".
    max_concurrency: requests of max_model_len tokens that fit. groups: KV cache groups (V1).
    padding_layers: layers added to even the groups. bytes_per_token: KV bytes of one token on this GPU.
    """

    num_blocks: int
    tokens: int
    max_concurrency: float
    groups: int
    padding_layers: int
    bytes_per_token: int


def _page(layer: LayerCache, kv_bytes: Fraction, block_size: int, tp: int) -> int:
    return math.ceil(layer.values_per_token_per_gpu(tp) * kv_bytes * block_size)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class KVLayout:
    """How vLLM lays out one GPU's KV cache: the page, the groups, and one request's need in blocks."""

    engine: str
    block_bytes: int          # bytes one block id costs across the layers it spans
    groups: int
    padding_layers: int
    blocks_per_request: int   # blocks one max_model_len request needs, summed over groups
    bytes_per_token: int
    block_size: int
    max_model_len: int

    def pool(self, blocks: int, tokens_rule: str = "concurrency") -> KVPool:
        """The pool of ``blocks`` blocks: its tokens and concurrency as this release logs them."""
        if self.engine == "V0":
            return KVPool(blocks, blocks * self.block_size, blocks * self.block_size / self.max_model_len, 1, 0,
                          self.bytes_per_token)
        concurrency = blocks / self.blocks_per_request if self.blocks_per_request else 0.0
        tokens = (blocks // max(1, self.groups) * self.block_size if tokens_rule == "blocks"
                  else int(concurrency * self.max_model_len))
        return KVPool(blocks, tokens, concurrency, self.groups, self.padding_layers, self.bytes_per_token)


def kv_layout(spec: ModelSpec, *, kv_bytes: Fraction | int, block_size: int, max_model_len: int,
              max_num_batched_tokens: int, engine: str = "V1", tensor_parallel: int = 1,
              layers: tuple[LayerCache, ...] | None = None, hybrid_allocator: bool = True) -> KVLayout:
    """The :class:`KVLayout` of ``layers`` (default: all of ``spec``'s attention layers) on one GPU.

    ``hybrid_allocator=False`` treats sliding-window layers as full attention, as V1 did before its
    hybrid allocator (and does under ``--disable-hybrid-kv-cache-manager``).
    """
    layers = tuple(spec.layers if layers is None else layers)
    kv_bytes = Fraction(kv_bytes)
    tp = tensor_parallel
    per_token = math.ceil(sum(layer.values_per_token_per_gpu(tp) for layer in layers) * kv_bytes)
    if not layers:
        return KVLayout(engine, 0, 0, 0, 0, 0, block_size, max_model_len)
    if engine == "V0":
        block_bytes = sum(_page(layer, kv_bytes, block_size, tp) for layer in layers)
        return KVLayout("V0", block_bytes, 1, 0, cdiv(max_model_len, block_size), per_token, block_size, max_model_len)
    kinds: dict[int | None, list[LayerCache]] = {}
    for layer in layers:
        kinds.setdefault(layer.window if hybrid_allocator else None, []).append(layer)
    sizes = [len(v) for v in kinds.values()]
    if len(kinds) == 1:
        group_size, groups = sizes[0], 1
    else:
        # _get_kv_cache_groups_uniform_page_size: groups of the smallest kind's size, or of the largest when
        # it is under 1.5x the smallest (gpt-oss + EAGLE: 12 sliding + 13 full pad to 13 + 13)
        group_size = min(sizes) if max(sizes) >= 1.5 * min(sizes) else max(sizes)
        groups = sum(cdiv(n, group_size) for n in sizes)
    page = max(_page(layer, kv_bytes, block_size, tp) for layer in layers)
    need = 0
    for window, members in kinds.items():
        per_group = (cdiv(max_model_len, block_size) if window is None
                     else cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block_size) + 1)
        need += per_group * cdiv(len(members), group_size)
    return KVLayout("V1", page * group_size, groups, groups * group_size - len(layers), need, per_token, block_size,
                    max_model_len)


def kv_pool(spec: ModelSpec, *, available_bytes: int, kv_bytes: Fraction | int, block_size: int,
            max_model_len: int, max_num_batched_tokens: int, engine: str = "V1", tensor_parallel: int = 1,
            layers: tuple[LayerCache, ...] | None = None, tokens_rule: str = "concurrency",
            hybrid_allocator: bool = True) -> KVPool:
    """Cut ``available_bytes`` into vLLM's blocks (see :func:`kv_layout`).

    ``tokens_rule`` is how the release logs the token count: ``"blocks"`` (up to 0.10:
    ``num_blocks // groups x block_size``) or ``"concurrency"`` (later: ``int(max_concurrency x
    max_model_len)``).
    """
    layout = kv_layout(spec, kv_bytes=kv_bytes, block_size=block_size, max_model_len=max_model_len,
                       max_num_batched_tokens=max_num_batched_tokens, engine=engine, tensor_parallel=tensor_parallel,
                       layers=layers, hybrid_allocator=hybrid_allocator)
    if not layout.block_bytes:
        return KVPool(0, 0, 0.0, 0, 0, 0)
    return layout.pool(max(0, int(available_bytes)) // layout.block_bytes, tokens_rule)


def one_request_bytes(spec: ModelSpec, *, kv_bytes: Fraction | int, block_size: int, max_model_len: int,
                      max_num_batched_tokens: int, tensor_parallel: int = 1,
                      layers: tuple[LayerCache, ...] | None = None, engine: str = "V1") -> int:
    """KV bytes one ``max_model_len`` request needs (vLLM refuses to start below this)."""
    layers = tuple(spec.layers if layers is None else layers)
    kv_bytes = Fraction(kv_bytes)
    total = 0
    for layer in layers:
        page = _page(layer, kv_bytes, block_size, tensor_parallel)
        if engine == "V0" or layer.window is None:
            blocks = cdiv(max_model_len, block_size)
        else:
            blocks = cdiv(min(layer.window - 1 + max_num_batched_tokens, max_model_len), block_size) + 1
        total += blocks * page
    return total

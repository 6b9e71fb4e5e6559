"""vLLM's KV pool from a pool's bytes: blocks, tokens and a maximum concurrency (the layout is :mod:`.kv_groups`).

The one KV layout (specs per attention kind, groups, blocks, concurrency, refusal) is
:mod:`.kv_groups`, which the profile path and the given pool both call. This module keeps the
short form used by the published-log tests: a pool of ``available_bytes``, with one batch of
``max_num_batched_tokens`` in flight unless ``max_in_flight_tokens`` says otherwise.

Worked example (the visible A100 log, Qwen2-7B bf16, 5.01 GiB): a page is 16 x 2 x 4 x 128 x 2
= 32,768 B, 28 layers make 917,504 B per block; 5,383,000,000 B // 917,504 = 5,867 blocks (the
log's "num_gpu_blocks is: 5867") = 93,872 tokens, 5,867 / 1,024 = 5.73x for 16,384-token requests.

>>> from course_lib.model.presets import get_model
>>> pool = kv_pool(get_model("qwen2-7b"), available_bytes=5_383_000_000, kv_bytes=2, block_size=16,
...                max_model_len=16384, max_num_batched_tokens=2048, engine="V1", tokens_rule="blocks")
>>> pool.num_blocks, pool.tokens, round(pool.max_concurrency, 2)
(5867, 93872, 5.73)
"""

from __future__ import annotations

from fractions import Fraction

from ...model.spec import LayerCache, ModelSpec
from .kv_groups import KVCapacity, KVLayout, cdiv, kv_layout  # noqa: F401  (re-exported)

#: The pool of one GPU (the name the published-log tests use).
KVPool = KVCapacity


def kv_pool(spec: ModelSpec, *, available_bytes: int, kv_bytes: Fraction | int, block_size: int,
            max_model_len: int, max_num_batched_tokens: int, engine: str = "V1", tensor_parallel: int = 1,
            layers: tuple[LayerCache, ...] | None = None, tokens_rule: str = "concurrency",
            hybrid_allocator: bool = True, max_in_flight_tokens: int | None = None) -> KVCapacity:
    """Cut ``available_bytes`` into vLLM's blocks (see :func:`.kv_groups.kv_layout`).

    ``tokens_rule`` is how the release logs the token count: ``"blocks"`` (up to 0.10:
    ``num_blocks // groups x block_size``) or ``"concurrency"`` (later: ``int(max_concurrency x
    max_model_len)``).
    """
    layout = kv_layout(spec, kv_bytes=kv_bytes, block_size=block_size, max_model_len=max_model_len,
                       max_in_flight_tokens=max_num_batched_tokens if max_in_flight_tokens is None
                       else max_in_flight_tokens, engine=engine, tensor_parallel=tensor_parallel, layers=layers,
                       hybrid_allocator=hybrid_allocator, tokens_rule=tokens_rule)
    if not layout.bytes_per_block:
        return KVCapacity(0, 0, 0.0, 0, 0, (), 0, None)
    return layout.capacity(available_bytes)

"""DeepSeek-V4's KV cache specs as vLLM 0.33 pages them: five spec kinds per model, each with its page bytes.

Read in vLLM 0.33.0: ``vllm/models/deepseek_v4/attention.py`` (``DeepseekV4Attention.get_kv_cache_spec``,
``DeepseekV4IndexerCache``, the indexer's ``k_cache_head_dim``), ``vllm/models/deepseek_v4/compressor.py``
(``CompressorStateCache``, ``DeepseekCompressor``), ``vllm/v1/attention/backends/mla/sparse_swa.py``
(``DeepseekV4SWACache``) and ``vllm/v1/kv_cache_interface.py`` (``AttentionSpec.page_size_bytes`` =
``num_heads x num_states x state_content_size_bytes``, ``num_states = block_size // tokens_per_state``;
``_apply_alignment_padding`` rounds a page up to ``alignment``). A layer of compress ratio ``m`` holds:

====================  ==========================  ==========================================================
spec kind             vLLM spec                   one page
====================  ==========================  ==========================================================
``dsv4_swa``          ``SlidingWindowMLASpec``    every layer's window of ``sliding_window`` tokens: 64 tokens
                                                  (``DeepseekV4SWACache``'s block) of 584 B (fp8_ds_mla: 448 B
                                                  fp8 NoPE + 128 B bf16 RoPE + 8 B scales) or ``head_dim x 2`` B
``dsv4_compressed``   ``MLAAttentionSpec``        ``m > 1``: ``block_size // m`` compressed entries of 584 B
                                                  (``tokens_per_state = m``)
``dsv4_indexer``      ``MLAAttentionSpec``        ``m == 4`` (CSA): ``block_size // 4`` indexer keys of
                                                  ``index_head_dim + index_head_dim // 128 x 4`` B (fp8 + fp32 scale)
``dsv4_state``        ``SlidingWindowMLASpec``    the compressor's fp32 state ring (``CompressorStateCache``):
                                                  4 (``m`` = 4) or 8 (``m`` = 128) tokens of
                                                  ``2 x coff x head_dim x 4`` B (kv + score; ``coff`` 2 for CSA)
``dsv4_index_state``  ``SlidingWindowMLASpec``    CSA's indexer compressor ring: 4 tokens of
                                                  ``2 x 2 x index_head_dim x 4`` B
====================  ==========================  ==========================================================

Pages are padded to 576 B (fp8_ds_mla) or 512 B (``alignment``).

How vLLM groups them (:func:`vllm_layout`), read in 0.33.0 ``vllm/v1/core/kv_cache_planning.py`` (the same code in
0.32.0's ``kv_cache_utils.py``, but for draft-model annotation): the indexer backend runs only the block-outermost
``BLHNC`` layout (``v1/attention/backends/mla/indexer.py:315``), and the pages differ, so ``get_kv_cache_groups``
takes ``_get_packed_kv_cache_groups`` (:914-1041): layers are bucketed greedily by
``UniformTypeKVCacheSpecs.is_uniform_type`` (same block size; all full/MLA, or all windows of one size), a bucket
whose page sizes have equal counts is "balanced", and balanced buckets split into ``cdiv(layers per page size,
repeats)`` groups, ``repeats`` being ``_approximate_gcd`` (least padding, ties to the larger) over the balanced
buckets, at least the largest mixed balanced bucket's count; an unbalanced bucket stays one group. A block spans
one page of every layer of a group, so ``bytes_per_block`` is the widest group's page sum
(``_get_kv_cache_bytes_per_block``, block-outermost: rounded to the layers' block-stride alignment, 1 here); a
request holds, per group, the most pages any of its layers needs (``UniformTypeKVCacheSpecs.max_memory_usage_bytes``):
``cdiv(max_model_len, 256)`` for the compressed and indexer pages (``tokens_per_state`` packs ``m`` tokens into one
entry, so a 256-token page holds ``256 // m`` entries), ``cdiv(min(window - 1 + in flight, max_model_len), block)
+ 1`` for a window and a state ring (``SlidingWindowSpec.max_admission_blocks_per_request``). The block is 256
tokens: the sparse MLA kernel's only block (``models/deepseek_v4/sparse_mla.py:60``; ``platforms/cpu.py`` forces it).
vLLM 0.32's CPU build checks this to the token on a tiny DeepSeek-V4 (benchmarks/vllm_oracle/windows.json).

Worked example, DeepSeek-V4-Flash (head_dim 512, index_head_dim 128), fp8_ds_mla, 256-token blocks
(the block the compressor comments name: "The KV block shape [256//4, head_dim] = [64, 584]"): a CSA
layer's compressed page is 256 // 4 = 64 entries x 584 B = 37,376 B, padded to 65 x 576 = 37,440 B;
an HCA layer's is 2 x 584 = 1,168 B, padded to 1,728 B; the indexer's 64 x 132 = 8,448 B, padded to
8,640 B; the compressor's ring 4 x 2,048 x 4 = 32,768 B, padded to 32,832 B.

>>> pages = {s.kind: s.page_bytes for s in layer_specs(4, head_dim=512, index_head_dim=128, window=128)}
>>> pages["dsv4_swa"], pages["dsv4_compressed"], pages["dsv4_indexer"], pages["dsv4_state"]
(37440, 37440, 8640, 32832)
>>> [s.page_bytes for s in layer_specs(128, head_dim=512, index_head_dim=128, window=128)]
[37440, 1728, 32832]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: fp8_ds_mla's bytes per token of a 512-wide latent: 448 fp8 NoPE + 64 x 2 bf16 RoPE + 8 scale bytes.
FP8_DS_MLA_TOKEN_BYTES = 584
#: ``DeepseekV4SWACache``'s default block (sparse_swa.py: "Any multiple of 32").
SWA_BLOCK_TOKENS = 64
#: The indexer quantises its keys in blocks of 128 values, one fp32 scale each (``quant_block_size``).
INDEXER_QUANT_BLOCK = 128


def round_up(n: int, multiple: int) -> int:
    """vLLM's ``round_up``: ``round_up(37376, 576) == 37440``."""
    return -(-n // multiple) * multiple


@dataclass(frozen=True)
class DSV4Spec:
    """One of a DeepSeek-V4 layer's KV cache specs in vLLM 0.33: its kind, page bytes and tokens a page covers."""

    kind: str
    page_bytes: int
    block_tokens: int          # tokens of the sequence one page covers (a state ring: its capacity)
    tokens_per_state: int = 1
    window: int | None = None


def layer_specs(compress_ratio: int, *, head_dim: int, index_head_dim: int, window: int, block_size: int = 256,
                cache_dtype: str = "fp8_ds_mla") -> tuple[DSV4Spec, ...]:
    """The specs of one DeepSeek-V4 layer of ``compress_ratio`` (0 or 1: sliding only, 4: CSA, 128: HCA)."""
    fp8 = cache_dtype == "fp8_ds_mla"
    align = 576 if fp8 else 512
    token = FP8_DS_MLA_TOKEN_BYTES if fp8 else head_dim * 2
    out = [DSV4Spec("dsv4_swa", round_up(SWA_BLOCK_TOKENS * token, align), SWA_BLOCK_TOKENS, 1, window)]
    if compress_ratio <= 1:
        return tuple(out)
    m = compress_ratio
    out.append(DSV4Spec("dsv4_compressed", round_up(block_size // m * token, align), block_size, m))
    if m == 4:
        index_bytes = index_head_dim + index_head_dim // INDEXER_QUANT_BLOCK * 4
        out.append(DSV4Spec("dsv4_indexer", round_up(block_size // m * index_bytes, 576 if fp8 else 512),
                            block_size, m))
    coff = 2 if m == 4 else 1
    ring = 4 if m == 4 else 8
    out.append(DSV4Spec("dsv4_state", round_up(ring * 2 * coff * head_dim * 4, align), ring, 1, coff * m))
    if m == 4:
        out.append(DSV4Spec("dsv4_index_state", round_up(ring * 2 * coff * index_head_dim * 4, align), ring, 1,
                            coff * m))
    return tuple(out)


def packs_groups(spec: Any) -> bool:
    """Whether vLLM lays ``spec``'s cache out as DeepSeek-V4's packed page kinds (:func:`vllm_layout`) rather than
    one page per attention layer (:mod:`.kv_groups`): the one test the estimate, the given pool and the launch ask."""
    return getattr(spec, "model_type", "") == "deepseek_v4"


def refusal(spec: Any, runtime: str) -> str | None:
    """Why a runtime's pool of ``spec`` is not estimated (DeepSeek-V4 outside vLLM), or None."""
    if not packs_groups(spec) or runtime == "vllm":
        return None
    return (f"{runtime}'s KV cache for DeepSeek-V4 (compressed sparse MLA: a 128-token window on every layer, "
            f"compressed entries every 4 or 128 tokens, indexer keys, compressor state rings) is not modelled: "
            f"only vLLM's grouping is (course_lib/runtimes/vllm/kv_dsv4.py); use --runtime vllm, or leave out "
            f"--runtime for the model's own per-token figures")


#: The block DeepSeek-V4's sparse MLA kernel runs (``models/deepseek_v4/sparse_mla.py:60``, 0.33.0: ``[256]``).
DSV4_BLOCK_TOKENS = 256


def compress_ratios(spec: Any) -> tuple[tuple[int, int], ...]:
    """(compress ratio, index_head_dim) of every layer, read back from the caches transformers keeps
    (:func:`course_lib.model.families.deepseek_v4.cache_layout`): a sliding layer is one windowed cache; a
    compressed layer a window, then ``(head_dim [+ index_head_dim]) / m`` values a token, and one state whose
    overlap is ``2 m (head_dim + index_head_dim)`` for CSA (so ``m^2`` = overlap / (2 x the per-token values)) and
    0 for HCA (``m = head_dim / values``).

    >>> from types import SimpleNamespace
    >>> from course_lib.model.spec import LayerCache as C, LayerState as St
    >>> compress_ratios(SimpleNamespace(head_dim=512, layers=(C(1024, 128, 1), C(512, 128, 1), C(160, None, 0),
    ...     C(512, 128, 1), C(4, None, 0)), states=(St(5120, 7680), St(0, 130048))))
    ((0, 0), (4, 128), (128, 0))
    """
    out, layers, states, i = [], list(spec.layers), iter(spec.states), 0
    while i < len(layers):
        if i + 1 < len(layers) and layers[i].window is not None and layers[i + 1].window is None:
            values, state = layers[i + 1].values_per_token, next(states)
            if state.recurrent_values:          # CSA: overlap state
                m = math.isqrt(state.recurrent_values // (2 * values))
                out.append((m, values * m - spec.head_dim))
            else:
                out.append((spec.head_dim // values, 0))
            i += 2
        else:
            out.append((0, 0))
            i += 1
    return tuple(out)


def approximate_gcd(values: list[int], lower_bound: int = 1) -> int:
    """``_approximate_gcd`` (kv_cache_planning.py:879-911): the d >= lower_bound with the least padding when each
    value is rounded up to a multiple of d; ties go to the larger d.

    >>> approximate_gcd([43, 21, 21, 20], lower_bound=21), approximate_gcd([4, 2, 1], lower_bound=2)   # pads 5, 1
    (22, 2)
    """
    best_d, best_pad = max(1, lower_bound), None
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best_d):
            best_d, best_pad = d, pad
    return best_d


def packed_groups(specs: list) -> list:
    """``_get_packed_kv_cache_groups`` over :class:`.kv_groups.LayerSpec` s in registration order: buckets of one
    block size and one kind (full/MLA, or windows of one size), balanced buckets split into groups of ``repeats``
    pattern repeats, the others whole. Returns :class:`.kv_groups.KVGroup` s.

    >>> from course_lib.runtimes.vllm.kv_groups import LayerSpec
    >>> ring = [LayerSpec("sliding", 7, 4, 8), LayerSpec("sliding", 3, 4, 8)]      # 2 page sizes, 2 of each
    >>> g = packed_groups([LayerSpec("sliding", 9, 64, 128)] * 4 + ring * 2)      # repeats = 2
    >>> [(x.kind, x.layers) for x in g]
    [('sliding', (0, 2)), ('sliding', (1, 3)), ('sliding', (4, 5, 6, 7))]
    """
    from .kv_groups import KVGroup, cdiv  # noqa: PLC0415 - kv_groups imports nothing from here

    buckets: dict[tuple, list[int]] = {}
    for i, s in enumerate(specs):
        buckets.setdefault((s.block_size, s.kind == "sliding", s.window if s.kind == "sliding" else None), []).append(i)
    info = []
    for key, members in buckets.items():
        by_page: dict[int, list[int]] = {}
        for i in members:
            by_page.setdefault(specs[i].page_bytes, []).append(i)
        counts = [len(v) for v in by_page.values()]
        info.append((key, members, by_page, len(set(counts)) == 1, max(counts)))
    floor = max((most for _, _, by_page, balanced, most in info if balanced and len(by_page) > 1), default=0)
    repeats = approximate_gcd([most for *_, balanced, most in info if balanced], floor) if floor else None

    def n_groups(balanced: bool, most: int) -> int:
        return cdiv(most, repeats) if balanced and repeats is not None else 1

    def state_bucket(key: tuple) -> bool:
        return repeats is None and key[1]            # a window bucket with no repeat pattern

    def widest(by_page: dict, n: int) -> int:
        return sum(cdiv(len(v), n) * page for page, v in by_page.items())

    anchor = max(widest(by_page, len(members) if state_bucket(key) else n_groups(balanced, most))
                 for key, members, by_page, balanced, most in info)
    groups = []
    for key, members, by_page, balanced, most in info:
        n = n_groups(balanced, most)
        if anchor and state_bucket(key):
            n = max(n, cdiv(len(members), max(anchor // specs[members[0]].page_bytes, 1)))
        chunks = [members] if n == 1 else [[i for rep in list(zip(*by_page.values()))[j::n] for i in rep]
                                           for j in range(n)]
        first = specs[members[0]]
        groups += [KVGroup(first.kind, first.window, tuple(c), tuple(specs[i].page_bytes for i in c)) for c in chunks]
    return groups


def vllm_specs(spec: Any, *, block_size: int = DSV4_BLOCK_TOKENS, cache_dtype: str = "fp8_ds_mla") -> list:
    """Every DeepSeek-V4 cache vLLM registers, as :class:`.kv_groups.LayerSpec` s in registration order (per layer:
    its window, then for ``m > 1`` the compressed entries, the compressor's ring, and for CSA the indexer's keys and
    ring; the order decides only which layers share a group, not the figures)."""
    from .kv_groups import LayerSpec  # noqa: PLC0415

    window = next(layer.window for layer in spec.layers if layer.window is not None)
    out = []
    for m, index_dim in compress_ratios(spec):
        for s in layer_specs(m, head_dim=spec.head_dim, index_head_dim=index_dim or 128, window=window,
                             block_size=block_size, cache_dtype=cache_dtype):
            if s.kind in ("dsv4_compressed", "dsv4_indexer"):
                out.append(LayerSpec("mla", s.page_bytes, s.block_tokens))
            else:
                out.append(LayerSpec("sliding", s.page_bytes, s.block_tokens, s.window))
    return out


def vllm_layout(spec: Any, *, max_model_len: int, max_in_flight_tokens: int, tokens_rule: str = "concurrency",
                null_block: bool = True, gib_format: str = "round", block_size: int = DSV4_BLOCK_TOKENS):
    """vLLM 0.32/0.33's :class:`.kv_groups.KVLayout` of a DeepSeek-V4 (see the module's text).

    The tiny DeepSeek-V4 of the oracle (layers 0, 4, 128, 4; window 128) with 64 MiB and one batch of 512 tokens in
    flight (the CPU): 5 groups (block sizes 64, 64, 256, 4, 8), the widest 2 x 37,440 + 1,728 + 2 x 8,640 = 93,888 B
    a block; 67,108,864 // 93,888 = 714 blocks; a request of 8,192 tokens holds 2 x 11 window blocks (cdiv(127 + 512,
    64) + 1), 32 compressed (8,192 / 256), 131 CSA-ring (cdiv(7 + 512, 4) + 1) and 81 HCA-ring (cdiv(127 + 512, 8) + 1)
    blocks = 266: 714 / 266 = 2.68x, int(2.684 x 8,192) = 21,989 tokens, what vLLM 0.32's CPU build logs.

    >>> from types import SimpleNamespace
    >>> from course_lib.model.spec import LayerCache as C, LayerState as St
    >>> tiny = SimpleNamespace(head_dim=512, layers=(C(1024, 128, 1), C(512, 128, 1), C(160, None, 0), C(512, 128, 1),
    ...     C(4, None, 0), C(512, 128, 1), C(160, None, 0)), states=(St(5120, 7680), St(0, 130048), St(5120, 7680)))
    >>> lay = vllm_layout(tiny, max_model_len=8192, max_in_flight_tokens=512)
    >>> len(lay.groups), lay.bytes_per_block, lay.blocks_per_request
    (5, 93888, 266)
    """
    from .kv_groups import KVLayout  # noqa: PLC0415

    specs = vllm_specs(spec, block_size=block_size)
    groups = packed_groups(specs)
    per_block = max(sum(g.page_bytes) for g in groups)
    return KVLayout("V1", tuple(specs), tuple(groups), per_block, 0, block_size, max_model_len, max_in_flight_tokens,
                    tokens_rule, null_block, gib_format)

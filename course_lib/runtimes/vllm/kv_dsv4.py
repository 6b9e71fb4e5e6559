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

Pages are padded to 576 B (fp8_ds_mla) or 512 B (``alignment``). How vLLM then groups these kinds and
unifies their pages (its DeepSeek-V4 index groups) is **not modelled** here: a runtime estimate of a
DeepSeek-V4 pool is refused by name (:func:`refusal`) rather than given a wrong figure.

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


def refusal(spec: Any, runtime: str) -> str | None:
    """Why a runtime's pool of ``spec`` is not estimated (DeepSeek-V4's paged kinds are not grouped here), or None."""
    if getattr(spec, "model_type", "") != "deepseek_v4":
        return None
    return (f"{runtime}'s KV cache for DeepSeek-V4 (compressed sparse MLA: a 128-token window on every layer, "
            f"compressed entries every 4 or 128 tokens, indexer keys, compressor state rings) is not modelled: "
            f"vLLM 0.33's page kinds are in course_lib/runtimes/vllm/kv_dsv4.py, their grouping is not; leave out "
            f"--runtime for the model's own per-token figures")

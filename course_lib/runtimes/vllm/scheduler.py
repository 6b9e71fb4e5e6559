"""vLLM V1's scheduler as a simulator policy: its launch defaults and its number of KV blocks.

The scheduling itself is the ``vllm-v1`` policy of :mod:`course_lib.simulate`
(:class:`course_lib.simulate.vllm_v1._V1Simulation`, read from vLLM 0.32.0's
``vllm/v1/core/sched/scheduler.py``). This module turns a launch into its
:class:`~course_lib.serving.admission.AdmissionConfig`; with a model, from the one resolved launch
(:func:`vllm_v1_config_for`, the :class:`~.launch.ResolvedLaunch` the estimate and ``from-log`` read):

* **Defaults**: the one rule of :func:`course_lib.runtimes.vllm.estimate.batch_defaults` for the release's row
  (vLLM 0.32.0, ``vllm/engine/arg_utils.py`` ``get_batch_defaults``) and the platform's block
  (:mod:`.platforms`, ``vllm/platforms/cpu.py``): 128 tokens on the CPU when none is given
  (CUDA's 16); ``max_num_batched_tokens`` / ``max_num_seqs`` are 4096 / 256 for ``LLM()`` and
  2048 / 128 for ``vllm serve`` on CPU; on a GPU, 16384 / 1024 (both entrypoints) from 160 GiB,
  16384 (``LLM``) or 8192 (serve) / 1024 from 70 GiB unless it is an A100, else 8192 (``LLM``)
  or 2048 (serve) / 256. Chunked prefill and prefix caching are on for decoder models.
* **Refusal**: the one rule of :mod:`.kv_groups` (:func:`full_attention_refusal`): the null
  block held back, the length vLLM's binary search names.
* **Blocks** (0.32 ``vllm/v1/core/kv_cache_utils.py``; 0.33 ``kv_cache_planning.py``): ``kv_cache_memory_bytes // (page x
  layers)``, a page being ``2 x block_size x kv_heads x head_dim x bytes`` per layer. For a model
  with one KV group (full attention everywhere) that is ``kv_cache_memory_bytes // (block_size x
  kv_bytes_per_token)``. The pool keeps one block back (its null block), which the simulator
  subtracts. :func:`v1_num_blocks` is kept apart so the exact per-group accounting
  (:mod:`course_lib.runtimes.vllm.kv_groups`) can take its place.

The issue's case by hand: a 4-layer Llama with 2 KV heads of 64 dims in bf16 caches 2 x 4 x 2 x
64 x 2 = 2,048 B per token; a 128-token block is 262,144 B, so 12 MiB = 12,582,912 B holds 48
blocks = 6,144 tokens (vLLM logs "CPU KV cache size: 6,144 tokens").

>>> cfg = vllm_v1_config(kv_cache_memory_bytes=12 * 2**20, kv_bytes_per_token=2048, platform="cpu",
...                      entrypoint="llm", max_model_len=1024)
>>> cfg.policy, cfg.num_blocks, cfg.block_size_tokens, cfg.max_num_batched_tokens, cfg.max_num_seqs
('vllm-v1', 48, 128, 4096, 256)
"""

from __future__ import annotations

from ...serving.admission import VLLM_V1, AdmissionConfig
from ...errors import CourseInputError
from ...model.spec import ModelSpec
from .platforms import get_platform
from ..versions import Version
from .estimate import batch_defaults as _batch_defaults
from .kv_groups import KVGroup, KVLayout, LayerSpec
from .launch import ResolvedLaunch
from .releases import HISTORY

#: The releases whose scheduler this policy follows: the rows of :data:`.releases.HISTORY` whose
#: ``v1_scheduler`` rule is set (0.32.0, and 0.33.0 whose vllm/v1/core/, config/scheduler.py, engine/arg_utils.py
#: and platforms/cpu.py, diffed against 0.32.0, leave the modelled rules unchanged; its new local
#: ``--prefill-schedule-interval``, default 1: off, is not modelled).
SCHEDULER_RELEASES = tuple(k for k in HISTORY.known if HISTORY.at(k).v1_scheduler)
CPU = "cpu"
ENTRYPOINTS = ("serve", "llm")


def default_block_size(platform: str) -> int:
    """The block size vLLM picks when none is given: the platform's (:mod:`.platforms`: 128 on CPU, 16 on CUDA)."""
    return get_platform(platform, platform).default_block_size


def scheduler_release(text: str | Version | None) -> Version:
    """``--vllm-version`` for ``simulate --runtime vllm``: the one parser (``HISTORY.check``, an unknown release refused
    with the same line as on every path), then a release whose scheduler this policy does not follow refused.

    >>> scheduler_release(None), scheduler_release("0.32.1")
    (Version(major=0, minor=33, patch=0), Version(major=0, minor=32, patch=1))
    """
    version = HISTORY.check(text, "--vllm-version")
    if not HISTORY.at(version).v1_scheduler:
        raise CourseInputError(f"--vllm-version={text} with --runtime vllm: the V1 scheduler is modelled for vLLM "
                               f"{', '.join(str(v) for v in SCHEDULER_RELEASES)} only; use one of them")
    return version


def batch_defaults(platform: str, device_bytes: int = 0, device_name: str = "",
                   entrypoint: str = "serve", version: Version = SCHEDULER_RELEASES[0]) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` vLLM takes when neither is given: the one rule
    (:func:`.estimate.batch_defaults`, ``EngineArgs.get_batch_defaults``) for ``version``'s row, world size 1.

    >>> batch_defaults("cpu", entrypoint="llm"), batch_defaults("cuda", 80 * 2**30, "h100-80gb")
    ((4096, 256), (8192, 1024))
    >>> batch_defaults("cuda", 80 * 2**30, "a100-80gb"), batch_defaults("cuda", 24 * 2**30, "l4", "llm")
    ((2048, 256), (8192, 256))
    """
    tokens, seqs, _ = _batch_defaults(HISTORY.at(version), device_name or platform, device_bytes, entrypoint,
                                      platform)
    return tokens, seqs


def v1_num_blocks(kv_cache_memory_bytes: int, block_size: int, kv_bytes_per_token: int,
                  spec: ModelSpec | None = None) -> int:
    """Blocks of ``kv_cache_memory_bytes``, as vLLM V1 counts them for a model with one KV group.

    ``kv_cache_memory_bytes // (block_size x kv_bytes_per_token)``: with full attention in every
    layer, ``block_size x kv_bytes_per_token`` is vLLM's page x layers. A model with
    sliding-window layers (several KV groups) is refused: this policy gives every request one
    block per ``block_size`` tokens, which holds for full attention only.

    >>> v1_num_blocks(12 * 2**20, 128, 2048)
    48
    """
    if spec is not None and any(layer.window is not None for layer in spec.layers):
        raise CourseInputError(f"{spec.name} has sliding-window layers; simulate --runtime vllm schedules "
                               f"full-attention models only (one block per {block_size} tokens of every request)")
    blocks = kv_cache_memory_bytes // (block_size * kv_bytes_per_token)
    if blocks < 2:
        raise CourseInputError(f"kv_cache_memory_bytes={kv_cache_memory_bytes:,} holds {blocks} block(s) of "
                               f"{block_size} tokens x {kv_bytes_per_token:,} B; vLLM keeps one back (its null "
                               f"block), so give at least {2 * block_size * kv_bytes_per_token:,} B")
    return blocks


def full_attention_refusal(kv_cache_memory_bytes: int, block_size: int, kv_bytes_per_token: int,
                           max_model_len: int, version: Version = SCHEDULER_RELEASES[-1]):
    """vLLM's refusal of a full-attention pool (the one rule, :meth:`.kv_groups.KVLayout.refusal`), or None.

    A full-attention model is one KV group whose block costs ``block_size x kv_bytes_per_token``; vLLM holds back
    its null block and names the longest length the rest holds: 12 MiB of 2,048 B tokens in 128-token blocks is
    48 blocks, 47 usable, so 8,192 tokens are refused and 6,016 named.

    >>> full_attention_refusal(12 * 2**20, 128, 2048, 8192).estimated_max_model_len
    6016
    """
    rules = HISTORY.at(version)
    page = LayerSpec("full", block_size * kv_bytes_per_token, block_size)
    group = KVGroup("full", None, (0,), (page.page_bytes,))
    layout = KVLayout("V1", (page,), (group,), page.page_bytes, 0, block_size, max_model_len, 0,
                      null_block=rules.refusal_null_block, gib_format=rules.refusal_gib)
    return layout.refusal(int(kv_cache_memory_bytes))


def vllm_v1_config(*, kv_cache_memory_bytes: int, kv_bytes_per_token: int, platform: str = CPU,
                   device_bytes: int = 0, device_name: str = "", entrypoint: str = "serve",
                   block_size: int | None = None, max_num_seqs: int | None = None,
                   max_num_batched_tokens: int | None = None, max_model_len: int | None = None,
                   enable_prefix_caching: bool = True, spec: ModelSpec | None = None,
                   version: Version = SCHEDULER_RELEASES[-1]) -> AdmissionConfig:
    """The ``vllm-v1`` :class:`AdmissionConfig` of a launch; what is not given takes ``version``'s default."""
    if entrypoint not in ENTRYPOINTS:
        raise CourseInputError(f"entrypoint={entrypoint!r} is unknown; use serve or llm")
    block = block_size if block_size is not None else default_block_size(platform)
    tokens, seqs = batch_defaults(platform, device_bytes, device_name, entrypoint, version)
    num_blocks = v1_num_blocks(kv_cache_memory_bytes, block, kv_bytes_per_token, spec)   # windows refused first
    if max_model_len is not None:
        refused = full_attention_refusal(kv_cache_memory_bytes, block, kv_bytes_per_token, max_model_len, version)
        if refused is not None:
            raise CourseInputError(f"vLLM would refuse this launch: {refused.message()}")
    return AdmissionConfig(
        kv_budget_bytes=kv_cache_memory_bytes, kv_bytes_per_token=kv_bytes_per_token, policy=VLLM_V1,
        block_size_tokens=block, max_num_seqs=max_num_seqs if max_num_seqs is not None else seqs,
        max_num_batched_tokens=max_num_batched_tokens if max_num_batched_tokens is not None else tokens,
        max_model_len=max_model_len, enable_prefix_caching=enable_prefix_caching,
        kv_num_blocks=num_blocks)


def vllm_v1_config_for(resolved: ResolvedLaunch, *, kv_bytes_per_token: int,
                       enable_prefix_caching: bool = True) -> AdmissionConfig:
    """The ``vllm-v1`` :class:`AdmissionConfig` of one resolved launch (:func:`.estimate.resolve_launch`): its block
    size, token budget, ``max_num_seqs``, ``max_model_len`` and release are the ones the estimate, the given pool
    and ``from-log`` read, so ``simulate --runtime vllm`` resolves no default of its own. The pool is the launch's
    ``kv_cache_memory_bytes``.

    The CPU platform forces 16-token blocks on an MLA model (``vllm/platforms/cpu.py``, 0.32.0), where a plain
    model takes 128:

    >>> from course_lib.model.presets import get_model
    >>> from course_lib.runtimes.vllm.estimate import VllmLaunch, resolve_launch
    >>> launch = VllmLaunch(kv_cache_memory_bytes=2**30, max_model_len=4096)
    >>> [vllm_v1_config_for(resolve_launch(get_model(m), "cpu", launch), kv_bytes_per_token=2048).block_size_tokens
    ...  for m in ("llama-3.1-8b", "deepseek-v2-lite")]
    [128, 16]
    """
    launch = resolved.launch
    if launch.kv_cache_memory_bytes is None:
        raise CourseInputError("--runtime vllm needs --kv-cache-memory-bytes (vLLM's own flag, e.g. 12MiB): the KV "
                               "cache the scheduler hands out")
    return vllm_v1_config(kv_cache_memory_bytes=int(launch.kv_cache_memory_bytes),
                          kv_bytes_per_token=kv_bytes_per_token, platform=resolved.platform.name,
                          device_bytes=resolved.total_bytes, device_name=str(resolved.gpu),
                          entrypoint=launch.entrypoint, block_size=launch.block_size,
                          max_num_seqs=launch.max_num_seqs, max_num_batched_tokens=launch.max_num_batched_tokens,
                          max_model_len=launch.max_model_len, enable_prefix_caching=enable_prefix_caching,
                          spec=resolved.spec, version=resolved.version)

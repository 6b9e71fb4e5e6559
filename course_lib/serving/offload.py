"""Offloading: device memory bought with transfer time.

Moving bytes between host and device takes ``bytes / (link bandwidth x
efficiency)`` seconds. Link presets are *theoretical, per direction*:

=================  ===========  ================================================
link               GB/s, 1 dir  where the figure comes from
=================  ===========  ================================================
pcie-gen4-x16      31.5         16 GT/s x 16 lanes x 128/130 encoding / 8 bits
pcie-gen5-x16      63.0         32 GT/s, same arithmetic (vendors' "64"/"128 GB/s" count both directions)
nvlink-v100        150          V100 NVLink 300 GB/s total = 150 each way
nvlink-a100        300          A100 NVLink 600 GB/s total = 300 each way
nvlink-h100        450          H100 NVLink 900 GB/s total = 450 each way
=================  ===========  ================================================

Real copies reach less than the theoretical figure; ``efficiency`` (default
:data:`DEFAULT_EFFICIENCY` = 0.8) is an assumption, not a measurement:
pinned-memory copies commonly reach 70-90% of it, pageable ones less.

The lesson's point, worked by hand: stream 4 GB of offloaded weights over
PCIe Gen4 x16 at every decode step and each step waits 4e9 / 31.5e9 = 0.127 s
even at 100% efficiency, 4e9 / (0.8 x 31.5e9) = 0.159 s at 80%. Reading the
same bytes from an A100-80GB's own HBM (2,039 GB/s) takes about 0.002 s.
Offloading frees capacity; it does not make it free.

>>> round(transfer_seconds(4 * GB, "pcie-gen4-x16", efficiency=1.0), 3)
0.127
>>> round(transfer_seconds(4 * GB, "pcie-gen4-x16"), 3)      # default efficiency 0.8
0.159
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..bounds import MAX_FLOPS, MIN_FLOPS, MIN_SHARE, check_number
from ..errors import CourseInputError, check_count
from ..units import GB, parse_bytes, parse_rate


@dataclass(frozen=True)
class Link:
    """A host<->device (or device<->device) link.

    name: preset name. bytes_per_s: theoretical bandwidth in ONE direction,
    bytes per second. note: where the figure comes from.
    """

    name: str
    bytes_per_s: int
    note: str = ""


LINKS: dict[str, Link] = {
    "pcie-gen4-x16": Link("pcie-gen4-x16", 31_500_000_000,
                          "PCIe 4.0 x16, per direction: 16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s"),
    "pcie-gen5-x16": Link("pcie-gen5-x16", 63_000_000_000,
                          "PCIe 5.0 x16, per direction: 32 GT/s x 16 lanes x 128/130 / 8 = 63.0 GB/s"),
    "nvlink-v100": Link("nvlink-v100", 150_000_000_000, "V100 NVLink: 300 GB/s total, half per direction"),
    "nvlink-a100": Link("nvlink-a100", 300_000_000_000, "A100 NVLink: 600 GB/s total, half per direction"),
    "nvlink-h100": Link("nvlink-h100", 450_000_000_000, "H100 NVLink: 900 GB/s total, half per direction"),
}
DEFAULT_LINK = "pcie-gen4-x16"
#: Share of the theoretical bandwidth a real copy reaches: an assumption (pinned
#: host memory commonly gets 70-90%); measure your own with a copy benchmark.
DEFAULT_EFFICIENCY = 0.8

#: Peak dense tensor-core throughput, FLOP/s, from vendor datasheets (BF16/FP16, no sparsity).
GPU_FLOPS: dict[str, float] = {
    "a100": 312e12,       # A100 BF16 dense
    "h100-sxm": 989e12,   # H100 SXM BF16 dense
    "l4": 121e12,         # L4 BF16 dense (242 with sparsity)
    "rtx-4090": 165e12,   # RTX 4090 FP16 tensor, FP32 accumulate, dense
}
DEFAULT_FLOPS = "a100"
#: Share of peak FLOP/s a prefill achieves (model FLOP utilisation): an assumption;
#: large prefills commonly reach 40-60%.
DEFAULT_MFU = 0.5

#: Device memory (HBM/GDDR) bandwidth, bytes/s, from vendor datasheets: what a
#: decode step reads its weights at when they are NOT offloaded.
HBM_BYTES_PER_S: dict[str, int] = {
    "a100-40gb": 1_555_000_000_000,
    "a100-80gb": 2_039_000_000_000,
    "h100-sxm": 3_350_000_000_000,
    "l4": 300_000_000_000,
    "rtx-4090": 1_008_000_000_000,
}
DEFAULT_HBM = "a100-80gb"


def get_link(link: str | Link | int) -> Link:
    """A :class:`Link` from a preset name, a Link, or a bandwidth such as "25GB" (per second, one direction).

    >>> get_link("pcie-gen5-x16").bytes_per_s
    63000000000
    >>> get_link("25GB").bytes_per_s
    25000000000
    """
    if isinstance(link, Link):
        return link
    if isinstance(link, str) and link.strip().lower() in LINKS:
        return LINKS[link.strip().lower()]
    rate = parse_rate(link, name="link", presets=LINKS, kind="bandwidth", example="25GB")
    return Link(f"{rate / GB:g} GB/s", rate, "given")


def _share(name: str, value: float) -> float:
    """A share of a theoretical rate in [0.001, 1] (bounds.MIN_SHARE: below it every time is absurd or infinite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise CourseInputError(f"{name}={value!r} is not a share in (0, 1]; e.g. 0.8 for 80%")
    return check_number(name, value, MIN_SHARE, 1.0)


def effective_bytes_per_s(link: str | Link | int = DEFAULT_LINK, efficiency: float = DEFAULT_EFFICIENCY) -> float:
    """Bandwidth a real copy gets: theoretical per-direction rate x efficiency.

    >>> effective_bytes_per_s("pcie-gen4-x16", 0.8) / GB       # 31.5 x 0.8
    25.2
    """
    return get_link(link).bytes_per_s * _share("efficiency", efficiency)


def transfer_seconds(num_bytes: int | str, link: str | Link | int = DEFAULT_LINK,
                     efficiency: float = DEFAULT_EFFICIENCY) -> float:
    """Seconds to move ``num_bytes`` one way over ``link``: bytes / (bandwidth x efficiency).

    >>> round(transfer_seconds("1GB", "nvlink-h100", efficiency=1.0) * 1000, 2)   # 1e9 / 450e9 s, in ms
    2.22
    """
    return parse_bytes(num_bytes, name="bytes") / effective_bytes_per_s(link, efficiency)


def swap_seconds(kv_bytes: int | str, link: str | Link | int = DEFAULT_LINK,
                 efficiency: float = DEFAULT_EFFICIENCY) -> float:
    """Seconds to swap a preempted sequence's KV out to the host and back in: two one-way copies.

    The two copies happen at different times (out at preemption, in at
    resumption), so they add up even on a full-duplex link. Per-copy
    overheads are ignored: with small blocks many small copies run well
    below the link's rate, which is one reason vLLM recomputes by default.

    >>> round(swap_seconds(268_435_456, "pcie-gen4-x16"), 4)    # 2 x 268,435,456 / 25.2e9
    0.0213
    """
    return 2 * transfer_seconds(kv_bytes, link, efficiency)


def _flops(flops: str | float) -> float:
    if isinstance(flops, str):
        key = flops.strip().lower()
        if key in GPU_FLOPS:
            return GPU_FLOPS[key]
        try:
            value = float(key)
        except ValueError:
            raise CourseInputError(f"flops={flops!r} is neither a preset ({', '.join(GPU_FLOPS)}) nor a number "
                                   f"of FLOP/s such as 312e12") from None
    else:
        value = float(flops)
    if not value > 0 or value == float("inf"):
        raise CourseInputError(f"flops={flops!r} is not a positive FLOP/s figure; e.g. 312e12 or a100")
    return check_number("flops", value, MIN_FLOPS, MAX_FLOPS)


def prefill_flops(params: int, tokens: int) -> int:
    """FLOPs to prefill ``tokens`` tokens: about 2 x params x tokens (one multiply-add per weight per token).

    The attention-score term (quadratic in tokens) is left out; it is small
    next to the weights for prompts of a few thousand tokens.

    >>> prefill_flops(8_030_261_248, 2048)     # Llama-3-8B, 2,048 tokens: 3.29e13
    32891950071808
    """
    return 2 * check_count("params", params, 1) * check_count("tokens", tokens, 0)


def recompute_seconds(params: int, tokens: int, flops: str | float = DEFAULT_FLOPS, mfu: float = DEFAULT_MFU) -> float:
    """Seconds to rebuild a sequence's KV by prefilling it again: 2 x params x tokens / (peak x mfu).

    >>> round(recompute_seconds(8_030_261_248, 2048, "a100", 0.5), 3)   # 3.29e13 / 156e12
    0.211
    """
    return prefill_flops(params, tokens) / (_flops(flops) * _share("mfu", mfu))


@dataclass(frozen=True)
class SwapVsRecompute:
    """A preempted sequence's two ways back.

    tokens: the sequence's tokens (prompt + generated so far).
    kv_bytes: its KV cache, tokens x kv_bytes_per_token.
    swap_out_s / swap_in_s / swap_s: copy time each way and both together.
    recompute_flops / recompute_s: the prefill that rebuilds the KV instead.
    cheaper: "swap" or "recompute"; ratio: the slower over the faster.
    """

    tokens: int
    kv_bytes: int
    link: str
    efficiency: float
    swap_out_s: float
    swap_in_s: float
    swap_s: float
    recompute_flops: int
    flops_per_s: float
    mfu: float
    recompute_s: float
    cheaper: str
    ratio: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def swap_vs_recompute(tokens: int, kv_bytes_per_token: int, params: int, *, link: str | Link | int = DEFAULT_LINK,
                      efficiency: float = DEFAULT_EFFICIENCY, flops: str | float = DEFAULT_FLOPS,
                      mfu: float = DEFAULT_MFU) -> SwapVsRecompute:
    """Compare swapping a sequence's KV over the link with recomputing it.

    ``params`` is what one token runs through: for a mixture of experts its *active* parameters
    (:func:`course_lib.model.models.active_params`), not its total: Mixtral-8x7B recomputes through
    12.9e9 of its 46.7e9.

    Llama-3.2-3B (114,688 B/token fp16), 2,048 tokens = 234,881,024 B of KV.
    Swap over PCIe Gen4 at 80%: 2 x 0.0093 = 0.0186 s. Recompute at 50% of an
    A100's 312 TFLOP/s: 1.32e13 / 1.56e14 = 0.084 s. Swap wins about 4.5x here.
    Under this linear model both costs grow in proportion to the tokens, so the ratio is the same
    at any length (swap: 2 x kv_bytes_per_token / bandwidth per token; recompute: 2 x params /
    (FLOP/s x MFU) per token); only what it leaves out changes that: a copy's fixed latency (which
    favours recomputing very short sequences) and attention's quadratic FLOPs (which make long ones
    dearer to recompute). Recompute needs no host memory and no copy engine.

    vLLM's V1 engine preempts by recomputation only ("Preempted requests are recomputed"); swapping
    KV to the host was a V0 preemption mode and went with it. What V1 keeps in host memory is
    prefix-cache blocks (``--kv-offloading-size``, in GiB despite its name, like ``--cpu-offload-gb``).

    >>> r = swap_vs_recompute(2048, 114_688, 3_212_749_824)
    >>> r.kv_bytes, r.cheaper, round(r.ratio, 1)
    (234881024, 'swap', 4.5)
    """
    n = check_count("tokens", tokens, 1)
    kv = n * check_count("kv_bytes_per_token", kv_bytes_per_token, 1)
    one_way = transfer_seconds(kv, link, efficiency)
    rec = recompute_seconds(params, n, flops, mfu)
    swap = 2 * one_way
    cheaper = "swap" if swap <= rec else "recompute"
    ratio = (max(swap, rec) / min(swap, rec)) if min(swap, rec) > 0 else 1.0
    return SwapVsRecompute(n, kv, get_link(link).name, efficiency, one_way, one_way, swap,
                           prefill_flops(params, n), _flops(flops), mfu, rec, cheaper, ratio)


@dataclass(frozen=True)
class WeightOffload:
    """Weights kept in host memory and streamed to the device at every decode step.

    offloaded_bytes: weights moved off the device (device memory freed).
    added_step_s: time added to EVERY decode step to stream them back in.
    added_step_s_ideal: the same at 100% efficiency.
    on_device_step_s: time to read the same bytes from device memory (HBM),
        what the step spends on them when they are not offloaded.
    slowdown: added_step_s / on_device_step_s.
    kv_tokens_freed: KV tokens the freed bytes could hold instead (if a model is given).
    """

    offloaded_bytes: int
    link: str
    link_bytes_per_s: int
    efficiency: float
    added_step_s: float
    added_step_s_ideal: float
    hbm: str
    hbm_bytes_per_s: int
    on_device_step_s: float
    slowdown: float
    kv_bytes_per_token: int | None
    kv_tokens_freed: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def offload_weights(offloaded_bytes: int | str, *, link: str | Link | int = DEFAULT_LINK,
                    efficiency: float = DEFAULT_EFFICIENCY, hbm: str = DEFAULT_HBM,
                    kv_bytes_per_token: int | None = None) -> WeightOffload:
    """What streaming ``offloaded_bytes`` of weights each decode step costs, and what it frees.

    A decode step must read every weight once. Offloaded weights come over
    the link instead of from device memory, with no overlap assumed (the
    best overlap hides only as much as the step's own compute time).

    >>> w = offload_weights("4GB", kv_bytes_per_token=114_688)
    >>> round(w.added_step_s_ideal, 3), round(w.added_step_s, 3), w.kv_tokens_freed
    (0.127, 0.159, 34877)
    """
    size = parse_bytes(offloaded_bytes, name="offloaded_bytes")
    ln = get_link(link)
    key = hbm.strip().lower()
    if key not in HBM_BYTES_PER_S:
        raise CourseInputError(f"hbm={hbm!r} is not a preset; use one of {', '.join(HBM_BYTES_PER_S)}")
    added = transfer_seconds(size, ln, efficiency)
    on_device = size / HBM_BYTES_PER_S[key]
    per_token = None if kv_bytes_per_token is None else check_count("kv_bytes_per_token", kv_bytes_per_token, 1)
    return WeightOffload(size, ln.name, ln.bytes_per_s, efficiency, added, size / ln.bytes_per_s, key,
                         HBM_BYTES_PER_S[key], on_device, added / on_device if on_device else 0.0,
                         per_token, None if per_token is None else size // per_token)

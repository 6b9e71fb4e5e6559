"""Measurement against prediction: hold course_lib's budget against real numbers.

For one model and one workload (``sequences`` x ``context_tokens``) we predict
three pools with course_lib's formulas, then measure them in a fresh process
(:mod:`course_lib.measure.worker`) on the machine in front of you:

=========  ==============================================  ================================================
pool       predicted by                                    measured as
=========  ==============================================  ================================================
weights    ``weight_bytes(spec, dtype)``                   growth over the baseline when the model is built
kv_cache   ``sequences x kv_cache_bytes_per_sequence``     growth when the cache is ``torch.zeros``-ed
workspace  ``activation_peak_bytes(spec, tokens/step)``    peak over the level before prefill, during it
=========  ==============================================  ================================================

"Measured" is what the OS (CPU: resident pages, VmRSS / VmHWM) or torch's
CUDA allocator (GPU: ``memory_allocated`` / ``max_memory_allocated``) reports;
the prediction never enters the measuring process.

The error is ``(predicted - measured) / measured``: -2% means the prediction
is 2% short of what the machine used. Worked example:

>>> PoolComparison("weights", predicted_bytes=980_000_000, measured_bytes=1_000_000_000).error_pct
-2.0

On Linux, glibc's malloc keeps freed chunks of up to 32 MiB for reuse, so a
process's RSS can stay far above its live tensors (the CPU twin of
"reserved - allocated" on a GPU). By default the worker runs with
``MALLOC_MMAP_THRESHOLD_=131072``: every allocation of 128 KiB or more gets its
own pages and gives them back when freed, so RSS follows live tensors.
``malloc="default"`` measures with the unmodified allocator instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..serving.budget import activation_peak_bytes
from ..dtypes import get_dtype
from ..errors import CourseInputError, check_count
from ..model.models import ModelSpec, kv_cache_bytes_per_sequence, weight_bytes
from ..units import GB, MB
from .device import resolve_device, threads_default
from .tiny_model import TORCH_DTYPES, architecture

POOLS = ("weights", "kv_cache", "workspace")
#: glibc: allocations of at least this many bytes get their own mmap and go back to the OS when freed.
MMAP_THRESHOLD_BYTES = 128 * 1024
MALLOC_MODES = ("mmap", "default")
REPO_ROOT = Path(__file__).resolve().parents[2]

MEASURED_HOW = {
    "cpu": "growth of the process's resident memory (RSS, peak = VmHWM) over a baseline taken after "
           "imports, in a fresh process",
    "cuda": "growth of torch.cuda.memory_allocated (peak = max_memory_allocated) over a baseline taken "
            "after CUDA init, in a fresh process",
}


@dataclass(frozen=True)
class PoolComparison:
    """One pool: what course_lib predicted and what the machine used.

    predicted_bytes: course_lib's formula. measured_bytes: from the OS or the allocator.
    note: how the prediction was made, in words.
    """

    name: str
    predicted_bytes: int
    measured_bytes: int
    note: str = ""

    @property
    def error_pct(self) -> float:
        """(predicted - measured) / measured x 100; nan when nothing was measured."""
        if self.measured_bytes <= 0:
            return float("nan")
        return round((self.predicted_bytes - self.measured_bytes) / self.measured_bytes * 100, 4)

    def to_dict(self) -> dict[str, Any]:
        error = self.error_pct
        return {"predicted_bytes": self.predicted_bytes, "measured_bytes": self.measured_bytes,
                "error_pct": None if error != error else error,     # JSON has no NaN: null when nothing was measured
                "predicted_how": self.note}


@dataclass(frozen=True)
class MeasureResult:
    """Predicted vs measured pools for one run; ``.table()`` prints them.

    device: "cpu" or "cuda:N"; device_name: the CPU or GPU model.
    pools: weights, kv_cache, workspace (in that order).
    total: the sum of the predictions vs the peak the process reached over its
        baseline (CPU: peak RSS; GPU: ``max_memory_reserved``, i.e. torch's whole pool).
    runtime_bytes: memory in use before any model: CPU RSS after importing
        torch; GPU the non-torch bytes (CUDA context, libraries, other processes).
    settings: the workload (sequences, tokens, dtypes, threads, allocator).
    details: every raw figure the measuring process reported.
    """

    model: str
    device: str
    device_name: str
    pools: tuple[PoolComparison, ...]
    total: PoolComparison
    runtime_bytes: int
    settings: dict[str, Any]
    snapshot: dict[str, Any]
    details: dict[str, Any] = field(default_factory=dict)

    def pool(self, name: str) -> PoolComparison:
        for p in self.pools:
            if p.name == name:
                return p
        raise CourseInputError(f"pool={name!r} is not measured; use one of {', '.join(POOLS)}")

    def table(self) -> str:
        s = self.settings
        lines = [
            f"{self.model} on {self.device} ({self.device_name}), weights {s['dtype']}, KV cache {s['kv_dtype']}, "
            f"{s['threads']} thread(s)",
            f"{s['sequences']} sequences x {s['context_tokens']} tokens ({s['prompt_tokens']} prompt + "
            f"{s['decode_tokens']} decode); " + (f"prefill {s['prefill_tokens_per_step']:,} tokens per step"
                                                 if s["run_prefill"] else "no prefill run (weights and KV cache only)"),
            "",
        ]
        head = f"{'pool':<10} {'predicted bytes':>16} {'MB':>10} {'measured bytes':>16} {'MB':>10} {'error':>8}"
        lines += [head, "-" * len(head)]
        for p in (*self.pools, self.total):
            if p is self.total:
                lines.append("-" * len(head))
            err = "n/a" if p.error_pct != p.error_pct else f"{p.error_pct:+.2f}%"
            lines.append(f"{p.name:<10} {p.predicted_bytes:>16,} {p.predicted_bytes / MB:>10.2f} "
                         f"{p.measured_bytes:>16,} {p.measured_bytes / MB:>10.2f} {err:>8}")
        lines.append("(MB = 10^6 bytes; error = (predicted - measured) / measured)")
        kind = "cuda" if self.device.startswith("cuda") else "cpu"
        lines.append(f"measured as: {MEASURED_HOW[kind]}")
        if kind == "cpu":
            lines.append(f"allocator: {s['malloc']}; runtime before any model (python + torch): "
                         f"{self.runtime_bytes / MB:,.1f} MB RSS, not in any pool")
            kept = (f"; after prefill the process kept {self.details['after_prefill_retained_bytes'] / MB:,.1f} MB "
                    f"it no longer used" if "after_prefill_retained_bytes" in self.details else "")
            lines.append(f"total measured = peak RSS over the baseline{kept}")
        else:
            lines.append(f"total measured = torch.cuda.max_memory_reserved ({self.details.get('max_memory_reserved_bytes', 0) / GB:.3f} GB); "
                         f"outside torch (CUDA context, libraries, other processes): {self.runtime_bytes / MB:,.1f} MB, "
                         f"not in any pool")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``course-memory measure --json`` (without load time and bandwidth)."""
        return {
            "model": self.model,
            "device": self.device,
            "device_name": self.device_name,
            "pools": {p.name: p.to_dict() for p in self.pools},
            "total": self.total.to_dict(),
            "runtime_bytes": self.runtime_bytes,
            "settings": dict(self.settings),
            "snapshot": self.snapshot,
            "details": dict(self.details),
        }


# ---------------------------------------------------------------- prediction

def predict_pools(spec: ModelSpec, sequences: int, context_tokens: int, dtype: str, kv_dtype: str,
                  prefill_tokens_per_step: int) -> dict[str, tuple[int, str]]:
    """course_lib's prediction of each pool: ``{name: (bytes, how)}``. No torch, no measuring.

    >>> from course_lib.model.presets import get_model
    >>> pred = predict_pools(get_model("course-tiny"), 4, 2048, "fp32", "fp32", 8184)
    >>> pred["kv_cache"][0]       # 4 x 2048 tokens x (2 x 16 layers x 4 heads x 64 x 4 B)
    268435456
    """
    weights = weight_bytes(spec, dtype)
    kv = sequences * kv_cache_bytes_per_sequence(spec, context_tokens, kv_dtype)
    workspace = activation_peak_bytes(spec, prefill_tokens_per_step, dtype)
    return {
        "weights": (weights, f"weight_bytes: {spec.params_total:,} params x {get_dtype(dtype).bytes_per_value} B"),
        "kv_cache": (kv, f"{sequences} x kv_cache_bytes_per_sequence({context_tokens} tokens, {get_dtype(kv_dtype).name})"),
        "workspace": (workspace, f"activation_peak_bytes({prefill_tokens_per_step:,} prefill tokens per step, "
                                 f"{get_dtype(dtype).name})"),
    }


# ---------------------------------------------------------------- the runner

def worker_env(threads: int, malloc: str = "mmap") -> dict[str, str]:
    """Environment of a measuring process: this repo importable, threads and allocator pinned."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["OMP_NUM_THREADS"] = str(threads)
    if malloc == "mmap":
        env["MALLOC_MMAP_THRESHOLD_"] = str(MMAP_THRESHOLD_BYTES)
    else:
        env.pop("MALLOC_MMAP_THRESHOLD_", None)
    return env


def run_worker(request: dict[str, Any], *, steps: tuple[str, ...], desc: str, progress: bool = True,
               malloc: str = "mmap") -> tuple[int, dict[str, Any]]:
    """Run one measuring process; returns (exit code, its JSON result).

    Progress lines from the worker move a tqdm bar on stderr (``progress=False``
    keeps quiet). A crash raises RuntimeError with the worker's last words; a
    process killed by the OS (out of memory) raises CourseInputError.
    """
    from tqdm.auto import tqdm   # a bar widget in a notebook, text on a terminal

    from .worker import PROGRESS, REFUSED_EXIT   # here, not at the top: `python -m ...worker` must not import itself first

    with tempfile.TemporaryDirectory(prefix="course-measure-") as tmp:
        req_path, res_path = os.path.join(tmp, "request.json"), os.path.join(tmp, "result.json")
        with open(req_path, "w", encoding="utf-8") as fh:
            json.dump(request, fh)
        cmd = [sys.executable, "-m", "course_lib.measure.worker", req_path, res_path]
        bar = tqdm(total=len(steps), desc=desc, file=sys.stderr, disable=not progress, leave=False,
                   bar_format="{desc} {bar} {n_fmt}/{total_fmt} [{elapsed}]")
        other: list[str] = []
        current = None
        with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=worker_env(int(request.get("threads") or 1), malloc)) as proc:
            assert proc.stderr is not None
            for line in proc.stderr:
                if not line.startswith(PROGRESS):
                    other.append(line)
                    continue
                step = json.loads(line[len(PROGRESS):]).get("step", "")
                if step in steps or step == "done":
                    if current is not None:
                        bar.update(1)          # the step before this one is finished
                    current = step
                    bar.set_description_str(f"{desc}: {step}")
            rc = proc.wait()
        bar.close()
        if rc in (-9, 137):
            raise CourseInputError(
                "the measuring process was killed by the OS (signal 9), most likely out of memory; "
                "use fewer --sequences or --context-tokens, or a smaller model")
        if rc not in (0, REFUSED_EXIT) or not os.path.exists(res_path):
            tail = "".join(other[-20:])
            raise RuntimeError(f"the measuring process failed (exit {rc}):\n{tail}")
        with open(res_path, encoding="utf-8") as fh:
            return rc, json.load(fh)


def resolve_spec(model: ModelSpec | str) -> ModelSpec:
    """A spec, or a preset name such as "course-tiny"."""
    if isinstance(model, ModelSpec):
        return model
    from ..model.presets import get_model

    return get_model(model)


def default_dtype(device: str) -> str:
    """fp32 on the CPU (its fastest kernels everywhere), bf16 on a GPU (as served)."""
    return "fp32" if device == "cpu" else "bf16"


def _checked_dtype(name: str) -> str:
    canonical = get_dtype(name).name
    if canonical not in TORCH_DTYPES:
        raise CourseInputError(f"dtype={name!r} cannot be measured: the model computes in fp32, fp16 or bf16; use one of those")
    return canonical


def measure_pools(model: ModelSpec | str, sequences: int = 4, context_tokens: int = 2048, device: str = "auto", *,
                  dtype: str | None = None, kv_dtype: str | None = None, decode_tokens: int = 2,
                  prefill_chunk_tokens: int | None = None, threads: int | None = None, malloc: str = "mmap",
                  run_prefill: bool = True, progress: bool = True, seed: int = 0,
                  extra_bytes: int = 0) -> MeasureResult:
    """Measure weights, KV cache and prefill workspace, and compare each with course_lib.

    ``sequences`` x ``context_tokens`` is the preallocated KV cache; prefill
    fills ``context_tokens - decode_tokens`` of each, then ``decode_tokens``
    decode steps fill the rest. ``prefill_chunk_tokens`` limits positions per
    prefill step (all at once by default). ``extra_bytes`` allocates one more
    buffer of that size beside the weights (used to show that measurement is real).

    >>> r = measure_pools("course-tiny", 4, 2048, "cpu")       # doctest: +SKIP
    >>> print(r.table())                                         # doctest: +SKIP
    """
    spec = resolve_spec(model)
    arch = architecture(spec)
    S = check_count("sequences", sequences, 1)
    D = check_count("decode_tokens", decode_tokens, 0)
    T = check_count("context_tokens", context_tokens, 1)
    if T <= D:
        raise CourseInputError(f"context_tokens={T} leaves no prompt before {D} decode tokens; "
                               f"use --context-tokens {D + 1} or more, or fewer --decode-tokens")
    prompt = T - D
    chunk = prompt if prefill_chunk_tokens is None else min(check_count("prefill_chunk_tokens", prefill_chunk_tokens, 1), prompt)
    for layer in spec.layers:
        if layer.window is not None and layer.window < T:
            raise CourseInputError(
                f"context_tokens={T} is past {spec.name}'s sliding window of {layer.window}; the measured model "
                f"keeps every token, so use --context-tokens {layer.window} or less")
    if malloc not in MALLOC_MODES:
        raise CourseInputError(f"malloc={malloc!r} is not a mode; use mmap or default")
    dev = resolve_device(device)
    dtype = _checked_dtype(dtype or default_dtype(dev))
    kv_dtype = _checked_dtype(kv_dtype or dtype)
    threads = check_count("threads", threads, 1) if threads is not None else threads_default()
    extra = check_count("extra_bytes", extra_bytes, 0)

    predicted = predict_pools(spec, S, T, dtype, kv_dtype, S * chunk)
    needed = sum(b for b, _ in predicted.values()) + extra
    request = {
        "task": "pools", "arch": arch.to_dict(), "device": dev, "dtype": dtype, "kv_dtype": kv_dtype,
        "sequences": S, "context_tokens": T, "decode_tokens": D, "prefill_chunk_tokens": prefill_chunk_tokens,
        "threads": threads, "seed": seed, "run_prefill": bool(run_prefill), "extra_bytes": extra,
        "needed_bytes": needed,
    }
    def refuse(available: int) -> CourseInputError:
        return CourseInputError(
            f"measuring {spec.name} with {S} sequences x {T} tokens needs about {needed / GB:.2f} GB "
            f"(weights + KV cache + workspace) but the {dev} has {available / GB:.2f} GB available "
            f"(90% of it is the limit); use fewer --sequences or --context-tokens, --prefill-chunk-tokens, "
            f"a smaller --dtype, or a smaller model")

    if dev == "cpu":                      # admission control before we start: no process to spawn
        from .device import available_bytes

        if needed > 0.9 * available_bytes():
            raise refuse(available_bytes())
    steps = ("warm-up", "weights", "kv_cache", "warm-up request", "prefill", "decode") if run_prefill else ("warm-up", "weights", "kv_cache")
    rc, out = run_worker(request, steps=steps, desc=f"measure {spec.name} on {dev}", progress=progress, malloc=malloc)
    if out.get("refused"):
        raise refuse(int(out["available_bytes"]))

    cuda = dev == "cuda"
    pools = []
    for name in POOLS:
        if name == "workspace" and not run_prefill:
            continue
        pools.append(PoolComparison(name, predicted[name][0], int(out[f"{name}_bytes"]), predicted[name][1]))
    total_pred = sum(p.predicted_bytes for p in pools)
    total = PoolComparison("total", total_pred, int(out["peak_total_bytes"]),
                           "weights + kv_cache + workspace" if run_prefill else "weights + kv_cache")
    snap = out["snapshot"]
    if cuda:
        runtime = int(snap["non_torch_bytes"])
        device_label, device_name = snap["device"], snap["device_name"]
    else:
        runtime = int(out["baseline_bytes"])
        device_label, device_name = "cpu", _cpu_name()
    settings = {
        "sequences": S, "context_tokens": T, "prompt_tokens": prompt, "decode_tokens": D,
        "prefill_chunk_tokens": chunk, "prefill_tokens_per_step": S * chunk, "dtype": dtype, "kv_dtype": kv_dtype,
        "threads": threads, "malloc": ("glibc, fixed mmap threshold "
                                       f"{MMAP_THRESHOLD_BYTES // 1024} KiB (MALLOC_MMAP_THRESHOLD_)"
                                       if malloc == "mmap" else "glibc default (keeps freed chunks for reuse)") if not cuda else "torch CUDA caching allocator",
        "run_prefill": bool(run_prefill), "extra_bytes": extra,
    }
    details = {k: v for k, v in out.items() if k not in ("snapshot", "baseline_snapshot", "refused")}
    return MeasureResult(spec.name, device_label, device_name, tuple(pools), total, runtime, settings, snap, details)


def _cpu_name() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), else platform.processor()."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "cpu"

"""The measuring process: ``python -m course_lib.measure.worker REQUEST.json RESULT.json``.

Run fresh for every measurement, so the numbers belong to this run alone:
nothing allocated earlier, nothing cached by the allocator, no peak left over.
It knows nothing of course_lib's predictions; it allocates, runs and reads
what the operating system (CPU) or torch's CUDA allocator (GPU) reports:

1. import torch, run a throwaway micro model once (thread pools, kernels, the
   CUDA context get created now, not inside a measured phase);
2. baseline: RSS (CPU) or ``memory_allocated`` (GPU);
3. weights: build the model with random weights -> growth over the baseline;
4. KV cache: ``torch.zeros`` the preallocated cache -> growth;
5. prefill: reset the peak, run the prompts -> peak over the level before;
6. decode: a few steps, the same way.

Progress goes to stderr as lines ``@@progress {"step": ...}``; the result is
written as JSON to RESULT.json. Exit code 3 means "refused: not enough memory".
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from typing import Any

PROGRESS = "@@progress "
REFUSED_EXIT = 3


def progress(step: str, **detail: Any) -> None:
    sys.stderr.write(PROGRESS + json.dumps({"step": step, **detail}) + "\n")
    sys.stderr.flush()


class _Meter:
    """Reads memory the same way on every phase: OS pages on CPU, the allocator on CUDA."""

    def __init__(self, device: str):
        import torch

        self.torch = torch
        self.cuda = device == "cuda"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def level(self) -> int:
        """Bytes in use now: RSS, or torch's allocated bytes on the GPU."""
        self.sync()
        if self.cuda:
            return int(self.torch.cuda.memory_allocated())
        from .device import rss_bytes

        return rss_bytes()

    def reset_peak(self) -> None:
        gc.collect()
        self.sync()
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats()
        else:
            from .device import reset_peak_rss

            reset_peak_rss()

    def peak(self) -> int:
        self.sync()
        if self.cuda:
            return int(self.torch.cuda.max_memory_allocated())
        from .device import peak_rss_bytes

        return peak_rss_bytes()

    def reserved_peak(self) -> int:
        """Peak of what the process holds: max_memory_reserved (GPU) or peak RSS (CPU)."""
        if self.cuda:
            return int(self.torch.cuda.max_memory_reserved())
        return self.peak()

    def snapshot(self) -> dict[str, Any]:
        from .device import cpu_snapshot, cuda_snapshot

        return (cuda_snapshot() if self.cuda else cpu_snapshot()).to_dict()

    def available(self) -> int:
        if self.cuda:
            return int(self.torch.cuda.mem_get_info()[0])
        from .device import available_bytes

        return available_bytes()


def _setup(req: dict[str, Any]):
    import torch

    threads = int(req.get("threads") or 1)
    torch.set_num_threads(threads)
    torch.manual_seed(int(req.get("seed", 0)))
    return torch


def _warm_up(torch, device: str, dtype: str) -> None:
    """A throwaway micro model: creates thread pools, kernels and the CUDA context."""
    from .tiny_model import Architecture, KVCache, TinyDecoder

    micro = Architecture(name="warm-up", hidden_size=64, num_layers=1, num_heads=4, num_kv_heads=2,
                         head_dim=16, intermediate_size=128, vocab_size=64)
    model = TinyDecoder.random(micro, dtype, device)
    cache = KVCache(micro, 2, 16, dtype, device)
    ids = torch.randint(64, (2, 16), device=device)
    model.prefill(ids[:, :12], cache, chunk_tokens=8)
    for pos in range(12, 16):
        model.decode(ids[:, pos:pos + 1], cache, pos)
    del model, cache, ids
    gc.collect()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def measure_pools(req: dict[str, Any]) -> dict[str, Any]:
    """Steps 1-6 of the module docstring; every figure an int of bytes."""
    torch = _setup(req)
    from .tiny_model import Architecture, KVCache, TinyDecoder

    device, dtype, kv_dtype = req["device"], req["dtype"], req["kv_dtype"]
    arch = Architecture(**req["arch"])
    S, T, D = int(req["sequences"]), int(req["context_tokens"]), int(req["decode_tokens"])
    prompt = T - D
    meter = _Meter(device)

    progress("warm-up", detail="micro model: thread pools, kernels" + (", CUDA context" if meter.cuda else ""))
    _warm_up(torch, device, dtype)
    needed, available = int(req.get("needed_bytes", 0)), meter.available()
    if needed and needed > 0.9 * available:
        return {"refused": True, "needed_bytes": needed, "available_bytes": available, "device": device}

    out: dict[str, Any] = {"refused": False, "device": device}
    meter.reset_peak()
    baseline = meter.level()
    out["baseline_bytes"] = baseline
    out["baseline_snapshot"] = meter.snapshot()
    top = meter.reserved_peak()

    progress("weights", detail=f"{arch.params_total:,} parameters, {dtype}")
    model = TinyDecoder.random(arch, dtype, device, seed=int(req.get("seed", 0)))
    extra = None
    if int(req.get("extra_bytes", 0)):        # for the test that measurements are real
        extra = torch.ones(int(req["extra_bytes"]), dtype=torch.uint8, device=device)
    after_weights = meter.level()
    out["weights_bytes"] = after_weights - baseline
    out["weights_peak_bytes"] = meter.peak() - baseline
    out["weights_tensor_bytes"] = model.nbytes          # tensor arithmetic, for comparison only
    top = max(top, meter.reserved_peak())

    progress("kv_cache", detail=f"{S} sequences x {T} tokens, {kv_dtype}")
    meter.reset_peak()
    before = meter.level()
    cache = KVCache(arch, S, T, kv_dtype, device)
    after_kv = meter.level()
    out["kv_cache_bytes"] = after_kv - before
    out["kv_cache_tensor_bytes"] = cache.nbytes
    top = max(top, meter.reserved_peak())

    gen = torch.Generator().manual_seed(int(req.get("seed", 0)) + 1)
    ids = torch.randint(arch.vocab_size, (S, T), generator=gen).to(device)
    if req.get("run_prefill", True):
        # As a server does before taking traffic: one short request on the real weights, so the math
        # libraries' one-time buffers for these shapes are not counted as prefill workspace.
        progress("warm-up request", detail="1 sequence x 16 tokens")
        meter.reset_peak()
        before = meter.level()
        w = max(1, min(16, T - 1))
        warm_cache = KVCache(arch, 1, w + 1, kv_dtype, device)
        model.prefill(ids[:1, :w], warm_cache)
        if w < T:
            model.decode(ids[:1, w:w + 1], warm_cache, w)
        del warm_cache
        out["warm_up_request_retained_bytes"] = meter.level() - before
        top = max(top, meter.reserved_peak())

        progress("prefill", detail=f"{S} x {prompt} prompt tokens")
        meter.reset_peak()
        before = meter.level()
        started = time.perf_counter()
        logits = model.prefill(ids[:, :prompt], cache, chunk_tokens=req.get("prefill_chunk_tokens"))
        meter.sync()
        out["prefill_seconds"] = time.perf_counter() - started
        out["workspace_bytes"] = meter.peak() - before
        out["after_prefill_retained_bytes"] = meter.level() - before
        top = max(top, meter.reserved_peak())

        progress("decode", detail=f"{D} steps x {S} sequences")
        meter.reset_peak()
        before = meter.level()
        started = time.perf_counter()
        for pos in range(prompt, T):
            logits = model.decode(ids[:, pos:pos + 1], cache, pos)
        meter.sync()
        out["decode_seconds"] = time.perf_counter() - started
        out["decode_peak_bytes"] = meter.peak() - before
        top = max(top, meter.reserved_peak())
        out["logits_finite"] = bool(torch.isfinite(logits.float()).all())
    out["peak_total_bytes"] = top - (baseline if not meter.cuda else 0)
    if meter.cuda:
        out["max_memory_reserved_bytes"] = top
    out["snapshot"] = meter.snapshot()
    del model, cache, extra
    return out


def measure_load(req: dict[str, Any]) -> dict[str, Any]:
    """Save the model with safetensors, then time each readiness phase in this fresh process."""
    import tempfile

    torch = _setup(req)
    from safetensors.torch import load_file, save_file

    from .tiny_model import Architecture, KVCache, TinyDecoder

    device, dtype = req["device"], req["dtype"]
    arch = Architecture(**req["arch"])
    out: dict[str, Any] = {"device": device}

    def timed(fn):
        started = time.perf_counter()
        result = fn()
        if device == "cuda":
            torch.cuda.synchronize()
        return result, time.perf_counter() - started

    progress("device_init")
    if device == "cuda":
        _, out["device_init_seconds"] = timed(lambda: torch.zeros(1, device="cuda"))
    else:
        out["device_init_seconds"] = 0.0

    progress("save", detail="random weights -> safetensors file")
    with tempfile.TemporaryDirectory(dir=req.get("tmp_dir")) as tmp:
        path = os.path.join(tmp, "model.safetensors")
        model = TinyDecoder.random(arch, dtype, "cpu")
        save_file(model.weights, path)
        del model
        gc.collect()
        out["file_bytes"] = os.path.getsize(path)
        out["page_cache_dropped"] = _drop_from_page_cache(path)

        progress("read_weights")
        weights, out["read_weights_seconds"] = timed(lambda: load_file(path, device="cpu"))
    progress("host_to_device")
    model, out["host_to_device_seconds"] = timed(lambda: TinyDecoder(arch, weights).to(device))
    del weights
    out["compile_seconds"] = 0.0

    progress("warm_up", detail="first prefill + decode step")
    ids = torch.randint(arch.vocab_size, (1, 17), device=device)

    def forward_once():
        cache = KVCache(arch, 1, 17, dtype, device)
        model.prefill(ids[:, :16], cache)
        return model.decode(ids[:, 16:17], cache, 16)

    _, out["warm_up_seconds"] = timed(forward_once)
    _, out["steady_forward_seconds"] = timed(forward_once)
    return out


def _drop_from_page_cache(path: str) -> bool:
    """Ask the OS to forget the file's cached pages, so the read comes from disk (best effort)."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        return True
    except (AttributeError, OSError):
        return False


TASKS = {"pools": measure_pools, "load": measure_load}


def main(argv: list[str]) -> int:
    request_path, result_path = argv
    with open(request_path, encoding="utf-8") as fh:
        req = json.load(fh)
    result = TASKS[req["task"]](req)
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    progress("done")
    return REFUSED_EXIT if result.get("refused") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

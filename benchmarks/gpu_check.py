"""The whole measurement set on a CUDA GPU, in under 5 minutes, into one JSON file.

    python benchmarks/gpu_check.py [OUT.json]          # default: gpu_check.json

Needs only torch (a CUDA build) and this repository: no network, no downloads
(models are built from preset shapes with random weights). It runs, each
measurement in a fresh process:

1. pools: course-tiny (bf16) at 16 x 4096 tokens, and at 32 x 4096 (KV doubling);
   llama-3-8b (bf16) at 8 x 4096 tokens when the GPU has 40 GB or more;
2. the readiness timeline of course-tiny (device init, read, host->device, warm-up);
3. host<->device bandwidth, pinned and pageable (1 GiB copies);
4. a snapshot of the GPU (free, reserved, allocated, outside-torch bytes).

Targets (issue #4) checked and written into the JSON:
  - predicted total (weights + KV cache + workspace) within +-3% of torch.cuda.max_memory_reserved;
  - the non-torch overhead (CUDA context, libraries) reported separately;
  - doubling the sequences doubles the measured KV cache within +-5%.

Without a CUDA GPU it says so, runs a small CPU fallback (so the script and its
JSON shape can be checked anywhere) and exits 0 with ``"cuda": false``.
"""

from __future__ import annotations

import json
import platform
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BUDGET_SECONDS = 270           # stop starting optional runs after this, to finish within 5 minutes
TARGET_TOTAL_PCT = 3.0
TARGET_DOUBLING_PCT = 5.0


def log(message: str) -> None:
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {message}", flush=True)


def pools_entry(result) -> dict:
    data = result.to_dict()
    reserved = result.details.get("max_memory_reserved_bytes")
    if reserved:
        err = (result.total.predicted_bytes - reserved) / reserved * 100
        data["target_total_vs_max_reserved"] = {
            "predicted_total_bytes": result.total.predicted_bytes, "max_memory_reserved_bytes": reserved,
            "error_pct": round(err, 3), "pass": abs(err) <= TARGET_TOTAL_PCT,
            "non_torch_bytes": result.runtime_bytes}
    return data


def run_cuda(out: dict, started: float) -> None:
    import torch

    from course_lib.errors import CourseInputError
    from course_lib.measure import measure_bandwidth, measure_load_time, measure_pools, snapshot
    from course_lib.units import GB, GiB

    props = torch.cuda.get_device_properties(0)
    out["gpu"] = {"name": props.name, "total_bytes": int(props.total_memory),
                  "capability": f"{props.major}.{props.minor}", "count": torch.cuda.device_count()}
    log(f"GPU: {props.name}, {props.total_memory / GB:.1f} GB, torch {torch.__version__}, CUDA {torch.version.cuda}")

    plan = [("course-tiny-16x4096", "course-tiny", 16, 4096, True),
            ("course-tiny-32x4096-kv-doubling", "course-tiny", 32, 4096, False)]
    if props.total_memory >= 40 * GB:
        plan.append(("llama-3-8b-8x4096", "llama-3-8b", 8, 4096, True))
    out["pools"] = {}
    for label, model, sequences, context, prefill in plan:
        if time.perf_counter() - started > BUDGET_SECONDS:
            out["pools"][label] = {"skipped": "time budget"}
            continue
        log(f"pools: {label}")
        try:
            result = measure_pools(model, sequences, context, "cuda", run_prefill=prefill, progress=False)
            out["pools"][label] = pools_entry(result)
            log(result.table())
        except CourseInputError as exc:
            out["pools"][label] = {"refused": str(exc)}
            log(f"refused: {exc}")
        except Exception as exc:  # keep going: one failed run should not lose the others
            out["pools"][label] = {"error": repr(exc), "traceback": traceback.format_exc()}
            log(f"error: {exc!r}")

    a = out["pools"].get("course-tiny-16x4096", {}).get("pools", {}).get("kv_cache")
    b = out["pools"].get("course-tiny-32x4096-kv-doubling", {}).get("pools", {}).get("kv_cache")
    if a and b:
        ratio = b["measured_bytes"] / a["measured_bytes"]
        out["target_kv_doubling"] = {"ratio": round(ratio, 5),
                                     "pass": abs(ratio / 2 - 1) * 100 <= TARGET_DOUBLING_PCT}

    log("readiness timeline: course-tiny")
    try:
        timeline = measure_load_time("course-tiny", "cuda", progress=False)
        out["load_time"] = timeline.to_dict()
        log(timeline.table())
    except Exception as exc:
        out["load_time"] = {"error": repr(exc)}

    log("bandwidth: 1 GiB copies")
    bw = measure_bandwidth("cuda", size_bytes=GiB)
    out["bandwidth"] = bw.to_dict()
    log(bw.describe())
    snap = snapshot("cuda")
    out["snapshot"] = snap.to_dict()
    log(snap.describe())


def run_cpu_fallback(out: dict) -> None:
    from course_lib.measure import measure_bandwidth, measure_pools, snapshot

    result = measure_pools("course-tiny", 2, 512, "cpu", progress=False)
    out["cpu_fallback"] = {"pools": pools_entry(result), "bandwidth": measure_bandwidth("cpu").to_dict(),
                           "snapshot": snapshot("cpu").to_dict()}
    log(result.table())


def main(argv: list[str]) -> int:
    target = Path(argv[0] if argv else "gpu_check.json")
    started = time.perf_counter()
    try:
        import torch
    except ImportError:
        print("gpu_check: torch is not installed; install a CUDA build of torch first", file=sys.stderr)
        return 2
    out: dict = {"torch": torch.__version__, "cuda_build": torch.version.cuda, "python": platform.python_version(),
                 "host": platform.node(), "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                 "cuda": bool(torch.cuda.is_available())}
    if out["cuda"]:
        run_cuda(out, started)
    else:
        log(f"no CUDA GPU visible to torch {torch.__version__} (CUDA build: {torch.version.cuda}); "
            f"running the small CPU fallback only. The GPU targets need a machine with an NVIDIA GPU.")
        run_cpu_fallback(out)
    out["seconds"] = round(time.perf_counter() - started, 1)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=2), encoding="utf-8")
    log(f"wrote {target} after {out['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

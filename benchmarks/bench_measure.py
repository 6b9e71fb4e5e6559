"""CPU accuracy benchmark for course_lib.measure: predicted vs measured at 200 MB+ per pool.

    .venv/bin/python benchmarks/bench_measure.py [--json-out out/bench_measure.json] [--malloc-default]

Targets (issue #4), on the CPU, every pool at least 200 MB:
  - weights and KV cache predicted within +-3% of measured;
  - doubling the sequence count doubles the measured KV cache within +-5%.

Runs (course-tiny, fp32, 2 threads; each in a fresh process):
  A: 4 sequences x 2048 tokens, full prefill + decode   (weights 984 MB, KV 268 MB, workspace 344 MB)
  B: 8 sequences x 2048 tokens, no prefill              (KV 537 MB: the doubling check)
  C: (--malloc-default) run A with glibc's malloc as is, to show what a caching allocator keeps
Then the readiness timeline of course-tiny. Takes about 1-3 minutes on 2 cores.
Exit status 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from course_lib.measure import measure_load_time, measure_pools  # noqa: E402
from course_lib.units import MB  # noqa: E402

MODEL = "course-tiny"
SEQUENCES, CONTEXT = 4, 2048
MIN_POOL_BYTES = 200 * MB
TARGET_POOL_PCT = 3.0
TARGET_DOUBLING_PCT = 5.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json-out", default=None, help="also write the figures as JSON here")
    parser.add_argument("--malloc-default", action="store_true", help="add run C (glibc malloc as is)")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    runs = {}
    print(f"A: {MODEL}, {SEQUENCES} sequences x {CONTEXT} tokens, full prefill", flush=True)
    runs["A"] = measure_pools(MODEL, SEQUENCES, CONTEXT, "cpu")
    print(runs["A"].table(), "\n", flush=True)
    print(f"B: {MODEL}, {2 * SEQUENCES} sequences x {CONTEXT} tokens, no prefill", flush=True)
    runs["B"] = measure_pools(MODEL, 2 * SEQUENCES, CONTEXT, "cpu", run_prefill=False)
    print(runs["B"].table(), "\n", flush=True)
    if args.malloc_default:
        print("C: as A, with glibc's default malloc", flush=True)
        runs["C"] = measure_pools(MODEL, SEQUENCES, CONTEXT, "cpu", malloc="default")
        print(runs["C"].table(), "\n", flush=True)
    timeline = measure_load_time(MODEL, "cpu")
    print(timeline.table(), "\n")

    checks = []
    a, b = runs["A"], runs["B"]
    for name in ("weights", "kv_cache"):
        pool = a.pool(name)
        checks.append((f"A {name} within +-{TARGET_POOL_PCT}% ({pool.measured_bytes / MB:,.1f} MB measured)",
                       pool.measured_bytes >= MIN_POOL_BYTES and abs(pool.error_pct) <= TARGET_POOL_PCT,
                       f"{pool.error_pct:+.3f}%"))
    ws = a.pool("workspace")
    checks.append((f"A workspace ({ws.measured_bytes / MB:,.1f} MB measured; no target, reported)", True,
                   f"{ws.error_pct:+.3f}%"))
    ratio = b.pool("kv_cache").measured_bytes / a.pool("kv_cache").measured_bytes
    checks.append((f"B/A measured KV cache = 2 within +-{TARGET_DOUBLING_PCT}%",
                   abs(ratio / 2 - 1) * 100 <= TARGET_DOUBLING_PCT, f"{ratio:.4f}x"))
    bw = b.pool("weights")
    checks.append((f"B weights within +-{TARGET_POOL_PCT}%", abs(bw.error_pct) <= TARGET_POOL_PCT, f"{bw.error_pct:+.3f}%"))
    if "C" in runs:
        c = runs["C"].pool("workspace")
        checks.append(("C workspace with glibc's default malloc (no target, reported)", True,
                       f"{c.measured_bytes / MB:,.1f} MB measured, {c.error_pct:+.2f}% "
                       f"(kept after prefill: {runs['C'].details['after_prefill_retained_bytes'] / MB:,.1f} MB)"))

    print("targets:")
    for label, ok, figure in checks:
        print(f"  [{'PASS' if ok else 'FAIL'}] {label}: {figure}")
    print(f"benchmark took {time.perf_counter() - started:.0f} s")
    if args.json_out:
        out = Path(args.json_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"runs": {k: r.to_dict() for k, r in runs.items()},
                                   "load_time": timeline.to_dict(),
                                   "checks": [{"check": l, "pass": ok, "figure": f} for l, ok, f in checks]},
                                  indent=2), encoding="utf-8")
        print(f"wrote {out}")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())

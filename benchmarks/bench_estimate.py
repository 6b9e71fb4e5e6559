"""Wall time of one ``course-memory estimate`` call per preset (a fresh interpreter each time).

    .venv/bin/python benchmarks/bench_estimate.py [--repeat 5]

Prints one row per preset (its family, the median and the slowest of ``--repeat`` calls) and the
overall median, as Markdown (benchmarks/results/estimate-time.md). The target: every call under 0.3 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from course_lib.model.model_configs import MODEL_CONFIGS  # noqa: E402


def one_call(model: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "course_lib", "estimate", "--model", model, "--gpu", "b200"],
                   cwd=REPO, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows, every = [], []
    for name in sorted(MODEL_CONFIGS):
        times = [one_call(name) for _ in range(args.repeat)]
        every.extend(times)
        rows.append((name, MODEL_CONFIGS[name]["model_type"], statistics.median(times), max(times)))
    print("| preset | model_type | median s | slowest s |")
    print("|---|---|---:|---:|")
    for name, family, median, slowest in rows:
        print(f"| {name} | {family} | {median:.3f} | {slowest:.3f} |")
    print(f"\nall {len(every)} calls: median {statistics.median(every):.3f} s, slowest {max(every):.3f} s")
    return 0 if max(every) < 0.3 else 1


if __name__ == "__main__":
    raise SystemExit(main())

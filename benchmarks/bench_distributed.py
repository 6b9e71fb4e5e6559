"""Local worker processes vs Dask workers (``--scheduler local:N``) on the same class, same machine.

    .venv/bin/python benchmarks/bench_distributed.py                       # 200 submissions, 2 workers each way
    .venv/bin/python benchmarks/bench_distributed.py --students 40 --rounds 2

The class is the example class (examples/submissions: the reference, the blank, every misconception)
repeated under new names until it has N students, so the mix of fast and slow notebooks is the
course's. Each run is ``course-grade autograde`` in a process of its own, from an empty RESULTS_DIR,
with every hardening on; the runs alternate (local, Dask, local, Dask...) so background load hits both
alike, and each must give the same grades.json (checked). Measured per run:

- wall seconds of the whole command, and of its parts: until the first record (start-up: the lab
  baseline, and for Dask the LocalCluster and the workers' imports), from the first record to the
  last (grading), after the last (the merge: grades.json, exports, gradebook);
- CPU seconds of the command and everything under it, per submission: the figure the estimate for a
  larger cluster is made from. Read from a cpuacct cgroup made for the command (the sandbox moves
  kernels into memory and pids cgroups only, so they stay in it); getrusage of children would miss
  the kernels, which their parents never wait for. Without a cgroup to make, no CPU figure.

The Dask overhead per task is (Dask wall - local wall) / N, whole and in the grading phase alone
(a LocalCluster's start-up is paid once per batch, not per task). Not a test: run it by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "submissions"


def make_class(root: Path, students: int) -> Path:
    examples = sorted(p for p in EXAMPLES.iterdir() if p.is_dir())
    submitted = root / "submitted"
    for i in range(students):
        shutil.copytree(examples[i % len(examples)], submitted / f"s{i:04d}-{examples[i % len(examples)].name}")
    return submitted


CPUACCT = Path("/sys/fs/cgroup/cpuacct")   # cgroup v1; v2 keeps cpu.stat in every group
CGROUP2 = Path("/sys/fs/cgroup")


def _cpu_group(name: str) -> Path | None:
    for parent in (CPUACCT, CGROUP2):
        if (parent / "cgroup.procs").is_file() and ((parent / "cpuacct.usage").is_file() or parent == CGROUP2):
            try:
                group = parent / name
                group.mkdir()
                return group
            except OSError:
                continue
    return None


def _cpu_seconds(group: Path) -> float:
    if (group / "cpuacct.usage").is_file():
        return int((group / "cpuacct.usage").read_text()) / 1e9
    stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
    return int(stat["usage_usec"]) / 1e6


def run(submitted: Path, results: Path, how: list[str]) -> dict:
    shutil.rmtree(results, ignore_errors=True)
    group = _cpu_group(f"course-bench-{os.getpid()}-{time.monotonic_ns()}")
    join = (lambda: (group / "cgroup.procs").write_text(str(os.getpid()))) if group else None
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "autograder", "autograde", str(submitted), "--out", str(results),
                           "--no-progress", *how], cwd=REPO, capture_output=True, text=True, preexec_fn=join)
    end = time.time()
    cpu = float("nan")
    if group is not None:
        time.sleep(1)  # kernels killed at the end of a batch leave their group within a moment
        cpu = _cpu_seconds(group)
        try:
            group.rmdir()
        except OSError:
            pass
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(how)} failed:\n{proc.stderr[-3000:]}")
    stamps = sorted(p.stat().st_mtime for p in (results / "records").glob("*.json"))
    grades = json.loads((results / "grades.json").read_text())
    return {"how": " ".join(how), "wall_s": end - start, "startup_s": stamps[0] - start,
            "grading_s": stamps[-1] - stamps[0], "merge_s": end - stamps[-1], "cpu_s": cpu, "grades": grades}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="local worker processes, and N of local:N")
    args = parser.parse_args()
    n = args.students
    ways = {"local": ["--workers", str(args.workers)], "dask": ["--scheduler", f"local:{args.workers}"]}
    with tempfile.TemporaryDirectory() as tmp:
        submitted = make_class(Path(tmp), n)
        runs: dict[str, list[dict]] = {k: [] for k in ways}
        for r in range(args.rounds):
            for name, how in ways.items():
                result = run(submitted, Path(tmp) / f"results-{name}", how)
                runs[name].append(result)
                print(f"round {r + 1} {name:5s}: wall {result['wall_s']:7.1f} s (start-up {result['startup_s']:5.1f}, "
                      f"grading {result['grading_s']:7.1f}, merge {result['merge_s']:5.1f}), "
                      f"CPU {result['cpu_s']:7.1f} s = {result['cpu_s'] / n:.2f} s per submission", flush=True)
        first = runs["local"][0]["grades"]
        assert all(x["grades"] == first for rs in runs.values() for x in rs), "the two ways gave different grades"
    med = {k: {m: statistics.median(x[m] for x in rs) for m in ("wall_s", "startup_s", "grading_s", "merge_s", "cpu_s")}
           for k, rs in runs.items()}
    local, dask = med["local"], med["dask"]
    print(f"\n{n} submissions, {args.workers} workers each way, {args.rounds} round(s); python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"Dask overhead per task: {(dask['wall_s'] - local['wall_s']) / n * 1000:+.0f} ms whole "
          f"({dask['wall_s'] / local['wall_s'] - 1:+.1%}), {(dask['grading_s'] - local['grading_s']) / n * 1000:+.0f} ms "
          f"in the grading phase ({dask['grading_s'] / local['grading_s'] - 1:+.1%})")
    print(f"CPU per submission: local {local['cpu_s'] / n:.2f} s, Dask {dask['cpu_s'] / n:.2f} s; all grades identical")


if __name__ == "__main__":
    main()

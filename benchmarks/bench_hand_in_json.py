"""What reading a hostile hand-in costs the grader (issue 39, round 5): CPU seconds and peak RSS of
``autograder.source.restore.read_submission``, each notebook read by a fresh Python of its own.

    .venv/bin/python benchmarks/bench_hand_in_json.py

Two sets: notebooks past the bounds (19 MiB of empty objects, strings, integers; 600,000 attachments on a
markdown cell: refused), and notebooks just under them (99,000 objects; 990,000 values of each kind: read),
which is the most a hand-in can make the grader build. Peak RSS is the reader's VmHWM (its imports, the
file's bytes, and what reading them built; the one-cell control also validates, which the refused skip). Not a test: run it by hand; results/hand-in-json.md has today's figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
READ = """
import json, re, resource, sys
from autograder.source.restore import Refused, read_submission
data = open(sys.argv[1], "rb").read()
try:
    read_submission(data); out = "read"
except Refused as e:
    out = "refused: " + str(e).split(" (")[0]
u = resource.getrusage(resource.RUSAGE_SELF)
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
print(json.dumps({"out": out, "cpu_s": u.ru_utime + u.ru_stime, "peak_kib": peak}))
"""
BASE = (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"id": "c1", "cell_type": "markdown", '
        b'"metadata": {}, "source": "hi"}]}')


def notebook(unit: bytes, count: int) -> bytes:
    return BASE.replace(b'"metadata": {}', b'"metadata": {"x": [' + b",".join([unit] * count) + b"]}", 1)


def attachments(count: int) -> bytes:
    att = b",".join(b'"a%d.png": {"image/png": ""}' % i for i in range(count))
    return BASE.replace(b'"cell_type": "markdown",', b'"cell_type": "markdown", "attachments": {' + att + b"},", 1)


def read(data: bytes) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".ipynb") as f:
        f.write(data)
        f.flush()
        proc = subprocess.run([sys.executable, "-c", READ, f.name], cwd=REPO, capture_output=True, text=True,
                              env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    return json.loads(proc.stdout) if proc.returncode == 0 else {"out": f"died ({proc.returncode})", "cpu_s": 0,
                                                                 "peak_kib": 0}


def main() -> None:
    mib = 19 * 2**20
    cases = [("one cell (control)", BASE),
             ("19 MiB of {}", notebook(b"{}", mib // 3)), ('19 MiB of "ab"', notebook(b'"ab"', mib // 5)),
             ("19 MiB of 1", notebook(b"1", mib // 2)), ("600,000 attachments", attachments(600_000)),
             ("99,000 {}", notebook(b"{}", 99_000)), ('990,000 "ab"', notebook(b'"ab"', 990_000)),
             ("990,000 0.5", notebook(b"0.5", 990_000)),
             ('99,000 {"a":1,...} of 9', notebook(b'{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":"x"}', 99_000))]
    print("| hand-in | size | outcome | CPU s | peak RSS |\n|---|---:|---|---:|---:|")
    for name, data in cases:
        r = read(data)
        print(f"| {name} | {len(data) / 2**20:.1f} MiB | {r['out']} | {r['cpu_s']:.2f} | {r['peak_kib'] / 1024:.0f} MiB |")


if __name__ == "__main__":
    main()

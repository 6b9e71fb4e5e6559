"""``make lab`` on a fresh clone, as a new learner runs it: seconds until JupyterLab answers, and disk used.

    python3 benchmarks/bench_make_lab.py [--clone /tmp/fresh-lab] [--keep]

Clones this checkout's HEAD (``git clone``, so only committed files), runs ``make lab
LAB_ARGS="--no-browser --port P"`` in it and stops it once the URL it printed answers
(``/api/status`` with its token), then runs it once more in the same clone (a second day), and
prints both times, the size of ``learner-workspace/``
and of the whole clone, how much pip's cache grew, the load average before and after (other
users of the CPUs), and every line ``make lab`` printed. The target (issue 24): ready in under
2 minutes and under 1.5 GB on an idle 2-core machine. Needs only ``python3``, ``git`` and ``make``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 1800


def du_bytes(path: Path) -> int:
    if not path.exists():
        return 0
    return int(subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True).stdout.split()[0])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_make_lab(clone: Path) -> tuple[float | None, str | None]:
    """``make lab`` in ``clone`` until the URL it printed answers; (seconds, URL), each None if never."""
    port = free_port()
    start = time.monotonic()
    proc = subprocess.Popen(["make", "lab", f"LAB_ARGS=--no-browser --port {port}"], cwd=clone, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    url, ready_s = None, None
    try:
        for line in proc.stdout:
            print(f"{time.monotonic() - start:6.1f} s  {line.rstrip()}", flush=True)
            found = re.search(rf"http://127\.0\.0\.1:{port}/\S*token=\w+", line)
            if found and url is None:
                url = found.group(0)
                status = re.sub(r"/lab/tree/\S*\?", "/api/status?", url)
                while time.monotonic() - start < TIMEOUT_S:
                    try:
                        with urllib.request.urlopen(status, timeout=2) as resp:
                            if resp.status == 200:
                                ready_s = time.monotonic() - start
                                break
                    except OSError:
                        time.sleep(0.2)
                break
            if time.monotonic() - start > TIMEOUT_S:
                break
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    return ready_s, url


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clone", default="/tmp/fresh-lab", help="where to clone (removed first)")
    parser.add_argument("--keep", action="store_true", help="keep the clone afterwards")
    args = parser.parse_args()
    clone = Path(args.clone)
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True).stdout
    pip_cache = Path(os.environ.get("PIP_CACHE_DIR") or Path.home() / ".cache" / "pip")
    cache_before, load_before = du_bytes(pip_cache), os.getloadavg()
    ready_s, url = run_make_lab(clone)
    workspace, load_after = du_bytes(clone / "learner-workspace"), os.getloadavg()
    print("\n---- again, in the same clone (everything there: what a learner's second day costs)")
    again_s, _ = run_make_lab(clone)
    print()
    print(f"commit {head.strip()}; `make lab` ready in {ready_s:.0f} s" if ready_s else "`make lab` never got ready")
    print(f"printed URL: {url}")
    print(f"the second `make lab`: ready in {again_s:.1f} s" if again_s else "the second `make lab` never got ready")
    print(f"learner-workspace/: {workspace / 1e9:.2f} GB; the whole clone: {du_bytes(clone) / 1e9:.2f} GB; "
          f"pip cache grew by {(du_bytes(pip_cache) - cache_before) / 1e6:.0f} MB")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after the first {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} ({os.cpu_count()} CPUs)")
    print(f"dev .venv in the clone: {'yes' if (clone / '.venv').exists() else 'none'}")
    if not args.keep:
        shutil.rmtree(clone, ignore_errors=True)
    return 0 if ready_s and again_s else 1


if __name__ == "__main__":
    sys.exit(main())

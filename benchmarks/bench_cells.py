"""What the grading engine costs per cell and per kernel, apart from what the cells themselves do.

    .venv/bin/python benchmarks/bench_cells.py            # 200 trivial cells, 5 reference notebooks

In one process, with the batch's fork server and the sandbox every submission gets, it runs
(1) a notebook of one ``pass`` cell and one of 201, so the difference is the cost of 200 trivial
cells (the grader's client, ipykernel's messages, IPython's transform and compile), and the first
is a kernel start and stop; (2) the reference submission, restored with its hidden tests, N times.
CPU seconds are those of the whole process tree (a cpuacct cgroup, :mod:`cpu_meter`): grader,
fork server, sandbox processes and kernels. The first notebook's figure includes the fork
server's imports, so the median is given. Not a test: run it by hand.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import nbformat  # noqa: E402
from cpu_meter import CpuMeter  # noqa: E402

from autograder.source.assignment import load_source  # noqa: E402
from lessons.l14_04 import LAB, LESSON  # noqa: E402
from lessons.l14_04.examples import this_assignment  # noqa: E402
from autograder.run.execute import execute_notebook  # noqa: E402
from autograder.source.restore import restore_cells  # noqa: E402
from autograder.sandbox import Limits, Sandbox, fork_server, probe, scratch_dir, stop_fork_servers  # noqa: E402

REFERENCE = REPO / "examples" / "submissions" / "reference" / LESSON.name


def _run(meter: CpuMeter, nb: nbformat.NotebookNode, lab: Path | None = None) -> tuple[float, float, str]:
    """(tree CPU s, wall s, status) of one notebook in a fresh sandbox."""
    with Sandbox(scratch_dir(), Limits(), probe(), preload=LESSON.preload) as box:
        if lab is not None:
            shutil.copy(lab, box.work / lab.name)
        cpu, wall = meter.cpu_s(), time.monotonic()
        execution = execute_notebook(nb, box, cell_timeout=60, notebook_timeout=300)
        return meter.cpu_s() - cpu, time.monotonic() - wall, execution.status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--notebooks", type=int, default=5)
    args = parser.parse_args()
    meter = CpuMeter.create("cells")
    if meter is None:
        raise SystemExit("needs root and a cpuacct cgroup (cgroup v1) to count the kernels' CPU")
    meter.join()
    iso = probe()
    if iso.kernels == "fork":
        fork_server(str(REPO), LESSON.preload)
    cells = lambda n: nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("pass") for _ in range(n)])
    try:
        _run(meter, cells(1))   # the fork server's imports land here
        one, many = _run(meter, cells(1)), _run(meter, cells(args.cells + 1))
        a = this_assignment()
        spec, submitted = load_source(a).notebooks[0], nbformat.read(REFERENCE / a.notebook_name, as_version=4)
        notebooks = [_run(meter, restore_cells(submitted, spec)[0], REFERENCE / LAB.name) for _ in range(args.notebooks)]
    finally:
        stop_fork_servers()
        meter.remove()
    print(f"kernels: {iso.summary()}")
    print(f"kernel start + one cell + stop: {one[0] * 1e3:.1f} ms CPU, {one[1] * 1e3:.1f} ms wall")
    print(f"per trivial cell: {(many[0] - one[0]) / args.cells * 1e3:.2f} ms CPU, "
          f"{(many[1] - one[1]) / args.cells * 1e3:.2f} ms wall")
    print(f"reference notebook ({args.notebooks} runs, {notebooks[-1][2]}): median "
          f"{statistics.median(c for c, _, _ in notebooks):.3f} s CPU, {statistics.median(w for _, w, _ in notebooks):.3f} s wall "
          f"[{', '.join(f'{c:.3f}' for c, _, _ in notebooks)}]")


if __name__ == "__main__":
    main()

"""How long a hand-in that waits holds a grading worker (issue 39, round 5): wall seconds, scaled-down limits.

    .venv/bin/python benchmarks/bench_waiting_handin.py [--notebook-timeout 5] [--drip-s 60] [--work-ms 40]

Two notebooks run one after the other in one sandbox, as grade.py runs an assignment's notebooks; each
has one cell that works ``--work-ms`` (40) ms every 200 ms (17% of a core) for ``--drip-s`` seconds, then a cell
that prints. Before round 5 such a cell was never "idle" (1-s windows under 2% of a core), so each
notebook ran to its own wall-clock backstop (4 x its CPU limit) and the backstops of the notebooks added
up; now its sleep counts as waiting and the hand-in's notebooks share one backstop and one allowance
(autograder.run.cell_budget.Clock, where the checkout has it). Prints the wall seconds and each notebook's
status and message. Results: benchmarks/results/round5-sandbox.md.
"""

from __future__ import annotations

import argparse
import time

import nbformat

DRIP = """import time
end = time.monotonic() + {drip_s}
while time.monotonic() < end:
    t = time.process_time()
    while time.process_time() - t < {work_s}:
        pass
    time.sleep(0.2)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebook-timeout", type=float, default=5.0, help="CPU seconds a notebook may use")
    parser.add_argument("--drip-s", type=float, default=60.0, help="seconds each notebook's cell drips for")
    parser.add_argument("--work-ms", type=float, default=40.0, help="CPU milliseconds of work before each 200 ms sleep")
    args = parser.parse_args()

    from autograder.run import execute
    from autograder.sandbox import Limits, Sandbox, probe, scratch_dir

    clock = execute.Clock(notebooks=2) if hasattr(execute, "Clock") else None
    shared = {"clock": clock} if clock is not None else {}
    start = time.monotonic()
    with Sandbox(scratch_dir(), Limits(), probe()) as box:
        for name in ("first", "second"):
            nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(DRIP.format(drip_s=args.drip_s, work_s=args.work_ms / 1000)),
                                                 nbformat.v4.new_code_cell(f"print('{name} done')")])
            ex = execute.execute_notebook(nb, box, cell_timeout=args.drip_s, notebook_timeout=args.notebook_timeout,
                                          wall_factor=4, idle_factor=1, **shared)
            print(f"{name}: {ex.status} after {ex.seconds:.1f} s: {ex.message or '(no message)'}")
    print(f"hand-in: {time.monotonic() - start:.1f} s of wall clock "
          f"({'one clock for the hand-in' if clock is not None else 'a clock per notebook'})")


if __name__ == "__main__":
    main()

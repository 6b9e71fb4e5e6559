"""What a flood of errors costs the grader: issue 22's 192 MB error flood, one process per run.

    .venv/bin/python benchmarks/bench_error_flood.py

One cell shows 192 errors of 500,000 characters each through ``showtraceback`` (the value is in
the error's ``evalue`` and again in its traceback: about 1 MB a message, 192 MB in all), then a
cell prints. It prints the status, the executed notebook's size, the grader process's peak RSS
(``ru_maxrss``, before and after the run) and the wall time. Not a test: run it by hand.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nbformat  # noqa: E402

from autograder.run.execute import execute_notebook  # noqa: E402
from autograder.sandbox import Limits, Sandbox, probe, scratch_dir  # noqa: E402

FLOOD = ("ip = get_ipython()\n"
         "for i in range(192):\n"
         "    try:\n"
         "        raise ValueError('x' * 500_000)\n"
         "    except ValueError:\n"
         "        ip.showtraceback()\n")


def main() -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(FLOOD), nbformat.v4.new_code_cell("print('after')")])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with Sandbox(scratch_dir(), Limits(), probe()) as box:
        start = time.monotonic()
        ex = execute_notebook(nb, box, cell_timeout=60, notebook_timeout=300)
        wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"status={ex.status} notebook={len(nbformat.writes(ex.nb)) / 2**20:.2f} MiB "
          f"grader_maxrss={after / 1024:.0f} MiB (before the run {before / 1024:.0f} MiB) wall={wall:.1f} s")


if __name__ == "__main__":
    main()

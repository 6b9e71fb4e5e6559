"""Time limits are CPU seconds of the sandbox, with a wall-clock backstop (issue 22): a busy grading
machine gives a cell less of a core, not less work per CPU second, so grades do not change with load.

On the code before, limits were wall-clock seconds: a cell that needed 1.5 s of CPU under a 3 s
limit was interrupted as soon as other processes took most of the cores, and a cell that only
waited was cut at the same 3 s as one that computed.
"""

from __future__ import annotations

import time

import nbformat
import pytest

from autograder.run.execute import Budget, execute_notebook
from autograder.sandbox import Limits, Sandbox, probe, scratch_dir
from load_support import cpu_hog

pytestmark = pytest.mark.slow

#: A cell that needs 1.5 s of CPU whatever the machine does (the kernel's own clock).
BUSY = ("import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5:\n    pass\n"
        "print('done')")


def _run(*sources: str, **kw):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    with Sandbox(scratch_dir(), Limits(), probe()) as box:
        assert box.cpu_seconds() is not None, "this machine's sandbox has a CPU clock (its cgroup)"
        return execute_notebook(nb, box, **{"notebook_timeout": 120, **kw})


def _stdout(ex, index: int) -> str:
    return "".join(o.get("text", "") for o in ex.nb.cells[index].outputs if o.get("name") == "stdout")


def test_a_busy_cell_is_interrupted_after_its_cpu_seconds_and_the_run_goes_on():
    ex = _run("while True:\n    pass", "print('after')", cell_timeout=2)
    assert ex.status == "timeout" and "ran longer than the 2 s limit per cell" in ex.message, ex.message
    assert _stdout(ex, 1) == "after\n"


def test_a_cell_that_waits_uses_no_cpu_and_is_not_cut_at_the_cpu_limit():
    ex = _run("import time\ntime.sleep(3)\nprint('woke')", cell_timeout=2)
    assert ex.status == "completed" and _stdout(ex, 0) == "woke\n", ex.message


def test_a_cell_that_waits_forever_is_ended_by_the_wall_clock_backstop():
    start = time.monotonic()
    ex = _run("import time\ntime.sleep(600)", "print('after')", cell_timeout=1, wall_factor=3)
    assert ex.status == "timeout" and "the 3 s wall-clock backstop per cell" in ex.message, ex.message
    assert _stdout(ex, 1) == "after\n" and time.monotonic() - start < 120


def test_a_cell_gets_the_same_verdict_on_a_busy_machine():
    idle = _run(BUSY, cell_timeout=3)
    with cpu_hog() as n:
        busy = _run(BUSY, cell_timeout=3)
    assert (idle.status, _stdout(idle, 0)) == ("completed", "done\n"), idle.message
    assert (busy.status, _stdout(busy, 0)) == ("completed", "done\n"), f"under {n} busy processes: {busy.message}"


def test_the_budget_reads_the_sandbox_clock_and_falls_back_to_the_wall_clock():
    class NoClock:
        def cpu_seconds(self):
            return None

    budget = Budget(NoClock(), 0.2, wall_factor=10)
    assert not budget.measured and budget.wall_s == 0.2 and budget.over() is None
    time.sleep(0.25)
    assert budget.over() == "cpu"   # no CPU clock: the limit is the wall clock, as before

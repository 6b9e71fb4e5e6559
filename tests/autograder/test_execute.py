"""The cell driver on its own (autograder.run.execute): tiny notebooks, real sandboxed kernels, no scoring.

What the hardening batch shows per submission, shown here cell by cell: a run goes on after a
timeout, a death or a limit, replays without duplicating, stops when it must, and a flood costs
the grader next to nothing. About 30 s on 2 cores.
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import nbformat
import pytest

from autograder.run.execute import execute_notebook
from autograder.sandbox import Limits, Sandbox, probe, scratch_dir

pytestmark = pytest.mark.slow


def _run(*sources: str, isolation=None, limits: Limits = Limits(), **kw):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    kw = {"cell_timeout": 5, "notebook_timeout": 60, **kw}
    with Sandbox(scratch_dir(), limits, isolation or probe()) as box:
        start = time.process_time()
        execution = execute_notebook(nb, box, **kw)
        execution.grader_cpu_s = time.process_time() - start
    return execution


def _stdout(execution, index: int) -> str:
    return "".join(o.get("text", "") for o in execution.nb.cells[index].outputs if o.get("name") == "stdout")


def test_restarts_are_capped_and_then_the_run_stops():
    die = "import os; os._exit(1)"
    ex = _run("x = 1; print('first')", die, die, die, die, "print('never')", max_restarts=3)
    assert ex.status == "kernel_died" and ex.restarts == 3
    assert ex.stopped_at == 5 and ex.nb.cells[5].outputs == []
    assert "restarted 3 times, the most allowed" in ex.message
    assert _stdout(ex, 0) == "first\n", "replays print nothing into the notebook"


def test_a_fresh_kernel_has_what_the_completed_cells_made_and_nothing_of_the_failed_one():
    ex = _run("a = 1", "b = 2\nimport os; os._exit(1)", "print(a, 'b' in dir())")
    assert ex.status == "kernel_died" and _stdout(ex, 2) == "1 False\n"


def test_a_fork_bomb_is_stopped_and_the_run_goes_on():
    ex = _run("x = 41", "import os\nwhile True:\n    os.fork()",
              "import subprocess\nprint(x + 1, subprocess.run(['echo', 'ok'], capture_output=True).stdout)",
              cell_timeout=6)  # generous: the copies' own CPU time counts too, and this test is not about time
    assert ex.status in ("process_limit", "memory_limit"), ex.message  # whichever cap the copies reach first
    assert _stdout(ex, 2) == "42 b'ok\\n'\n", "later cells can start processes again"


# Files a fresh kernel could run before any cell, each one os._exit(1): IPython's startup folder and
# configs in $IPYTHONDIR, in a profile under $HOME, in the working folder, and Jupyter's config folder.
PLANT = """
import os, pathlib
kill = 'import os; os._exit(1)\\n'
ipython, home, cwd = pathlib.Path(os.environ['IPYTHONDIR']), pathlib.Path(os.environ['HOME']), pathlib.Path.cwd()
targets = [ipython / 'profile_default' / 'startup' / '00.py', ipython / 'profile_default' / 'ipython_kernel_config.py',
           ipython / 'profile_default' / 'ipython_config.py', home / '.ipython' / 'profile_default' / 'startup' / '00.py',
           home / '.ipython' / 'profile_default' / 'ipython_kernel_config.py', cwd / 'ipython_kernel_config.py',
           cwd / 'ipython_config.py', home / '.jupyter' / 'jupyter_config.py', cwd / 'sitecustomize.py']
planted = []
for path in targets:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(kill)
        planted.append(str(path))
    except OSError:
        pass
print('planted', len(planted), 'in IPYTHONDIR', any(p.startswith(str(ipython)) for p in planted))
"""


def _kernel_starts():
    """The ways kernels start on this machine: forked from the fork server (where it runs) and exec'd."""
    iso = probe()
    return [pytest.param(k, marks=pytest.mark.skipif(k == "fork" and iso.kernels != "fork",
                                                     reason="no kernel fork server here (the probe says why)"))
            for k in ("fork", "exec")]


@pytest.mark.parametrize("kernels", _kernel_starts())
def test_a_learner_startup_file_or_config_cannot_stop_fresh_kernels(kernels):
    iso = dataclasses.replace(probe(), kernels=kernels)
    ex = _run(PLANT, "import os; os._exit(1)", "print('went on')", isolation=iso)
    assert _stdout(ex, 0).startswith("planted ") and _stdout(ex, 0).endswith(" in IPYTHONDIR False\n"), _stdout(ex, 0)
    assert ex.status == "kernel_died" and ex.restarts == 1 and ex.stopped_at is None, ex.message
    assert "a fresh kernel replayed the cells before it and went on" in ex.message
    assert _stdout(ex, 2) == "went on\n", "the fresh kernel ignored every planted file"


def test_the_disk_watchdog_stops_a_writer_where_no_tmpfs_can_be_mounted():
    iso = dataclasses.replace(probe(), disk="watchdog")
    writer = "i = 0\nwhile True:\n    open(f'f{i}', 'wb').write(b'x' * 2**20)\n    i += 1"
    ex = _run("print('before')", writer, "print('after')", isolation=iso, limits=Limits(disk_bytes=32 * 2**20))
    assert ex.status == "disk_limit" and "filled the notebook's disk space" in ex.message
    assert ex.stopped_at == 1 and _stdout(ex, 0) == "before\n" and ex.nb.cells[2].outputs == []


def test_a_flood_is_cut_cheaply_and_later_cells_still_show_their_output():
    flood = "s = 'x' * 1000\nfor i in range(200_000):\n    print(s)"  # 200 MB through the kernel's stdout
    ex = _run(flood, "print('after')", cell_timeout=30)
    assert ex.status == "completed"
    kept = sum(len(o.get("text", "")) for o in ex.nb.cells[0].outputs)
    assert kept <= 2**20 + 4096 and "output truncated" in ex.nb.cells[0].outputs[-1]["text"]
    assert _stdout(ex, 1) == "after\n"
    # Past the cap, messages are dropped unparsed: the grader's CPU is a fraction of the kernel's time.
    assert ex.grader_cpu_s < 0.35 * ex.seconds, (ex.grader_cpu_s, ex.seconds)


def _reference_run(kernels: str) -> list:
    """The reference submission, restored and run as grade.py runs it: each code cell's outputs as
    (type, MIME keys, text), widget ids and figure bytes left out."""
    from autograder.source.assignment import load_source
    from autograder.source.restore import read_submission, restore_cells
    from lessons.l14_04 import LAB, LESSON
    from lessons.l14_04.examples import this_assignment
    from lessons.l14_04.lab import reference_lab

    a = this_assignment()
    folder = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "reference" / a.name
    nb, _ = restore_cells(read_submission((folder / a.notebook_name).read_bytes()), load_source(a).notebooks[0])
    # and a cell that ends in an expression: the lesson's own cells (explorers skipped while grading) have none
    nb.cells.append(nbformat.v4.new_code_cell("{'an execute_result': sum(range(10))}"))
    with Sandbox(scratch_dir(), Limits(), dataclasses.replace(probe(), kernels=kernels), preload=LESSON.preload) as box:
        nbformat.write(nb, box.work / a.notebook_name)
        (box.work / LAB.name).write_text(reference_lab(LAB.read_text()))
        ex = execute_notebook(nb, box)
        assert ex.status == "completed", ex.message
        cells = [[(o.output_type, sorted(o.get("data", {})), o.get("text", "").replace(str(box.root), "ROOT"),
                   o.get("data", {}).get("application/vnd.course-answer+json"))
                  for o in c.outputs] for c in ex.nb.cells if c.cell_type == "code"]
    return [_coalesced(outputs) for outputs in cells]


def _coalesced(outputs: list) -> list:
    """Consecutive stream outputs as one, as JupyterLab shows them (and nbconvert's coalesce_streams):
    where a kernel's output buffer is flushed is timing, not what the learner sees."""
    merged: list = []
    for out in outputs:
        if merged and out[0] == "stream" and merged[-1][0] == "stream":
            merged[-1] = (*merged[-1][:2], merged[-1][2] + out[2], None)
        else:
            merged.append(out)
    return merged


def test_the_reference_notebook_shows_the_same_forked_as_exec_d():
    if probe().kernels != "fork":
        pytest.skip("no kernel fork server here (the probe says why)")
    forked, execd = _reference_run("fork"), _reference_run("exec")
    assert forked == execd
    kinds = {kind for cell in forked for kind, *_ in cell}
    assert {"stream", "display_data", "execute_result"} <= kinds
    # the lesson's figures: the budget figure and the admission simulation (the chat and rollout figures are the
    # runtime lab's, since the assignment has two notebooks)
    assert sum("image/png" in mimes for cell in forked for _, mimes, *_ in cell) >= 2, "the figures were drawn"


# IPython syntax, the same text run twice (a transform per execution, never a stale one), and a
# failing cell: the fork server's kernel transforms each cell once and uses IPython's own compiler.
IPYTHON_CELLS = ("x = 20\n%time y = x + 1\nprint(y)", "x = 30\n%time y = x + 1\nprint(y)",
                 "get_ipython().input_transformers_cleanup.append(lambda lines: [l.replace('30', '31') for l in lines])",
                 "x = 30\n%time y = x + 1\nprint(y)",
                 "def broken():\n    return 1 / 0\n\nbroken()")


@pytest.mark.parametrize("kernels", _kernel_starts())
def test_ipython_syntax_transforms_and_tracebacks_are_those_of_a_plain_kernel(kernels):
    ex = _run(*IPYTHON_CELLS, isolation=dataclasses.replace(probe(), kernels=kernels))
    assert [_stdout(ex, i).splitlines()[-1] for i in (0, 1, 3)] == ["21", "31", "32"], \
        "each execution is transformed with the transformers in force when it runs"
    error = next(o for o in ex.nb.cells[4].outputs if o.output_type == "error")
    assert error.ename == "ZeroDivisionError"
    text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error.traceback))
    assert "Cell In[5], line 4" in text and "Cell In[5], line 2, in broken()" in text, text


# IPython syntax next to Python that looks like it: a forked grading kernel (which skips IPython's
# tokenizer for text that parses as Python, asks once whether a cell is async and compiles with
# IPython's own compiler) prints what a plain kernel prints, cell for cell.
LOOKALIKE_CELLS = ("x = 5 % 3\ny = x != 2\nprint(f'{x=!r} {y!s:>5}')", "out = !echo shell\nprint(out)",
                   "z = %time 7\nprint(z)", "len?", "s = '''\n!ls\nlen?\n'''\nprint(s)",
                   "In [1]: print('prompt stripped')", ">>> print('classic')",
                   "import asyncio\nasync def g():\n    return 'awaited'\nprint(await g())",
                   "if True:\n    w = !echo nested\n    print(w)", "print('\\d' == chr(92) + 'd')",
                   "def broken(:\n    pass")


def _plain_kernel_outputs(cells) -> list[str]:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        out = []
        for cell in cells:
            texts = []
            kc.execute_interactive(cell, timeout=60, output_hook=lambda m: texts.append(
                m["content"].get("text", "") if m["msg_type"] == "stream" else
                m["content"]["ename"] if m["msg_type"] == "error" else ""))
            out.append("".join(texts))
        return out
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_a_forked_kernel_prints_what_a_plain_kernel_prints_for_ipython_syntax_and_lookalikes():
    if probe().kernels != "fork":
        pytest.skip("no kernel fork server here (the probe says why)")
    ex = _run(*LOOKALIKE_CELLS, "print(type(get_ipython().compile).__name__)")
    timing = lambda text: re.sub(r"(CPU times|Wall time): .*\n", "", text)
    ours = [timing(_stdout(ex, i) + "".join(o.ename for o in c.outputs if o.output_type == "error"))
            for i, c in enumerate(ex.nb.cells[:-1])]
    assert ours == [timing(text) for text in _plain_kernel_outputs(LOOKALIKE_CELLS)]
    assert "['shell']" in ours[1] and "7" in ours[2] and "awaited" in ours[7] and ours[-1] == "SyntaxError", ours
    assert _stdout(ex, len(LOOKALIKE_CELLS)) == "CachingCompiler\n", "IPython's compiler, not ipykernel's"


@pytest.mark.parametrize("kernels", _kernel_starts())
def test_a_cell_the_kernel_fails_on_before_running_it_is_named_as_such_not_as_a_slow_cell(kernels):
    """A 20,000-term expression: IPython's async check (in any ipykernel) raises RecursionError, which its
    message handler only logs, and the kernel never replies. The learner is told that, not that the
    cell ran too long; a fresh kernel goes on. The grader tells it from the protocol as it happens (the
    kernel went idle after the request and no reply came), not from the kernel's log, which the learner's
    code can write: it does not wait out the cell's limit (a kernel that waits uses no CPU, so that would
    be the wall-clock backstop, 4 x 30 s here)."""
    deep = "x = " + "1 + " * 20_000 + "1"
    start = time.monotonic()
    ex = _run("print('before')", deep, "print('after')", cell_timeout=30,
              isolation=dataclasses.replace(probe(), kernels=kernels))
    assert time.monotonic() - start < 30, "the grader waited for the cell's limit"
    message = ex.events[0].message
    assert ex.events[0].status == "kernel_died", "a kernel that broke on the cell, not a slow cell"
    assert message.startswith("cell 2 never started: the kernel failed on it before running it and never answered"), message
    assert "ran longer" not in message and "/" not in message, "no path of the grader's machine"
    assert _stdout(ex, 2) == "after\n"


@pytest.mark.parametrize("kernels", _kernel_starts())
def test_every_option_the_grading_kernel_is_started_with_is_one_it_knows(kernels):
    """traitlets ignores an option a class does not declare configurable, with only a warning in the
    kernel's log (that is how a compiler option once did nothing): the log must hold none."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('ran')")])
    with Sandbox(scratch_dir(), Limits(), dataclasses.replace(probe(), kernels=kernels)) as box:
        ex = execute_notebook(nb, box, cell_timeout=10, notebook_timeout=60)
        log = "".join(p.read_text(errors="replace") for p in box.log_dir.glob("*.log"))
    assert ex.status == "completed" and _stdout(ex, 0) == "ran\n"
    assert "not recognized" not in log and "Unrecognized" not in log, log[-2000:]


FIGURE_CELL = ("%matplotlib inline\nimport matplotlib.pyplot as plt\n"
               "fig, ax = plt.subplots(figsize=(4, 2.5), layout='constrained')\n"
               "ax.plot([0, 1, 2], [3, 1, 2], label='GB'); ax.set_title('pixels'); ax.legend()\nplt.show()")


def _png(outputs) -> bytes:
    import base64
    return next(base64.b64decode(o["data"]["image/png"]) for o in outputs if "image/png" in o.get("data", {}))


def test_figures_are_the_pixels_a_plain_kernel_draws_at_the_fastest_deflate():
    """The grading kernel writes PNGs at zlib level 1 (PNG is lossless): the image decodes to exactly what
    a plain kernel with the inline backend's defaults draws, cropped the same way."""
    import io

    import numpy as np
    from jupyter_client.manager import start_new_kernel
    from PIL import Image

    ours = _png(_run(FIGURE_CELL).nb.cells[0].outputs)
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        outputs = []
        kc.execute_interactive(FIGURE_CELL, timeout=60, output_hook=lambda m: outputs.append(m["content"])
                               if m["msg_type"] == "display_data" else None)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    plain = _png(outputs)
    pixels = [np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")) for png in (ours, plain)]
    assert pixels[0].shape == pixels[1].shape and (pixels[0] == pixels[1]).all()
    idat = lambda png: png[png.index(b"IDAT") + 4:][:2]   # the zlib header of the first image chunk
    assert idat(ours)[1] >> 6 == 0 and idat(plain)[1] >> 6 == 2, "FLEVEL: fastest (1) vs default (6)"


# Issue 34: the kernel writes its own kernel.log through fd 2. A forged ipykernel handler error (learner text in
# it), then a forged MemoryError before a death of a cell that holds ~100 MB: neither may decide the cell's fate.
FORGED_HANDLER_ERROR = ("import os, time\nos.write(2, b'[IPKernelApp] ERROR | Exception in message handler:\\n"
                        "Traceback (most recent call last):\\n  File \"x.py\", line 1, in f\\n"
                        "RecursionError: LEARNER-TEXT see www.example.com\\n')\ntime.sleep(1.5)\nprint('ran')")
FORGED_MEMORY_ERROR = ("import os\nheld = bytearray(100 * 2**20)\n"
                       "os.write(2, b'MemoryError\\nstd::bad_alloc\\nCannot allocate memory\\n')\nos._exit(1)")


def test_text_the_kernel_writes_to_its_log_decides_nothing():
    ex = _run(FORGED_HANDLER_ERROR, FORGED_MEMORY_ERROR, "print('after')", cell_timeout=10)
    assert _stdout(ex, 0) == "ran\n", "the cell ran to its end: no kernel failure was read from the log"
    assert [(e.index, e.status) for e in ex.events] == [(1, "kernel_died")], ex.events
    assert ex.events[0].message.startswith("the kernel died while running cell 2"), ex.message
    assert "LEARNER" not in ex.message and "memory" not in ex.message, ex.message
    assert _stdout(ex, 2) == "after\n"


def test_a_swallowed_error_still_fails_the_test_as_stock_nbgrader_scores_it():
    """Issue 34: with an IPython custom exception handler set in a first cell, a failing assert shows no
    error output; stock nbgrader still gives 0, because its Execute preprocessor adds the execute_reply's
    error to the cell. The grader does the same; nbgrader's own determine_grade is the oracle."""
    from nbgrader.utils import determine_grade

    from autograder.run.scoring import nbgrader_rule
    ex = _run("get_ipython().set_custom_exc((BaseException,), lambda shell, etype, evalue, tb, tb_offset=None: None)",
              "assert 1 == 2, 'wrong'", "assert 1 == 1")
    failed, passed = ex.nb.cells[1], ex.nb.cells[2]
    for cell in (failed, passed):
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "points": 1, "grade_id": "t", "locked": True}
    assert [o["ename"] for o in failed.outputs if o["output_type"] == "error"] == ["AssertionError"], failed.outputs
    assert determine_grade(failed) == (0, 1) and nbgrader_rule(failed, 1.0)[0] == 0.0
    assert determine_grade(passed) == (1, 1) and nbgrader_rule(passed, 1.0)[0] == 1.0


def test_waiting_is_not_free_the_notebook_stops_once_its_idle_allowance_is_spent():
    """Issue 34: five cells of time.sleep(239) took 1,197 s and came out graded, full marks, no message
    (each under the cell's 240 s wall-clock backstop, all under the notebook's 1,200 s). Here, scaled down:
    sleeps of 1.5 s under a 2 s notebook limit whose idle allowance is 1 x 2 s; the run stops in the second
    sleep, says why, and the cells after are not run."""
    sleep = "import time\ntime.sleep(1.5)"
    start = time.monotonic()
    ex = _run(sleep, sleep, sleep, sleep, "print('never')", cell_timeout=2, notebook_timeout=2, idle_factor=1)
    assert time.monotonic() - start < 5.5, "it waited past its allowance (4 sleeps: 6 s)"
    assert ex.status == "timeout" and ex.stopped_at is not None and ex.stopped_at <= 2, ex.message
    assert "idle allowance (1 times its 2 s time limit)" in ex.message and "later cells were not run" in ex.message
    assert ex.nb.cells[4].outputs == []


def test_a_busy_kernel_is_not_idle():
    """The idle allowance counts waiting, not work: 3 s of CPU in a 6 s limit whose idle allowance is only
    0.5 x 6 s completes (a kernel that gets a share of a core, however small, is working)."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1:\n    pass"
    ex = _run(burn, burn, burn, "print('done')", cell_timeout=5, notebook_timeout=6, idle_factor=0.5)
    assert ex.status == "completed" and _stdout(ex, 3) == "done\n", ex.message

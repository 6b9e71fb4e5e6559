"""Every byte a kernel sends counts against the output cap (issue 22): an error's value and traceback,
a display's metadata, comm messages (widget state), not only stream text and display data.

On the code before, each of these floods went through whole: a cell that raised and showed a
1 MB error 100 times kept 200 MB of tracebacks in the notebook (the error branch kept every
error, only its traceback cut); display metadata and comm messages were not counted at all, and
nbclient kept every widget's state in the grader's memory. Each flood here sends about
100 MB; the notebook the grader keeps stays within the 1 MiB budget and a little markup.
"""

from __future__ import annotations

import time
import tracemalloc

import nbformat
import pytest

from autograder.run.execute import execute_notebook
from autograder.sandbox import Limits, Sandbox, probe, scratch_dir

pytestmark = pytest.mark.slow

BUDGET = 2**20

ERROR_FLOOD = ("ip = get_ipython()\n"
               "for i in range(100):\n"
               "    try:\n"
               "        raise ValueError('x' * 500_000)\n"
               "    except ValueError:\n"
               "        ip.showtraceback()\n")
METADATA_FLOOD = ("from IPython.display import display\n"
                  "for i in range(100):\n"
                  "    display({'text/plain': 'small'}, metadata={'big': 'x' * 1_000_000}, raw=True)\n")
COMM_FLOOD = ("from ipykernel.comm import Comm\n"
              "for i in range(100):\n"
              "    Comm(target_name='jupyter.widget', data={'state': {'_model_name': 'X', 'v': 'x' * 1_000_000},\n"
              "         'buffer_paths': []}, metadata={'version': '2.1.0'})\n")


def _run(*sources: str):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    with Sandbox(scratch_dir(), Limits(), probe()) as box:
        tracemalloc.start()
        try:
            ex = execute_notebook(nb, box, cell_timeout=30, notebook_timeout=120, max_output_bytes=BUDGET)
            ex.grader_peak_bytes = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return ex


@pytest.mark.parametrize("flood", [ERROR_FLOOD, METADATA_FLOOD, COMM_FLOOD], ids=["errors", "metadata", "comms"])
def test_a_flood_of_any_message_kind_is_capped_and_later_cells_still_show(flood):
    ex = _run(flood, "print('after')")
    assert ex.status == "completed", ex.message
    written = len(nbformat.writes(ex.nb))
    assert written < BUDGET + 64 * 1024, f"the notebook kept {written:,} bytes of a ~100 MB flood"
    assert [o.get("text") for o in ex.nb.cells[1].outputs] == ["after\n"]
    # What the grader held at once (Python's allocations): a few messages, never the flood.
    assert ex.grader_peak_bytes < 24 * 2**20, f"the grader held {ex.grader_peak_bytes:,} bytes at its peak"
    if flood is ERROR_FLOOD:   # the first error is kept, shortened: it says why a test failed
        errors = [o for o in ex.nb.cells[0].outputs if o.get("output_type") == "error"]
        assert errors and errors[0]["ename"] == "ValueError"


def test_an_error_past_the_budget_still_says_what_went_wrong():
    # 1.2 MB of print, then an exception: the error is past the budget but kept, shortened.
    ex = _run("print('y' * 1_200_000)\nraise KeyError('the key')")
    errors = [o for o in ex.nb.cells[0].outputs if o.get("output_type") == "error"]
    assert len(errors) == 1 and errors[0]["evalue"] == "'the key'"
    assert len(nbformat.writes(ex.nb)) < BUDGET + 64 * 1024

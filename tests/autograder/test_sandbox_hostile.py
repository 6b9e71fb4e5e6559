"""Round 5's sandbox-side attacks (issue 39): what learner code can see of the grader and of the host.

Each test is one attack as a learner would write it in a cell, graded through the real batch or the
real sandbox, with the fixture notebook (tests/files/autograder/hostile.py: about 1 s a hand-in).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "files" / "autograder"))
import hostile  # noqa: E402

from autograder.autograde import main as autograde  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FULL = 5 + hostile.LAB_POINTS


def _grade_one(tmp_path: Path, nb, **kw):
    submitted, results = tmp_path / "submitted", tmp_path / "results"
    folder = submitted / "alice" / hostile.ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / hostile.NOTEBOOK)
    (folder / hostile.LAB.name).write_text(hostile.lab_text(16))
    options = {"cell_timeout": 20, "notebook_timeout": 60, **kw}
    batch = autograde(submitted, out=results, workers=1, progress=False, assignment=hostile.assignment(), **options)
    out = nbformat.read(results / "autograded" / "alice" / hostile.ASSIGNMENT / hostile.NOTEBOOK, as_version=4)
    return batch.students["alice"], out, results


def _stdout(nb, marker: str) -> str:
    """The stdout of the cell whose source holds ``marker``."""
    cell = next(c for c in nb.cells if marker in c.get("source", ""))
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")


# ---- item 3: while a notebook runs, the notebooks on disk are as handed in ------------------------

READ_NOTEBOOKS = """# read-notebooks
import glob
found = [line for path in sorted(glob.glob('*.ipynb')) for line in open(path).read().split('\\\\n')
         if 'HIDDEN' + ' TESTS' in line or 'coll' + 'ect_' in line]   # not this cell's own text
print('hidden lines on disk:', len(found))
print('\\n'.join(found))
"""


def test_no_hidden_test_is_on_disk_while_a_notebook_runs(tmp_path):
    """Stock nbgrader runs each notebook beside the submitted files; course-grade wrote every restored
    notebook (hidden tests in) into the working folder first, where any cell could read them."""
    nb = hostile.insert_after(hostile.learner_notebook(), "intro", READ_NOTEBOOKS)
    result, out, results = _grade_one(tmp_path, nb)
    printed = _stdout(out, "# read-notebooks")
    assert printed.startswith("hidden lines on disk: 0"), printed[:500]
    assert result.score == FULL, result
    feedback = (results / "feedback" / "alice" / hostile.ASSIGNMENT / f"{hostile.ASSIGNMENT}.html").read_text()
    assert "BEGIN HIDDEN TESTS" not in feedback


# ---- item 2: the grader never follows a path the learner controls ----------------------------------

REPLACE_SOCKET = """# replace-socket
import json, os
info = json.load(open('../run/kernel.json'))
path = f"{info['ip']}-{info['iopub_port']}"
try:
    os.unlink(path)
    os.symlink(%r, path)
    print('replaced')
except OSError as e:
    print('refused', e.errno)
"""


def test_a_cell_cannot_point_the_graders_socket_elsewhere(tmp_path):
    """A cell replaces its IOPub socket by a link to another socket of the host, then sends one message
    over the size limit: ZeroMQ drops the connection and the grader connects again, by path, as root."""
    import socket

    from autograder.execute import execute_notebook
    from autograder.sandbox import Limits, Sandbox, probe, scratch_dir

    if not probe().drop_uid:
        pytest.skip("needs the throwaway uid: without it learner code is the grader's own uid")
    attacker = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    attacker.bind(str(tmp_path / "attacker.sock"))
    attacker.listen(64)
    attacker.setblocking(False)
    cells = [REPLACE_SOCKET % str(tmp_path / "attacker.sock"), "print('x' * (2 * 2**20))", "print('still here')"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    with Sandbox(scratch_dir(), Limits(), probe()) as box:
        ex = execute_notebook(nb, box, cell_timeout=30, max_message_bytes=2**20)
    connections = 0
    while True:
        try:
            attacker.accept()[0].close()
            connections += 1
        except BlockingIOError:
            break
    attacker.close()
    assert connections == 0, f"the grader connected to the learner's link {connections} times"
    assert _stdout(ex.nb, "# replace-socket").startswith("refused"), ex.nb.cells[0].outputs
    assert _stdout(ex.nb, "still here") == "still here\n", "the hand-in goes on: the cell cost only itself"


# ---- item 6: nothing of the host's paths in the sandbox's /proc/1/cmdline ---------------------------

READ_CMDLINES = r"""
import json, os
print(json.dumps({str(pid): open(f'/proc/{pid}/cmdline', 'rb').read().rstrip(b'\0').decode(errors='replace')
                  for pid in (1, os.getppid())}))
"""


@pytest.mark.parametrize("kernels", ["fork", "exec"])
def test_the_sandboxs_first_process_names_no_path_of_the_host(kernels):
    """/proc/1/cmdline (the kernel's parent, the sandbox's init) showed the checkout's path, the fork
    server's socket (forked kernels), or bubblewrap's whole mount plan (exec'd kernels)."""
    import dataclasses

    from autograder.execute import execute_notebook
    from autograder.sandbox import Limits, Sandbox, probe, scratch_dir
    from autograder.sandbox.servers import _servers

    iso = probe()
    if not iso.bubblewrap or (kernels == "fork" and iso.kernels != "fork"):
        pytest.skip(f"no {kernels}ed kernels here (the probe says why)")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(READ_CMDLINES)])
    with Sandbox(scratch_dir(), Limits(), dataclasses.replace(iso, kernels=kernels)) as box:
        ex = execute_notebook(nb, box, cell_timeout=30)
        root = str(box.root)
    seen = json.loads(_stdout(ex.nb, "cmdline"))
    host = {str(REPO), sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), root,
            *(str(s.folder) for s in _servers.values() if s is not None)}
    assert set(seen) == {"1"}, seen   # the kernel's parent is the sandbox's pid 1
    leaks = [path for path in host if path in seen["1"]]
    assert not leaks and "zygote" not in seen["1"], seen["1"]

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

from autograder.batch.autograde import main as autograde  # noqa: E402

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

    from autograder.run.execute import execute_notebook
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

    from autograder.run.execute import execute_notebook
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


# ---- item 1: a seccomp filter on learner code -----------------------------------------------------

#: System-call numbers from the kernel's headers (asm/unistd_64.h, asm-generic/unistd.h), not the filter's table.
SYSCALLS = {"x86_64": {"io_uring_setup": 425, "keyctl": 250, "add_key": 248, "request_key": 249},
            "aarch64": {"io_uring_setup": 425, "keyctl": 219, "add_key": 217, "request_key": 218}}

ATTEMPTS = r"""# attempts
import ctypes, json, os, socket, subprocess
libc = ctypes.CDLL(None, use_errno=True)
nr = %r
def call(name, *args):
    ctypes.set_errno(0)
    got = libc.syscall(nr[name], *args)
    if got >= 0:
        os.close(got) if name == 'io_uring_setup' else None
        return 'allowed'
    return ctypes.get_errno()
def try_(fn):
    try:
        fn()
        return 'allowed'
    except OSError as e:
        return e.errno
params = ctypes.create_string_buffer(120)   # struct io_uring_params, zeroed
out = {
    'unshare': 'allowed' if libc.unshare(0x10000000 | 0x00020000) == 0 else ctypes.get_errno(),   # NEWUSER | NEWNS
    'unshare -Urm': subprocess.run(['unshare', '-Urm', 'true'], capture_output=True, text=True).stderr.strip(),
    'io_uring_setup': call('io_uring_setup', 8, params),
    'keyctl': call('keyctl', 0, ctypes.c_long(-3), 0),            # KEYCTL_GET_KEYRING_ID of the session keyring
    'add_key': call('add_key', b'user', b'k', b'v', 1, ctypes.c_long(-2)),
    'request_key': call('request_key', b'user', b'k', None, 0),
    'vsock': try_(lambda: socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()),   # created, never connected
    'packet': try_(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM).close()),
    'unix': try_(lambda: [s.close() for s in socket.socketpair()]),
    'inet': try_(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()),
    'thread_and_fork': subprocess.run(['true']).returncode,
}
print(json.dumps(out))
"""


@pytest.mark.parametrize("kernels", ["fork", "exec"])
def test_learner_code_cannot_make_namespaces_rings_keys_or_vsock_sockets(kernels):
    """Every escape the sandbox refuses already (files, processes, the network) stays refused; these
    reached the host kernel's less guarded corners: now EPERM (1), from learner code, in both kinds of kernel."""
    import dataclasses
    import errno
    import platform

    from autograder.run.execute import execute_notebook
    from autograder.sandbox import Limits, Sandbox, probe, scratch_dir

    iso = probe()
    if not iso.bubblewrap or (kernels == "fork" and iso.kernels != "fork"):
        pytest.skip(f"no {kernels}ed kernels here (the probe says why)")
    if platform.machine() not in SYSCALLS:
        pytest.skip(f"the filter refuses {platform.machine()} (tested elsewhere)")
    cells = [ATTEMPTS % SYSCALLS[platform.machine()], "print('graded', 6 * 7)"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    with Sandbox(scratch_dir(), Limits(), dataclasses.replace(iso, kernels=kernels)) as box:
        ex = execute_notebook(nb, box, cell_timeout=30)
    got = json.loads(_stdout(ex.nb, "# attempts"))
    assert {k: got[k] for k in ("unshare", "io_uring_setup", "keyctl", "add_key", "request_key", "vsock", "packet")} \
        == dict.fromkeys(("unshare", "io_uring_setup", "keyctl", "add_key", "request_key", "vsock", "packet"),
                         errno.EPERM), got
    assert "Operation not permitted" in got["unshare -Urm"], got
    assert (got["unix"], got["inet"], got["thread_and_fork"]) == ("allowed", "allowed", 0), "what a notebook needs works"
    assert _stdout(ex.nb, "graded") == "graded 42\n" and ex.status == "completed"


# ---- item 4: waiting at a few percent of a core is waiting; the hand-in has one wall clock ------------

#: Works 20 ms in every 220 ms (9% of a core) for 8 s: over the old 2%-of-a-core rule for "idle", and asleep
#: most of the time even where a loaded host keeps each burst queued for a core several times as long.
DRIP = """# drip
import time
end = time.monotonic() + 8
while time.monotonic() < end:
    t = time.process_time()
    while time.process_time() - t < 0.02:
        pass
    time.sleep(0.2)
"""


def _run_notebook(box, *sources, **kw):
    from autograder.run.execute import execute_notebook

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    return execute_notebook(nb, box, **{"cell_timeout": 5, "notebook_timeout": 2, "idle_factor": 1, **kw})


def test_a_cell_that_mostly_waits_is_waiting():
    """Before, such a cell was never idle: it ran to the cell's wall-clock backstop (4 x 5 s) and the
    notebook went on. Now its windows count as waiting and the notebook stops at its 2 s allowance."""
    import time

    from autograder.sandbox import Limits, Sandbox, probe, scratch_dir

    with Sandbox(scratch_dir(), Limits(), probe()) as box:
        start = time.monotonic()
        ex = _run_notebook(box, DRIP, "print('never')")
        took = time.monotonic() - start
    assert ex.status == "timeout" and "waited" in ex.message and "idle allowance" in ex.message, ex.message
    assert _stdout(ex.nb, "never") == "" and took < 7.5, (took, ex.message)


def test_an_assignments_notebooks_share_one_wall_clock_and_one_allowance():
    """Two notebooks that each wait: the first spends the hand-in's idle allowance, the second is not
    started anew with an allowance of its own, and its record says why it did not run."""
    import time

    from autograder.run.execute import Clock
    from autograder.sandbox import Limits, Sandbox, probe, scratch_dir

    sleep = "import time\ntime.sleep(1.5)"
    with Sandbox(scratch_dir(), Limits(), probe()) as box:
        clock = Clock(notebooks=2)
        start = time.monotonic()
        first = _run_notebook(box, sleep, sleep, sleep, clock=clock)
        second = _run_notebook(box, "print('second ran')", sleep, clock=clock)
        took = time.monotonic() - start
    assert first.status == "timeout" and "the hand-in's 2 notebooks waited" in first.message, first.message
    assert second.status == "timeout" and second.stopped_at == 0, second.message
    assert "before this notebook started" in second.message and "their shared 2 s idle allowance" in second.message
    assert _stdout(second.nb, "second ran") == "" and took < 7, took


def test_a_side_checks_program_gets_only_what_is_left_of_the_hand_ins_wall_clock():
    """The lab ran after the notebooks with a wall-clock bound of its own (2 x its limit: 120 s by default),
    on top of theirs. On a hand-in clock already spent, a sleeping program is stopped at once."""
    import time

    from autograder.run.execute import Clock
    from autograder.sandbox import probe
    from autograder.contract.settings import Settings
    from autograder.run.sidecheck import runner

    settings = Settings(notebook_timeout=2, side_check_timeout=30)
    spent = Clock(wall0=time.monotonic() - 4 * 2)
    start = time.monotonic()
    got = runner(settings, probe(), clock=spent)("lab.py", "import time\ntime.sleep(30)\nprint('woke')")
    assert got.returncode is None and "woke" not in got.stdout, got
    assert time.monotonic() - start < 10, "it slept on, past the hand-in's backstop"

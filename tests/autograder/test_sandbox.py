"""The sandbox: which isolation works here, what each tool enforces, and the warnings when one is missing."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from autograder import sandbox
from autograder.errors import AutograderError
from autograder.sandbox import (Limits, Sandbox, cgroup_parents, disk_limit_bytes, grader_mounts, memory_limit_bytes,
                                probe, scratch_dir)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text, expected", [("2GB", 2 * 10**9), ("512MiB", 512 * 2**20), ("1.5GiB", 3 * 2**29),
                                            ("2000000000", 2 * 10**9), (2**30, 2**30), ("0.5 GB", 5 * 10**8)])
def test_memory_limit_is_read_as_the_lesson_reads_sizes(text, expected):
    # GB = 10^9 and GiB = 2^30, exactly as course_lib.units reads them (the lesson's point)
    assert memory_limit_bytes(text) == expected


@pytest.mark.parametrize("bad, why", [("lots", "not a size"), ("2X", "unknown unit"), ("", "empty"),
                                      ("-1GB", "negative"), ("0", r"from 268.44 MB \(256 MiB\)"),
                                      ("1K", "'K' alone is ambiguous; write KB .* or KiB"),
                                      ("1KB", r"is 1.00 KB; use a size from 268.44 MB \(256 MiB\) to 1.10 TB \(1024.00 GiB\)"),
                                      ("infG", "not a finite size"), ("nan", "not a finite size"),
                                      ("1e400G", "'G' alone is ambiguous"), ("1e400GB", "above the bound"),
                                      ("2G", "write GB .* or GiB")])
def test_memory_limit_refuses_with_the_fix(bad, why):
    with pytest.raises(AutograderError, match=why) as info:
        memory_limit_bytes(bad)
    assert "\n" not in str(info.value) and "--memory-limit" in str(info.value)


def test_limits_are_shown_in_both_units():
    assert Limits(memory_bytes=memory_limit_bytes("2GB")).memory_text() == "2.00 GB (1.86 GiB)"
    assert Limits(memory_bytes=memory_limit_bytes("2GiB")).memory_text() == "2.15 GB (2.00 GiB)"
    assert Limits(disk_bytes=disk_limit_bytes("64MiB")).disk_text() == "67.11 MB (64 MiB)"
    with pytest.raises(AutograderError, match="--disk-limit='1MB' is 1.00 MB; use a size from 16.78 MB"):
        disk_limit_bytes("1MB")


DISK_PROBE = """
import json, os
def write(d, mib):
    path = os.path.join(d, 'fill')
    try:
        with open(path, 'wb') as f:
            f.write(b'x' * mib * 2**20)
        return True
    except OSError as e:
        return e.errno
dirs = (os.getcwd(), os.environ['HOME'], '/tmp', %r)
alone = [write(d, 40) for d in dirs]             # each folder alone: over the cap
for d in dirs:
    os.remove(os.path.join(d, 'fill'))
together = [write(d, 12) for d in dirs]          # 12 MiB in each: the third passes the cap
for d in dirs:
    os.remove(os.path.join(d, 'fill'))
print(json.dumps([alone, together]))
"""


def test_the_disk_cap_covers_every_writable_folder_together():
    if probe().disk != "tmpfs":
        pytest.skip("no tmpfs here: the watchdog applies (tests/autograder/test_execute.py)")
    with Sandbox(scratch_dir(), Limits(disk_bytes=32 * 2**20), probe()) as box:
        alone, together = _inside(box, DISK_PROBE % str(box.run_dir))
    assert alone == [28, 28, 28, 28], "ENOSPC in work/, $HOME, /tmp and the socket folder alike"
    assert together[:2] == [True, True] and together[2:] == [28, 28]


def test_the_sandbox_leaves_nothing_behind():
    with Sandbox(scratch_dir(), Limits(), probe()) as box:
        root = box.root
        rc, _, _ = box.run([sys.executable, "-c", "import subprocess; subprocess.Popen(['sleep', '60'], start_new_session=True)"],
                           timeout=60)
        assert rc == 0
    assert not root.exists() and root not in grader_mounts()
    assert not any(d.name.startswith(f"course-grade-{os.getpid()}-") for p in cgroup_parents() for d in p.iterdir())


def test_probe_reports_every_missing_tool():
    iso = probe()
    if not iso.bubblewrap:
        assert any("bubblewrap" in w for w in iso.warnings)
    if iso.network == "none":
        assert any("network" in w for w in iso.warnings)


def _inside(box: Sandbox, code: str) -> dict:
    rc, out, err = box.run([sys.executable, "-P", "-c", code], timeout=60)
    assert rc == 0, err
    return json.loads(out.strip().splitlines()[-1])


REPORT = """
import json, os, resource, sys
print(json.dumps({"uid": os.getuid(), "cwd": os.getcwd(), "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
                  "fsize": resource.getrlimit(resource.RLIMIT_FSIZE)[0], "env": sorted(os.environ),
                  "repo_notebooks": os.path.exists(%r), "course_lib": __import__("course_lib").__file__}))
""" % str(REPO / "notebooks")


def test_sandbox_runs_code_as_a_throwaway_user_with_limits():
    iso = probe()
    with Sandbox(Path(tempfile.mkdtemp(prefix="cg-test-")), Limits(), probe()) as box:
        got = _inside(box, REPORT)
        assert got["cwd"] == str(box.work)
    assert got["nproc"] == Limits().max_processes and got["fsize"] == Limits().max_file_bytes
    assert "JPY_PARENT_PID" not in got["env"] and "PATH" in got["env"]
    assert got["course_lib"] == str(REPO / "course_lib" / "__init__.py"), "the trusted library, not a learner's copy"
    if iso.drop_uid:
        assert got["uid"] >= 1_000_000
    if iso.bubblewrap:
        assert got["repo_notebooks"] is False, "instructor sources are not visible in the sandbox"


def test_learner_files_cannot_shadow_the_course_library():
    with Sandbox(Path(tempfile.mkdtemp(prefix="cg-test-")), Limits(), probe()) as box:
        (box.work / "course_lib.py").write_text("raise SystemExit('shadowed')\n")
        got = _inside(box, "import json, course_lib; print(json.dumps([course_lib.__file__]))")
    assert got == [str(REPO / "course_lib" / "__init__.py")]


GRADER_PROBE = """
import json, os
graders, launcher = %r, %r
found = []
for grader in graders:
    for root, dirs, files in os.walk(grader):
        found += [os.path.join(root, f) for f in files]
try:
    found.append(open(launcher).read()[:40])
except OSError:
    pass
try:
    import lessons.l14_04.checks
    imported = lessons.l14_04.checks.__file__
except ImportError as e:
    imported = "ImportError: " + str(e)
print(json.dumps({"files": found, "imported": imported}))
""" % ([str(REPO / "autograder"), str(REPO / "lessons")], sandbox.INNER_LAUNCHER)


def test_nothing_of_the_grader_is_readable_inside():
    if not probe().bubblewrap:
        pytest.skip("needs bubblewrap: without it the sandbox cannot hide files (the probe warns)")
    with Sandbox(Path(tempfile.mkdtemp(prefix="cg-test-")), Limits(), probe()) as box:
        got = _inside(box, GRADER_PROBE)
    assert got["files"] == [], f"grader files readable in the sandbox: {got['files'][:5]}"
    assert got["imported"].startswith("ImportError"), got["imported"]
    assert (REPO / "lessons" / "l14_04" / "checks.py").is_file()   # it is there, outside


def test_without_bubblewrap_the_grader_warns_and_falls_back(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    iso = sandbox.probe.__wrapped__()
    assert iso.bubblewrap is False
    assert any("apt-get install bubblewrap" in w for w in iso.warnings)
    with Sandbox(Path(tempfile.mkdtemp(prefix="cg-test-")), Limits(), iso) as box:
        got = _inside(box, REPORT)
    assert got["nproc"] == Limits().max_processes  # rlimits still apply
    # What the warning says happens: without bubblewrap nothing hides the file system.
    assert got["repo_notebooks"] is True


def test_launcher_refuses_bad_usage():
    import subprocess
    proc = subprocess.run([sys.executable, "-I", str(sandbox.LAUNCHER), "--uid"], capture_output=True, text=True)
    assert proc.returncode == 97 and "usage" in proc.stderr


KERNEL_VIEW = r"""
import json, os, resource, socket, sys
status = {l.split(':')[0]: l.split()[1] for l in open('/proc/self/status')
          if l.startswith(('CapInh', 'CapPrm', 'CapEff', 'CapAmb', 'NoNewPrivs', 'Seccomp:'))}
mounts = sorted({(l.split()[4], l.split()[5].split(',')[0]) for l in open('/proc/self/mountinfo')})
try:
    import lessons.l14_04.checks
    grader = 'imported'
except ImportError:
    grader = [m for m in sys.modules if m.startswith(('autograder', 'lessons'))]
umask = os.umask(0o077)
print(json.dumps({
    'uid': os.getuid(), 'gid': os.getgid(), 'groups': os.getgroups(), 'pid': os.getpid(), 'ppid': os.getppid(),
    'sid': os.getsid(0), 'pgid': os.getpgid(0), 'host': socket.gethostname(), 'status': status,
    'cgroup': open('/proc/self/cgroup').read(), 'env': dict(os.environ), 'cwd': os.getcwd(), 'umask': umask,
    'rlimits': {n: resource.getrlimit(getattr(resource, 'RLIMIT_' + n)) for n in ('NPROC', 'FSIZE', 'NOFILE', 'CPU', 'CORE', 'AS')},
    'mounts': mounts, 'net': sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]),
    'processes': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), 'grader': grader,
    'sys_path': sys.path, 'flags': [sys.flags.safe_path, sys.flags.no_user_site, sys.flags.dont_write_bytecode]}))
"""


def _kernel_view(kernels: str) -> dict:
    import dataclasses

    import nbformat

    from autograder.run.execute import execute_notebook

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(KERNEL_VIEW)])
    with Sandbox(scratch_dir(), Limits(), dataclasses.replace(probe(), kernels=kernels)) as box:
        ex = execute_notebook(nb, box, cell_timeout=30)
        text = "".join(o.get("text", "") for o in ex.nb.cells[0].outputs if o.get("name") == "stdout")
        assert ex.status == "completed" and text, (ex.message, ex.nb.cells[0].outputs)
        view = json.loads(text.replace(str(box.root), "ROOT"))
    assert view["uid"] >= 1_000_000 and view["gid"] == view["uid"], view["uid"]
    view["uid"] = view["gid"] = "throwaway"
    return view


def test_a_forked_kernel_runs_in_the_same_sandbox_as_one_under_bubblewrap():
    if probe().kernels != "fork":
        pytest.skip("no kernel fork server here (the probe says why)")
    forked, execd = _kernel_view("fork"), _kernel_view("exec")
    assert forked["status"] == {"CapInh": "0000000000000000", "CapPrm": "0000000000000000",
                                "CapEff": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1",
                                "Seccomp": "2"}, forked["status"]   # mode 2: the filter (sandbox/_seccomp.py)
    assert forked["grader"] == [] and execd["grader"] == [], "nothing of the grader is importable or imported"
    # Where the fork server is stricter: the launcher's folder is not there at all (no launcher
    # runs inside), the root folder is read-only, and so is /proc/sys.
    forked_mounts, execd_mounts = {tuple(m) for m in forked["mounts"]}, {tuple(m) for m in execd["mounts"]}
    assert execd_mounts - forked_mounts == {("/run/course-grade", "ro"), ("/", "rw")}
    assert forked_mounts - execd_mounts == {("/", "ro"), ("/proc/sys", "ro")}
    for view in (forked, execd):
        view.pop("mounts")
    assert forked == execd


def test_commands_run_through_the_fork_server_as_under_bubblewrap():
    import time

    if probe().kernels != "fork":
        pytest.skip("no kernel fork server here (the probe says why)")
    server = sandbox.fork_server(str(REPO))
    deadline = time.monotonic() + 120
    while not server.ready():   # Sandbox.run takes bubblewrap while the server still imports
        assert time.monotonic() < deadline, server.log_tail()
        time.sleep(0.1)
    with Sandbox(scratch_dir(), Limits(), probe()) as box:
        code = "import os, sys; print(os.getpid(), os.path.exists('/run/course-grade')); sys.stderr.write('e'); sys.exit(3)"
        assert box.run([sys.executable, "-c", code], timeout=60) == (3, "2 False\n", "e"), "forked: no launcher folder inside"
        start = time.monotonic()
        assert box.run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1)[0] is None
        assert time.monotonic() - start < 10
        got = _inside(box, REPORT)
    assert got["nproc"] == Limits().max_processes and got["fsize"] == Limits().max_file_bytes
    assert got["uid"] >= 1_000_000 and got["repo_notebooks"] is False
    assert got["course_lib"] == str(REPO / "course_lib" / "__init__.py")


def test_a_side_checks_program_runs_through_the_batchs_one_fork_server():
    """The side checks' runs are forked from the server the kernels come from (the same PYTHONPATH and
    preload), never from a second one that imports everything again."""
    import time

    from autograder.sandbox import servers
    from autograder.contract.settings import Settings
    from autograder.run.sidecheck import runner

    if probe().kernels != "fork":
        pytest.skip("no kernel fork server here (the probe says why)")
    preload = ("json",)
    server = sandbox.fork_server(str(REPO), preload)
    deadline = time.monotonic() + 120
    while not server.ready():
        assert time.monotonic() < deadline, server.log_tail()
        time.sleep(0.1)
    before = set(servers._servers)
    got = runner(Settings(), probe(), preload)("probe.py", "import os; print(os.getpid())")
    assert (got.returncode, got.stdout.strip()) == (0, "2"), got   # pid 2 of its own namespace: forked
    assert set(servers._servers) == before, "no second fork server"

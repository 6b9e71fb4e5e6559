"""Which isolation works on this machine (:func:`probe`, once per process), and the refusal below the minimum.

Each tool is tried for real, the way a submission will use it (about 0.1 s): bubblewrap's
namespaces with the launcher dropping to a throwaway uid inside, a memory+pids cgroup, a
size-capped tmpfs, and a program forked from a fork server into the same sandbox. What is
missing goes into :attr:`Isolation.warnings`; :func:`require_minimum` turns a machine below the
minimum into one line of :class:`~autograder.errors.AutograderError`.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import replace

from ..errors import AutograderError
from .box import Sandbox
from .cgroup import Cgroup, cgroup_version
from .forkserver import ForkedProcess, ForkServer, ForkServerError
from .isolation import KERNELS_ENV, DiskCap, Isolation, KernelStart, Network
from .limits import Limits
from .mounts import INNER_LAUNCHER, LAUNCHER, REPO, bwrap_command, mount_plan
from .scratch import mount_tmpfs, scratch_dir, unmount
from .servers import fork_server_env

_PROBE_PROGRAM = ("import json, os, socket\n"
                  "print(json.dumps({'uid': os.getuid(), 'pid': os.getpid(), 'host': socket.gethostname()}))")


def _works(cmd: list[str], timeout: float = 20) -> tuple[bool, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    return proc.returncode == 0, (proc.stderr or proc.stdout).strip()[-300:]


@functools.lru_cache(maxsize=1)
def probe() -> Isolation:
    """Try each isolation tool once and report what works here."""
    warnings = []
    is_root = os.geteuid() == 0
    uid = 1_000_000 + secrets.randbelow(1_000_000_000)

    bubblewrap = False
    if shutil.which("bwrap") is None:
        warnings.append("bubblewrap (bwrap) is not installed: learner code can READ the whole file system "
                        "(other submissions, instructor sources). Install it with `apt-get install bubblewrap`.")
    else:
        cmd = bwrap_command(mount_plan(Limits())) + ["--", sys.executable, "-I", INNER_LAUNCHER]
        cmd += (["--uid", str(uid)] if is_root else []) + ["--", sys.executable, "-I", "-c", "pass"]
        bubblewrap, why = _works(cmd)
        if not bubblewrap:
            warnings.append(f"bubblewrap is installed but cannot create namespaces here ({why}); "
                            "learner code can READ the whole file system. Falling back to uid + rlimits.")

    cgroup = None
    version = cgroup_version()
    if version is not None and is_root:
        cg = Cgroup(version, f"course-grade-probe-{os.getpid()}")
        try:
            cg.create(Limits())
            cgroup = version
        except OSError as e:
            warnings.append(f"cannot create a cgroup ({e}); the memory cap is RLIMIT_AS (per process) "
                            "and the process cap is RLIMIT_NPROC.")
        finally:
            cg.remove()
    else:
        warnings.append("no writable cgroup hierarchy; the memory cap is RLIMIT_AS (per process) "
                        "and the process cap is RLIMIT_NPROC.")

    drop_uid = False
    if not is_root:
        warnings.append("the grader is not root, so learner code runs as the grader's own user: it can "
                        "write wherever the grader can, and RLIMIT_NPROC counts all of that user's processes.")
    elif bubblewrap:
        drop_uid = True
    else:
        drop_uid, why = _works([sys.executable, "-I", str(LAUNCHER), "--uid", str(uid), "--",
                                sys.executable, "-I", "-c", "import course_lib"], timeout=20)
        if not drop_uid:
            # e.g. Python under /root (mode 700) is not executable by another uid.
            warnings.append(f"an unprivileged uid cannot run this Python ({why}); learner code runs as root.")

    disk = DiskCap.WATCHDOG
    if is_root:
        target = scratch_dir("probe")
        try:
            mount_tmpfs(target, 2**20, 16)
            unmount(target)
            disk = DiskCap.TMPFS
        except OSError as e:
            warnings.append(f"{e}; the notebook's writes are capped by a watchdog on the scratch folder's "
                            f"size instead (checked 4 times a second: a fast writer can overshoot the cap).")
        finally:
            shutil.rmtree(target, ignore_errors=True)
    else:
        warnings.append("the grader is not root, so it cannot mount a size-capped tmpfs for each notebook; "
                        "a watchdog on the scratch folder's size caps its writes (a fast writer can overshoot).")

    if bubblewrap:
        network = Network.BUBBLEWRAP
    else:
        ok, why = _works([sys.executable, "-I", str(LAUNCHER), "--unshare-net", "--", "/bin/true"])
        network = Network.UNSHARE if ok else Network.NONE
        if not ok:
            warnings.append(f"cannot create a network namespace ({why}): learner code CAN reach the network.")
    iso = Isolation(bubblewrap=bubblewrap, cgroup=cgroup, drop_uid=drop_uid, network=network, disk=disk,
                    warnings=tuple(warnings))
    if bubblewrap and drop_uid and os.environ.get(KERNELS_ENV, "auto") != KernelStart.EXEC:
        ok, why = _fork_server_works(iso)
        if ok:
            return replace(iso, kernels=KernelStart.FORK)
        iso = replace(iso, warnings=iso.warnings + (
            f"the kernel fork server cannot run here ({why}); each kernel starts a fresh Python under bubblewrap "
            f"instead (the same isolation, about a second more CPU per submission).",))
    return iso


def require_minimum(iso: Isolation, insecure: bool = False) -> None:
    """Refuse to grade below the minimum (:meth:`Isolation.missing`), in one line, unless ``insecure``.

    >>> require_minimum(Isolation(bubblewrap=False, cgroup=None, drop_uid=False, network=Network.NONE), insecure=True)
    >>> require_minimum(Isolation(bubblewrap=True, cgroup=None, drop_uid=True, network=Network.BUBBLEWRAP))
    Traceback (most recent call last):
    ...
    autograder.errors.AutograderError: this machine cannot isolate learner code, so nothing is graded; it lacks a memory and pids cap: ...
    """
    lacks = iso.missing()
    if lacks and not insecure:
        raise AutograderError("this machine cannot isolate learner code, so nothing is graded; it lacks "
                              + "; and ".join(lacks) + ". To grade anyway, with learner code able to read the "
                              "solutions and other submissions, pass --insecure")


def _fork_server_works(iso: Isolation) -> tuple[bool, str]:
    """Start a fork server (nothing preloaded) and fork one sandboxed program from it: does it run as
    the throwaway uid, as pid 2 of its own pid namespace, with the sandbox's hostname?"""
    folder = scratch_dir("zygote")
    try:
        server = ForkServer(fork_server_env(folder, str(REPO)), preload=(), folder=folder)
    except ForkServerError as e:
        shutil.rmtree(folder, ignore_errors=True)
        return False, str(e)
    try:
        with Sandbox(scratch_dir("probe"), Limits(), iso) as box:
            out = box.log_dir / "probe.out"
            with open(out, "wb") as f:
                proc = ForkedProcess(*server.spawn(box.fork_request([sys.executable, "-I", "-c", _PROBE_PROGRAM],
                                                                    mode="exec"), [f.fileno()]))
            exited = proc.wait(20)
            proc.close()
            text = out.read_text(errors="replace").strip()
        try:
            report = json.loads(text.splitlines()[-1])
        except (ValueError, IndexError):
            return False, text[-300:] or ("no output" if exited else "no answer in 20 s")
        if report.get("pid") != 2 or report.get("uid") == 0 or report.get("host") != "sandbox":
            return False, f"the forked program was not isolated: {report}"
        return True, ""
    except (ForkServerError, OSError) as e:
        return False, str(e)
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)

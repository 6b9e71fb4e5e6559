"""One submission's sandbox: a scratch folder, a throwaway uid, a cgroup and a command wrapper.

:meth:`Sandbox.command` wraps any command line so that it runs inside (bubblewrap, then the
launcher, which joins the cgroup, drops to the uid, sets the rlimits and execs);
:meth:`Sandbox.fork_request` says the same to the kernel fork server, as data; :meth:`Sandbox.run`
runs a program to completion, through the fork server where there is one. The isolation it runs
under is given (:func:`autograder.sandbox.probe.probe` finds it), never guessed here.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from course_lib.units import KiB

from .cgroup import Cgroup, backoff
from .forkserver import ForkedProcess, ForkServerError
from .isolation import DiskCap, Isolation, KernelStart, Network
from .kernel_env import kernel_env, make_ipython_dir, seed_matplotlib_cache
from .limits import Limits
from .mounts import INNER_LAUNCHER, INNER_PYTHON, LAUNCHER, REPO, bwrap_command, mount_plan
from .python_env import PythonEnv
from .scratch import mount_tmpfs, remove_tree, tree_usage, unmount
from .servers import fork_server


class Sandbox:
    """A scratch directory, a uid, a cgroup and a command wrapper for one submission.

    Layout under ``root``: ``work/`` (the learner's files; the cwd), ``home/`` ($HOME),
    ``run/`` (kernel connection file and sockets; sealed while learner code runs: :meth:`seal_sockets`), ``log/`` (kernel stderr; not visible inside),
    ``tmp/`` (/tmp under bubblewrap), ``ipython/`` ($IPYTHONDIR: the grader's, read-only inside, so
    no learner file there, a startup file or a config, can run in a fresh kernel), ``mnt/`` (where
    the kernel fork server builds the sandbox's file system). Where the grader can mount, ``root``
    is a tmpfs of ``limits.disk_bytes``: everything the notebook writes, sockets and log included,
    shares that cap.
    """

    def __init__(self, root: Path, limits: Limits, isolation: Isolation, pythonpath: str | None = None,
                 preload: tuple[str, ...] = (), python: PythonEnv | None = None):
        self.root = Path(root)
        self.limits = limits
        self.isolation = isolation
        self.pythonpath = pythonpath or str(REPO)
        self.preload = tuple(preload)
        """What the fork server this sandbox's kernels come from preloads, beyond ipykernel's own."""
        self.python_env = python
        """The course's Python (``--python``), shown read-only inside; None: the grader's."""
        self.python = python.executable if python is not None else sys.executable
        self.work = self.root / "work"
        self.home = self.root / "home"
        self.run_dir = self.root / "run"
        self.log_dir = self.root / "log"
        self.launcher_dir = self.root / "launcher"
        self.tmp = self.root / "tmp"
        self.ipython_dir = self.root / "ipython"
        self.stage = self.root / "mnt"
        self.uid = 1_000_000 + secrets.randbelow(1_000_000_000) if self.isolation.drop_uid else None
        self.cgroup: Cgroup | None = None
        self.disk_capped = False
        """True when ``root`` is a size-capped tmpfs (else the watchdog applies: :meth:`disk_full`)."""

    def __enter__(self) -> Sandbox:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.isolation.disk == DiskCap.TMPFS:
            try:
                mount_tmpfs(self.root, self.limits.disk_bytes, self.limits.max_files)
                self.disk_capped = True
            except OSError:  # probe() saw it work; if it fails now, the watchdog still applies
                pass
        for d in (self.work, self.home, self.run_dir, self.log_dir, self.launcher_dir, self.tmp, self.stage):
            d.mkdir(parents=True, exist_ok=True)
        make_ipython_dir(self.ipython_dir)
        os.chmod(self.root, 0o711)
        shutil.copyfile(LAUNCHER, self.launcher_dir / "launch.py")
        shutil.copyfile(LAUNCHER.with_name("_seccomp.py"), self.launcher_dir / "_seccomp.py")   # its --seccomp
        (self.launcher_dir / "python").symlink_to(sys.executable)   # INNER_PYTHON
        os.chmod(self.launcher_dir, 0o700)  # root only: the learner's uid cannot list or read it
        os.chmod(self.log_dir, 0o700)
        os.chmod(self.tmp, 0o1777)
        seed_matplotlib_cache(self.home / ".matplotlib")
        if self.isolation.cgroup:
            cg = Cgroup(self.isolation.cgroup, f"course-grade-{os.getpid()}-{secrets.token_hex(4)}")
            try:
                cg.create(self.limits)
                self.cgroup = cg
            except OSError:
                cg.remove()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.kill_all()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.disk_capped:
            unmount(self.root)
            self.disk_capped = False
        remove_tree(self.root)   # iterative: whatever learner code left there (shutil.rmtree recurses)

    def kill_all(self) -> None:
        """Kill every process of this sandbox: the cgroup's, else those of its throwaway uid."""
        if self.cgroup is not None:
            self.cgroup.kill_all()
        elif self.uid is not None:
            kill_uid(self.uid)

    def seal_sockets(self) -> None:
        """Hand ``run/`` (the kernel's connection file and ZeroMQ sockets) back to the grader, read-only
        for learner code: called once the kernel has bound its sockets and answered, before any cell.

        The grader connects to those sockets by path, as root, and again whenever IOPub drops a message
        over the size limit; it writes the connection file there at every kernel start. While ``run/``
        is the learner's, a cell can replace a socket by a link to any socket of the host (the grader
        then connects there, each reconnection) or the connection file by a link to any file (the grader
        then writes through it). Sealed, nothing in it can be renamed, replaced or added. Each kernel's
        start hands it to the throwaway uid again (the launcher's ``--chown``, the fork server's
        ``chown``) so the fresh kernel can bind: by then every process of the sandbox is killed
        (``_Run._close_kernel``), and no learner code runs until the kernel has answered and the folder
        is sealed again. Without a throwaway uid (``--insecure``) learner code is the grader's uid anyway.
        """
        if self.uid is not None:
            os.chown(self.run_dir, os.geteuid(), os.getegid())   # root/ is the grader's: run/ is no link
            os.chmod(self.run_dir, 0o755)

    def counters(self) -> dict[str, int]:
        """The cgroup's cumulative ``oom_kill`` and ``pids_max`` events and its ``pids`` (zeros without one)."""
        return self.cgroup.counters() if self.cgroup is not None else {"oom_kill": 0, "pids_max": 0, "pids": 0}

    def cpu_seconds(self) -> float | None:
        """CPU seconds the sandbox's processes have used so far: its cgroup's clock, else (no cgroup:
        ``--insecure`` only) the CPU times in /proc of its throwaway uid's processes, else None (the
        caller then has the wall clock only)."""
        if self.cgroup is not None:
            used = self.cgroup.cpu_seconds()
            if used is not None:
                return used
        if self.uid is not None:
            return uid_cpu_seconds(self.uid)
        return None

    def runqueue_seconds(self) -> float | None:
        """Seconds the sandbox's live threads have spent ready to run but queued for a core (``run_delay``,
        the second field of ``/proc/PID/task/TID/schedstat``): what tells a kernel starved by a busy host
        from one that waits (autograder.run.cell_budget.Budget). Its cgroup's processes, else its uid's; None
        where the kernel keeps no such count or the sandbox has neither."""
        if self.cgroup is not None:
            pids = self.cgroup.pids()
        elif self.uid is not None:
            pids = [int(e) for e in os.listdir("/proc") if e.isdigit() and _owned_by(int(e), self.uid)]
        else:
            return None
        total, seen = 0, False
        for pid in pids:
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                        total += int(f.read().split()[1])
                    seen = True
                except (OSError, ValueError, IndexError):
                    continue
        return total / 1e9 if seen else None

    def disk_used(self) -> tuple[int, int]:
        """(bytes, files) the notebook has written under ``root``: the tmpfs's own count when capped,
        else a walk that stops counting files past ``limits.max_files`` (:func:`~.scratch.tree_usage`: by
        descriptor, so nothing below a path too long to name escapes it)."""
        if self.disk_capped:
            st = os.statvfs(self.root)
            return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_files - st.f_ffree
        return tree_usage(self.root, self.limits.max_files)

    def disk_full(self) -> bool:
        """Has the notebook reached its disk cap (bytes or files), within a little slack?"""
        used, files = self.disk_used()
        return used >= self.limits.disk_bytes - 256 * KiB or files >= self.limits.max_files - 16

    def env(self) -> dict[str, str]:
        return kernel_env(home=self.home, tmpdir="/tmp" if self.isolation.bubblewrap else self.home,
                          ipython_dir=self.ipython_dir, mpl_dir=self.home / ".matplotlib", pythonpath=self.pythonpath,
                          python=self.python)

    def command(self, argv: list[str], cwd: Path | None = None) -> list[str]:
        """``argv`` wrapped so that it runs inside this sandbox, in ``cwd`` (default: ``work/``)."""
        iso, lim = self.isolation, self.limits
        cwd = Path(cwd or self.work)
        launch = [sys.executable, "-I", str(LAUNCHER)]
        inner = [INNER_PYTHON, "-I", INNER_LAUNCHER] if iso.bubblewrap else list(launch)
        if not iso.bubblewrap and iso.network == Network.UNSHARE:
            inner.append("--unshare-net")
        if self.uid is not None:
            for d in (self.work, self.home, self.run_dir):
                inner += ["--chown", str(d)]
            inner += ["--uid", str(self.uid)]
        for name, value in self.rlimits().items():
            inner += ["--rlimit", f"{name}={value}"]
        for key, value in self.env().items():
            inner += ["--env", f"{key}={value}"]
        # Inside bubblewrap our parent is its pid-1 (pid numbers differ): only set the signal (0).
        inner += ["--chdir", str(cwd), "--pdeathsig", "0" if iso.bubblewrap else str(os.getpid()), "--seccomp",
                  "--"] + list(argv)

        join = []
        if self.cgroup is not None:
            for procs in self.cgroup.procs_files:
                join += ["--cgroup-procs", procs]
        if not iso.bubblewrap:
            return launch + join + inner[3:] if join else inner
        bw = bwrap_command(mount_plan(lim, writable=(self.work, self.home, self.run_dir), read_only=self._read_only(),
                                      launcher_dir=self.launcher_dir, tmp=self.tmp if self.disk_capped else None))
        bw += ["--chdir", str(cwd), "--"]
        # bwrap's --die-with-parent ties the sandbox to bwrap, not bwrap to us: the outer
        # launcher sets PDEATHSIG (kept across exec) so that bwrap dies with the grader.
        # --hide-args: bubblewrap's options and the inner launcher's go by memfd, not in /proc/1/cmdline.
        outer = launch + join + ["--pdeathsig", str(os.getpid()), "--hide-args", "3", "--"]
        return outer + bw + inner

    def _read_only(self) -> tuple[Path, ...]:
        """$IPYTHONDIR, and the course's Python where it is not the grader's."""
        extra = self.python_env.dirs if self.python_env is not None else ()
        return (self.ipython_dir, *(Path(d) for d in extra))

    def rlimits(self) -> dict[str, int]:
        """The rlimits learner code runs under (RLIMIT_AS only where no cgroup caps the memory)."""
        lim = self.limits
        out = {"NPROC": lim.max_processes, "FSIZE": lim.max_file_bytes, "NOFILE": lim.max_open_files,
               "CPU": lim.cpu_seconds, "CORE": 0}
        if self.cgroup is None:
            out["AS"] = lim.memory_bytes
        return out

    def fork_request(self, argv: list[str], cwd: Path | None = None, mode: str = "kernel",
                     fds: tuple[str, ...] = ("output",)) -> dict:
        """What the kernel fork server needs to fork a program into this sandbox (``_zygote.py``):
        every step that :meth:`command` gives bubblewrap and the launcher, as data. ``mode`` "kernel":
        ipykernel with the arguments ``argv``, in the forked process; "exec": the program ``argv``."""
        plan = mount_plan(self.limits, writable=(self.work, self.home, self.run_dir), read_only=self._read_only(),
                          tmp=self.tmp if self.disk_capped else None, launcher=False)
        return {"mode": mode, "argv": [str(a) for a in argv], "fds": list(fds), "plan": [step.wire() for step in plan],
                "stage": str(self.stage),
                "cgroup_procs": self.cgroup.procs_files if self.cgroup is not None else [],
                "hostname": "sandbox", "loopback": True, "uid": self.uid,
                "chown": [str(d) for d in (self.work, self.home, self.run_dir)] if self.uid is not None else [],
                "rlimits": list(self.rlimits().items()), "env": self.env(), "cwd": str(cwd or self.work)}

    def wait_within(self, exited: Callable[[float], bool], cpu_s: float, wall_s: float) -> bool:
        """Wait until ``exited(slice_s)`` says so (it may block for ``slice_s``): True; False once the
        sandbox has used ``cpu_s`` CPU seconds since the call (:meth:`cpu_seconds`; the wall clock where
        there is no CPU clock) or ``wall_s`` seconds have passed, whichever comes first."""
        start, cpu0 = time.monotonic(), self.cpu_seconds()
        while not exited(0.05):
            spent = time.monotonic() - start
            cpu = self.cpu_seconds() if cpu0 is not None else None
            if spent >= wall_s or (cpu - cpu0 if cpu is not None else spent) >= cpu_s:
                return False
        return True

    def run(self, argv: list[str], cwd: Path | None = None, *, timeout: float, wall_s: float | None = None,
            max_output_bytes: int = 64 * KiB) -> tuple[int | None, str, str]:
        """Run a command to completion in the sandbox, for at most ``timeout`` CPU seconds of the sandbox
        and ``wall_s`` seconds of the wall clock (default: 4 times ``timeout``; the caller's settings:
        autograder.contract.settings): (returncode or None on timeout, stdout, stderr)."""
        wall_s = 4 * timeout if wall_s is None else wall_s
        out_path, err_path = self.log_dir / "run.out", self.log_dir / "run.err"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            rc = self._run_forked(argv, cwd, timeout, wall_s, out, err)
            if rc == "no server":
                proc = subprocess.Popen(self.command(argv, cwd), stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=err, start_new_session=True)

                def exited(slice_s: float) -> bool:
                    try:
                        proc.wait(timeout=slice_s)
                        return True
                    except subprocess.TimeoutExpired:
                        return False

                if self.wait_within(exited, timeout, wall_s):
                    rc = proc.returncode
                else:
                    rc = None
                    _kill_group(proc)
        if self.cgroup is not None:
            self.cgroup.kill_all()
        return rc, _head(out_path, max_output_bytes), _head(err_path, max_output_bytes)

    def _run_forked(self, argv, cwd, timeout, wall_s, out, err) -> int | None | str:
        """:meth:`run` through the fork server (the very sandbox, without starting bubblewrap and two
        launchers): the returncode, None on timeout, or "no server" where there is none or it is
        still importing (bubblewrap is quicker then)."""
        server = fork_server(self.pythonpath, self.preload) if self.isolation.kernels == KernelStart.FORK else None
        if server is None or not server.ready():
            return "no server"
        status_r, status_w = os.pipe()
        try:
            try:
                proc = ForkedProcess(*server.spawn(self.fork_request(argv, cwd, mode="exec",
                                                                     fds=("stdout", "stderr", "status")),
                                                   [out.fileno(), err.fileno(), status_w]))
            except ForkServerError as e:
                logging.getLogger(__name__).warning("%s; running it under bubblewrap instead", e)
                return "no server"
            finally:
                os.close(status_w)
            exited = self.wait_within(proc.wait, timeout, wall_s)
            proc.close()   # kills it if it is still running: its namespaces go with it
            if not exited:
                return None
            code = os.read(status_r, 64).strip()
            return int(code) if code.lstrip(b"-").isdigit() else -signal.SIGKILL   # killed before it could say
        finally:
            os.close(status_r)


_TICKS = os.sysconf("SC_CLK_TCK")


def uid_cpu_seconds(uid: int) -> float:
    """CPU seconds of the live processes whose real uid is ``uid``, with the children they reaped
    (utime, stime, cutime and cstime of /proc/<pid>/stat)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])
        except (OSError, ValueError, IndexError):
            continue
    return total / _TICKS


def _owned_by(pid: int, uid: int) -> bool:
    try:
        return os.stat(f"/proc/{pid}").st_uid == uid
    except OSError:
        return False


def kill_uid(uid: int, wait_s: float = 5.0) -> None:
    """SIGKILL every process whose real uid is ``uid`` (the sandbox's throwaway uid), until none is left."""
    deadline = time.monotonic() + wait_s
    attempt = 0
    while time.monotonic() < deadline:
        attempt += 1
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            line = next((x for x in status.splitlines() if x.startswith("Uid:")), "")
            if line.split()[1:2] == [str(uid)]:
                found = True
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass
        if not found:
            return
        backoff(attempt)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.kill()
    proc.wait()


def _head(path: Path, limit: int) -> str:
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    text = data[:limit].decode("utf-8", "replace")
    return text + ("\n[output truncated]" if len(data) > limit else "")

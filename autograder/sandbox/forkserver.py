"""The grader's side of the kernel fork server (``_zygote.py``): start it once, ask it for kernels.

A kernel started the ordinary way is a fresh Python that imports ipykernel, then the
notebook's first cells import numpy, matplotlib, ipywidgets and the course library: about a
second of CPU per submission before any of the learner's work. The fork server imports those
once per batch and forks each kernel from itself into a sandbox of its own (new namespaces,
the submission's cgroups, tmpfs, throwaway uid and rlimits: ``_zygote.py`` lists every step).

One server serves a process and every process forked from it after it started (the batch's
worker processes): each process opens its own connection to the server's socket, and the
kernels forked for a connection are killed when it closes (a worker that dies takes its
kernels with it). The server dies with the process that started it.

This module knows nothing of sandboxes: :class:`autograder.sandbox.box.Sandbox` builds the requests.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ZYGOTE = Path(__file__).resolve().with_name("_zygote.py")
#: What every grading kernel imports: ipykernel itself, then what notebooks' cells commonly import
#: (an assignment adds its own: :func:`autograder.sandbox.servers.fork_server`'s ``preload``). A module
#: here costs nothing per submission; one that is missing is imported by the kernel that needs it.
PRELOAD = (
    # ipykernel, and what it imports as a kernel starts (its debugger imports debugpy: 0.08 s)
    "ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.zmqshell", "ipykernel.comm", "ipykernel.debugger",
    "IPython.core.completer", "IPython.core.completerlib", "IPython.core.debugger", "IPython.core.display",
    "IPython.core.oinspect", "IPython.extensions.storemagic", "IPython.utils.wildcard", "tornado.gen",
    "tornado.locks", "tornado.queues", "tornado.platform.asyncio", "pdb", "faulthandler", "zmq.utils.garbage",
    # what the notebook's cells import (not matplotlib_inline: importing it in a kernel hooks it into IPython)
    "IPython.core.magics.execution", "IPython.core.magics.pylab", "IPython.core.pylabtools",
    "numpy", "matplotlib", "matplotlib.pyplot", "matplotlib.figure", "matplotlib.backends.backend_agg",
    "PIL.PngImagePlugin", "PIL.JpegImagePlugin", "PIL.GifImagePlugin", "PIL.BmpImagePlugin", "ipywidgets")
READY_TIMEOUT_S = 60


class ForkServerError(RuntimeError):
    """The fork server could not start, or could not fork a kernel."""


class ForkServer:
    """A running ``_zygote.py`` and this process's connection to it."""

    def __init__(self, env: dict[str, str], preload: tuple[str, ...] = PRELOAD, folder: Path | None = None,
                 python: str = sys.executable):
        """Start the server with ``env`` (a kernel's environment, but its own folders) in ``folder``
        (a private, root-only folder it may keep; made and removed here when None). It imports in
        the background; the first :meth:`spawn` waits until it serves."""
        self.owner = os.getpid()
        self._own_folder = folder is None
        self.folder = Path(folder or tempfile.mkdtemp(prefix=f"cg-zygote-{os.getpid()}-"))
        os.chmod(self.folder, 0o700)
        self.socket_path = self.folder / "zygote.sock"
        self._lock = threading.Lock()
        self._ready = False
        self._ready_lock = threading.Lock()   # one reader of its "ready" line: see ready()
        self._conn: socket.socket | None = None
        self._conn_pid = 0
        self.log_path = self.folder / "zygote.log"
        # It imports in the background: the first request waits for it (the socket is bound first).
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [python, "-P", "-s", str(ZYGOTE), str(self.socket_path), *preload], env=env,
                cwd=self.folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, start_new_session=True,
                preexec_fn=_die_with_parent if threading.current_thread() is threading.main_thread() else None)

    # ---- requests
    def spawn(self, request: dict, fds: list[int]) -> tuple[int, int]:
        """Fork one sandboxed program (``_zygote.py``'s request, its file descriptors ``fds`` in the
        order of ``request["fds"]``); returns (the monitor's pid, a pidfd of it)."""
        data = json.dumps(request).encode()
        with self._lock:
            conn = self._connection()
            try:
                socket.send_fds(conn, [data], list(fds))
                reply, fds, _, _ = socket.recv_fds(conn, 65536, 1)
            except OSError as e:
                self._drop_connection()
                raise ForkServerError(f"the kernel fork server is gone ({e}): {self.log_tail()}") from None
        if not reply:
            self._drop_connection()
            raise ForkServerError(f"the kernel fork server closed the connection: {self.log_tail()}")
        answer = json.loads(reply)
        if "error" in answer:
            for fd in fds:
                os.close(fd)
            raise ForkServerError(answer["error"])
        return int(answer["pid"]), fds[0]

    def ready(self) -> bool:
        """Has it finished its imports? (Only its starter can tell; other processes take it as ready:
        their requests wait.)"""
        if self._ready or os.getpid() != self.owner:
            return True
        # One thread at a time: two threads (the lab check's two sandboxes at once) both saw the pipe readable,
        # one read the line, and the other's readline() waited forever for a second line that never comes.
        with self._ready_lock:
            if self._ready:
                return True
            try:
                if select.select([self.proc.stdout], [], [], 0)[0]:
                    self._ready = self.proc.stdout.readline().strip() == b"ready"
            except (OSError, ValueError):
                pass
            return self._ready

    def alive(self) -> bool:
        return self.proc.poll() is None if os.getpid() == self.owner else self.socket_path.exists()

    def _connection(self) -> socket.socket:
        if self._conn is None or self._conn_pid != os.getpid():
            if self._conn is not None and self._conn_pid != os.getpid():
                self._conn.detach()   # the parent's connection, inherited by fork: not ours to use or close
                self._conn = None
            deadline = time.monotonic() + READY_TIMEOUT_S
            while True:   # the socket appears once the server has started (its imports come after)
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                try:
                    conn.connect(str(self.socket_path))
                    break
                except OSError as e:
                    conn.close()
                    if time.monotonic() > deadline or (os.getpid() == self.owner and self.proc.poll() is not None):
                        raise ForkServerError(f"the kernel fork server did not start ({e}): "
                                              f"{self.log_tail() or 'no output'}") from None
                    time.sleep(0.02)
            conn.settimeout(READY_TIMEOUT_S + 60)   # a first request waits for the server's imports
            self._conn, self._conn_pid = conn, os.getpid()
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None and self._conn_pid == os.getpid():
            self._conn.close()
        self._conn = None

    # ---- the end
    def close(self) -> None:
        """Stop the server (it kills the kernels it forked) and remove its folder; only its starter does."""
        if os.getpid() != self.owner:
            self._drop_connection()
            return
        try:
            with self._lock:
                conn = self._connection()
                conn.send(b'{"op": "exit"}')
                conn.settimeout(5)
                conn.recv(64)
        except OSError:
            pass
        self._drop_connection()
        self._stop()

    def _stop(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode("utf-8", "replace").strip()
        except OSError:
            return ""


def _die_with_parent() -> None:
    import ctypes
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG


class ForkedProcess:
    """A program the fork server forked for us, known by a pidfd (no pid can be reused under it)."""

    def __init__(self, pid: int, pidfd: int):
        self.pid, self.pidfd = pid, pidfd

    def alive(self) -> bool:
        if self.pidfd < 0:
            return False
        return not select.select([self.pidfd], [], [], 0)[0]   # readable once it exited

    def kill(self) -> None:
        if self.pidfd >= 0:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except OSError:
                pass

    def wait(self, timeout: float) -> bool:
        """True once it has exited (within ``timeout`` seconds)."""
        if self.pidfd < 0:
            return True
        return bool(select.select([self.pidfd], [], [], timeout)[0])

    def close(self) -> None:
        if self.pidfd >= 0:
            self.kill()
            self.wait(5)
            os.close(self.pidfd)
            self.pidfd = -1

"""This process's kernel fork servers (:mod:`autograder.sandbox.forkserver`): one per kernel
environment (its PYTHONPATH and what it preloads), started on first use, stopped with the process.

Worker processes forked after a server started share it: each opens its own connection.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import threading
from pathlib import Path

from .forkserver import PRELOAD, ForkServer, ForkServerError
from .isolation import KERNELS_ENV, KernelStart
from .kernel_env import kernel_env, seed_matplotlib_cache
from .scratch import scratch_dir

_servers: dict[tuple[str, tuple[str, ...], str], ForkServer | None] = {}
_servers_lock = threading.Lock()


def fork_server(pythonpath: str, preload: tuple[str, ...] = (), python: str = sys.executable) -> ForkServer | None:
    """The kernel fork server of this process (or of the process that forked this one) for kernels
    with this PYTHONPATH, which imports :data:`~autograder.sandbox.forkserver.PRELOAD` and
    ``preload`` (what the assignment's notebooks import), started on first use; None when it
    cannot start (kernels are then started fresh). ``python``: the kernels' Python (the course's, or ours)."""
    key = (pythonpath, tuple(preload), python)
    with _servers_lock:
        if key in _servers:
            server = _servers[key]
            if server is None or server.alive():
                return server
        folder = scratch_dir("zygote")
        try:
            server = ForkServer(fork_server_env(folder, pythonpath, python), preload=PRELOAD + tuple(preload),
                                folder=folder, python=python)
        except (ForkServerError, OSError) as e:
            shutil.rmtree(folder, ignore_errors=True)
            logging.getLogger(__name__).warning("%s; kernels start as fresh Pythons instead", e)
            server = None
        if not _servers:
            atexit.register(stop_fork_servers)
        _servers[key] = server
        return server


def fork_server_early(pythonpath: str, preload: tuple[str, ...] = (), python: str = sys.executable) -> None:
    """Start the fork server's imports now, before the probe has said whether kernels will be
    forked (about 0.7 s of imports, which then overlap the probe and the side checks' preparation),
    where a fork server can run at all: as root, with bubblewrap installed, and not ruled out by
    ``COURSE_GRADE_KERNELS=exec``. Whoever calls it stops it again when the probe says "exec"."""
    if os.geteuid() == 0 and shutil.which("bwrap") is not None \
            and os.environ.get(KERNELS_ENV, "auto") != KernelStart.EXEC:
        fork_server(pythonpath, preload, python)


def stop_fork_servers() -> None:
    """Stop the fork servers this process started (their kernels with them) and remove their folders."""
    with _servers_lock:
        for key, server in list(_servers.items()):
            if server is not None:
                server.close()
                if server.owner == os.getpid():
                    shutil.rmtree(server.folder, ignore_errors=True)
            del _servers[key]


def fork_server_env(folder: Path, pythonpath: str, python: str = sys.executable) -> dict[str, str]:
    """The fork server's environment: a kernel's (its imports see what a kernel's would), with
    folders of its own in ``folder`` (root only) and matplotlib's font list seeded there."""
    mpl = folder / "matplotlib"
    seed_matplotlib_cache(mpl)
    mpl.mkdir(exist_ok=True)
    env = kernel_env(home=folder, tmpdir=folder, ipython_dir=folder / "ipython", mpl_dir=mpl, pythonpath=pythonpath,
                     python=python)
    # ipykernel sets this in every kernel; matplotlib reads it when it is imported
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    return env

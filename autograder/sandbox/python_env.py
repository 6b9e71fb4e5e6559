"""The Python a sandbox's kernels run: the grader's own, or the course's (``--python PATH``), and what of it the
sandbox must show.

A course's Python (a virtual environment, a conda environment) runs the learners' notebooks as they run
them at home; the grader's ``.venv`` then is not on their ``sys.path`` at all. The sandbox shows its
folders read-only, as it shows the grader's Python (:func:`autograder.sandbox.mounts.mount_plan`): its
prefix, its base installation, and every folder on its ``sys.path`` (site-packages, and what their
``.pth`` files add).

>>> env = grader_python()
>>> env.executable == sys.executable and sys.prefix in env.dirs
True
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass

from ..errors import AutograderError

#: What the Python itself reports (run with -I: no environment, no user site, no current folder).
_REPORT = ("import json, os, sys\n"
           "print(json.dumps({'prefix': sys.prefix, 'base_prefix': sys.base_prefix, 'version': sys.version.split()[0],\n"
           "                  'path': [p for p in sys.path if p and os.path.isdir(p)]}))\n")


@dataclass(frozen=True)
class PythonEnv:
    """A Python installation the sandbox's kernels may run."""

    executable: str
    """Its interpreter, an absolute path (not resolved: a venv's ``bin/python`` is a link)."""
    dirs: tuple[str, ...]
    """The folders it needs, shown read-only in the sandbox."""
    version: str = ""
    """``3.11.7``: what the report names."""


def grader_python() -> PythonEnv:
    """The grader's own Python (what kernels run without ``--python``)."""
    import site

    dirs = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    try:
        dirs.update(site.getsitepackages())
    except Exception:  # pragma: no cover - unusual site modules
        pass
    return PythonEnv(sys.executable, tuple(sorted(d for d in dirs if os.path.isdir(d))), sys.version.split()[0])


@functools.lru_cache(maxsize=8)
def course_python(path: str) -> PythonEnv:
    """The Python at ``path`` (``--python``), asked where it lives; AutograderError in one line if it cannot run."""
    executable = os.path.abspath(os.path.expanduser(path))
    if not (os.path.isfile(executable) and os.access(executable, os.X_OK)):
        raise AutograderError(f"--python {path}: no Python there (not an executable file); give the course's "
                              f"interpreter, e.g. /opt/course/.venv/bin/python")
    try:
        proc = subprocess.run([executable, "-I", "-c", _REPORT], capture_output=True, text=True, timeout=60,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"})
        report = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
        raise AutograderError(f"--python {path} did not run as a Python ({type(e).__name__}); give the course's "
                              f"interpreter, e.g. /opt/course/.venv/bin/python") from None
    dirs = {report["prefix"], report["base_prefix"], os.path.dirname(os.path.realpath(executable)),
            *report["path"]}
    dirs |= {os.path.realpath(d) for d in list(dirs)}
    return PythonEnv(executable, tuple(sorted(d for d in dirs if os.path.isdir(d))), str(report["version"]))

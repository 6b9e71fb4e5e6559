"""``--requirements FILE``: the course's environment, built once from its requirements and kept.

The environment is a virtual environment of the grader's base Python (``python -m venv``, no packages of
the grader's ``.venv``), with FILE installed by pip (``pip --python ENV install -r FILE``). It is kept in
``$COURSE_GRADE_CACHE/envs/<key>/`` (default ``~/.cache/course-grade``; with ``COURSE_GRADE_CACHE=off``, in
``RESULTS_DIR/.envs/``), where the key is the SHA-256 of FILE's bytes and the base Python's version: the
same file is built once, an edited one again. A build that fails leaves nothing behind, and the batch is
refused in one line with pip's own last words. The notebooks then run in it as with ``--python`` (its
interpreter; see :mod:`autograder.sandbox.python_env`), so FILE must name ``ipykernel`` with the course's
packages.

>>> key = environment_key(b"numpy==2.1\\nipykernel\\n")
>>> len(key), key == environment_key(b"numpy==2.1\\nipykernel\\n"), key == environment_key(b"numpy\\nipykernel\\n")
(16, True, False)
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import AutograderError

#: The environment's marker, written last: a folder without it is a build that did not finish.
DONE = ".course-grade-built"
#: Seconds pip may take (a large scientific stack from PyPI takes minutes).
BUILD_TIMEOUT_S = 3600


def environment_key(requirements: bytes) -> str:
    """The cache key of an environment: FILE's bytes and the base Python's version."""
    return hashlib.sha256(sys.version.encode() + b"\0" + requirements).hexdigest()[:16]


def cache_folder(results_dir: Path) -> Path:
    """Where built environments are kept (see the module)."""
    setting = os.environ.get("COURSE_GRADE_CACHE")
    if setting == "off":
        return Path(results_dir) / ".envs"
    root = Path(setting) if setting else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "course-grade"
    return root / "envs"


def requirements_python(path: str | Path, results_dir: Path) -> str:
    """The interpreter of the environment built from the requirements file ``path`` (built now if it is not kept)."""
    path = Path(path)
    try:
        content = path.read_bytes()
    except OSError as e:
        raise AutograderError(f"--requirements {path}: cannot read it ({e.strerror or e}); give the course's "
                              f"requirements file (pip's format, one package a line)") from None
    folder = cache_folder(results_dir) / environment_key(content)
    python = folder / "bin" / "python"
    if (folder / DONE).is_file():
        return str(python)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        lock = open(folder.parent / f".{folder.name}.lock", "w")
    except OSError as e:
        raise AutograderError(f"--requirements: cannot keep the environment in {folder.parent} ({e.strerror or e}); "
                              f"set COURSE_GRADE_CACHE to a folder you can write") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # another batch building the same file: wait for it, then use it
        if (folder / DONE).is_file():
            return str(python)
        shutil.rmtree(folder, ignore_errors=True)
        print(f"course-grade: building the course's environment from {path} in {folder} (once)", file=sys.stderr)
        steps = ([sys.executable, "-m", "venv", "--without-pip", str(folder)],
                 [sys.executable, "-m", "pip", "--python", str(python), "install", "--disable-pip-version-check",
                  "--no-input", "-q", "-r", str(path.resolve())])
        for step in steps:
            try:
                proc = subprocess.run(step, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
                failed = proc.returncode != 0
                why = (proc.stderr or proc.stdout).strip().splitlines()[-1:] if failed else []
            except (OSError, subprocess.TimeoutExpired) as e:
                failed, why = True, [f"{type(e).__name__}: {e}"]
            if failed:
                shutil.rmtree(folder, ignore_errors=True)
                said = why[0][:300] if why else "no output"
                raise AutograderError(f"--requirements {path}: could not build the environment ({said}); fix the "
                                      f"file, or give a built one with --python PATH")
        (folder / DONE).write_text(str(path.resolve()) + "\n")
        os.chmod(folder, 0o755)   # the sandbox's throwaway user runs it
    return str(python)

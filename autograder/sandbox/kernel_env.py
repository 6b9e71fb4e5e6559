"""What a learner's kernel starts with: its whole environment, its $IPYTHONDIR and its matplotlib cache.

Nothing of the grader's environment passes; IPython's files come from a folder of the grader's,
read-only inside, so no file a learner adds (a startup file, a config) runs in a fresh kernel.

>>> env = kernel_env(home=Path("/h"), tmpdir="/tmp", ipython_dir=Path("/i"), mpl_dir=Path("/m"), pythonpath="/r")
>>> env["HOME"], env["NBGRADER_EXECUTION"], env["PYTHONNOUSERSITE"]
('/h', 'autograde', '1')
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def kernel_env(*, home: Path, tmpdir: Path | str, ipython_dir: Path, mpl_dir: Path, pythonpath: str,
               python: str = sys.executable) -> dict[str, str]:
    """The whole environment of a learner's kernel (nothing of the grader's passes): the kernel's
    Python (``python``: the venv's, or the course's) first, no user site, one thread per BLAS, and
    NBGRADER_EXECUTION as under `nbgrader autograde` (notebooks may skip demonstrations that earn no points)."""
    venv_bin = os.path.dirname(python)
    return {"PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(tmpdir),
            "PYTHONPATH": pythonpath, "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1",
            "IPYTHONDIR": str(ipython_dir), "MPLCONFIGDIR": str(mpl_dir),
            "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "LANG": "C.UTF-8",
            "NBGRADER_EXECUTION": "autograde"}


def make_ipython_dir(path: Path) -> None:
    """$IPYTHONDIR for the sandbox's kernels: the grader's, with the folders IPython wants, and
    nothing a learner could add (a startup file or a config that kills every fresh kernel)."""
    profile = path / "profile_default"
    for d in (profile / "startup", profile / "log", profile / "db", profile / "security", profile / "pid"):
        d.mkdir(parents=True, exist_ok=True)
    readme = profile / "startup" / "README"
    if not readme.exists():
        readme.write_text("This IPython profile belongs to the grader; learner files cannot be added here.\n")
    for d in (path, profile, profile / "startup", profile / "log", profile / "db"):
        os.chmod(d, 0o755)
    for d in (profile / "security", profile / "pid"):   # the modes IPython checks (it never writes there)
        os.chmod(d, 0o700)


def seed_matplotlib_cache(target: Path) -> None:
    """Copy the grader's matplotlib font list into a fresh $HOME, sparing each kernel a font scan.

    The list names system fonts by path; /usr is the same inside the sandbox.
    """
    source = Path(os.environ.get("MPLCONFIGDIR") or Path.home() / ".cache" / "matplotlib")
    lists = sorted(source.glob("fontlist-v*.json")) if source.is_dir() else []
    if lists:
        target.mkdir(parents=True, exist_ok=True)
        for path in lists:
            shutil.copyfile(path, target / path.name)

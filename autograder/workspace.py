"""The learner's workspace: the released notebook and lab file, opened in JupyterLab (``make lab``).

The workspace is made from the **release** (``course-grade release``: solutions and hidden tests
removed), never from the instructor source, and it is made only once: files a learner already has
are never overwritten, so ``make lab`` can be rerun safely. Layout::

    learner-workspace/
        l14-04-model-memory/
            l14-04-model-memory.ipynb   # the student notebook
            l14-04-model-memory.py      # the lab file, beside the notebook (find_lab_file looks here)

Then JupyterLab starts there, bound to 127.0.0.1, with this Python (so the kernel is this venv's
and ``course_lib`` imports)::

    python -m autograder.workspace --serve [--dir learner-workspace] [--port 8888] [--no-browser]

The tests use :func:`lab_argv` and :func:`server_env` too, so they start the server ``make lab`` starts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENT = "l14-04-model-memory"
NOTEBOOK_NAME = f"{ASSIGNMENT}.ipynb"
LAB_NAME = f"{ASSIGNMENT}.py"
DEFAULT_DIR = REPO / "learner-workspace"


class WorkspaceError(RuntimeError):
    """The workspace could not be made (the message says which step and what to run)."""


def release_to(out_dir: Path) -> Path:
    """Run ``course-grade release --out out_dir`` (its Python API); return the released assignment folder."""
    from .errors import AutograderError
    from .release import main as release

    try:
        folder = Path(release(out=out_dir).folder)
    except AutograderError as exc:
        raise WorkspaceError(f"`course-grade release` failed: {exc}") from exc
    for name in (NOTEBOOK_NAME, LAB_NAME):
        if not (folder / name).is_file():
            raise WorkspaceError(f"the release in {folder} has no {name}; the workspace needs the notebook "
                                 f"and the lab file beside it")
    return folder


def build_workspace(root: str | Path = DEFAULT_DIR, *, quiet: bool = False) -> Path:
    """Make ``root/l14-04-model-memory/`` from a fresh release, keeping every file already there.

    Returns the assignment folder. A file the learner already has (edited or not) is left alone;
    only missing files are copied in, so a deleted lab file comes back but work is never lost.
    """
    folder = Path(root).resolve() / ASSIGNMENT
    say = (lambda *_: None) if quiet else (lambda msg: print(msg, file=sys.stderr))
    if (folder / NOTEBOOK_NAME).is_file() and (folder / LAB_NAME).is_file():
        say(f"workspace: keeping your work in {folder}")
        return folder
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        released = release_to(Path(tmp))
        folder.mkdir(parents=True, exist_ok=True)
        for src in sorted(released.rglob("*")):
            dest = folder / src.relative_to(released)
            if src.is_dir():
                dest.mkdir(exist_ok=True)
            elif dest.exists():
                say(f"workspace: keeping your {dest.relative_to(folder)}")
            else:
                shutil.copy2(src, dest)
                say(f"workspace: added {dest}")
    return folder


def server_env(base: dict | None = None) -> dict:
    """The environment for the server and its kernels: the repository first on PYTHONPATH.

    The kernel is this interpreter (ipykernel's ``python3`` spec runs ``sys.executable``), where
    course_lib is installed; the PYTHONPATH entry keeps it importable even if a user-level
    kernelspec points elsewhere.
    """
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def lab_argv(root: str | Path, *, open_path: str | None = None, port: int | None = None,
             token: str | None = None, open_browser: bool = False, extra: list[str] | None = None) -> list[str]:
    """The JupyterLab command line: this Python, 127.0.0.1 only, rooted at ``root``.

    ``token=None`` keeps Jupyter's own random token (printed in the URL it logs).
    Announcements and update checks are off: they would call out to the internet.
    """
    argv = [sys.executable, "-m", "jupyterlab",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.root_dir={Path(root).resolve()}",
            f"--ServerApp.open_browser={open_browser}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly"]
    if port is not None:
        argv += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if token is not None:
        argv.append(f"--IdentityProvider.token={token}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--ServerApp.allow_root=True")   # containers and course VMs often run as root
    argv += extra or []
    if open_path:
        argv.append(open_path)          # JupyterLab opens this file (relative to root) on start
    return argv


def _has_display() -> bool:
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def serve(root: str | Path = DEFAULT_DIR, *, port: int | None = None, open_browser: bool | None = None) -> None:
    """Build the workspace if needed, then replace this process with JupyterLab on it."""
    folder = build_workspace(root)
    root = Path(root).resolve()
    argv = lab_argv(root, open_path=f"{folder.name}/{NOTEBOOK_NAME}", port=port,
                    open_browser=_has_display() if open_browser is None else open_browser)
    print(f"workspace: starting JupyterLab on 127.0.0.1 in {root}; open the http://127.0.0.1:...?token=... "
          f"URL it prints below. Stop it with Ctrl-C.", file=sys.stderr, flush=True)
    os.chdir(root)
    os.execve(argv[0], argv, server_env())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.workspace", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=str(DEFAULT_DIR), help="workspace folder (default: %(default)s)")
    parser.add_argument("--serve", action="store_true", help="start JupyterLab on the workspace (what `make lab` runs)")
    parser.add_argument("--port", type=int, default=None, help="port for --serve (default: Jupyter's, 8888 or the next free one)")
    browser = parser.add_mutually_exclusive_group()
    browser.add_argument("--browser", dest="open_browser", action="store_true", default=None,
                         help="open a web browser (default: only when a display is available)")
    browser.add_argument("--no-browser", dest="open_browser", action="store_false")
    args = parser.parse_args(argv)
    try:
        if args.serve:
            serve(args.dir, port=args.port, open_browser=args.open_browser)
        else:
            print(build_workspace(args.dir))
    except WorkspaceError as exc:
        print(f"workspace: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

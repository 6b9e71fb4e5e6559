"""The learner's workspace: the release, in a Python of its own, opened in JupyterLab (``make lab``).

The workspace is made from the **release** (``course-grade release``: solutions and hidden tests
removed), never from the instructor source, and files a learner already has are never
overwritten, so ``make lab`` can be rerun safely. It gets its own virtual environment,
installed from the release's ``requirements.txt`` (:mod:`autograder.learner_env`): the course
library and JupyterLab, no grader, so nothing a learner runs there can import ``autograder``.
In that JupyterLab nbgrader's instructor tools are switched off and Validate stays. Layout::

    learner-workspace/
        .venv/                          # the learner's Python (course_lib, JupyterLab; no grader)
        requirements.txt, l14_course_lib-*.whl
        l14-04-model-memory/
            l14-04-model-memory.ipynb   # the student notebook
            l14-04-model-memory.py      # the lab file, beside the notebook (find_lab_file looks here)

Then JupyterLab starts there, bound to 127.0.0.1, and prints a URL that opens the notebook::

    python -m autograder.workspace --serve [--dir learner-workspace] [--port 8888] [--no-browser]

The tests use :func:`lab_argv` and :func:`server_env` too, so they start the server ``make lab`` starts.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

from .assignment import default_assignment
from .errors import AutograderError
from .learner_env import write_learner_install
from .release import main as release

REPO = Path(__file__).resolve().parents[1]
_LESSON = default_assignment()   # the installed lesson: its notebook, and the file released beside it
ASSIGNMENT, NOTEBOOK_NAME, LAB_NAME = _LESSON.name, _LESSON.notebook_name, _LESSON.file_names[0]
DEFAULT_DIR = REPO / "learner-workspace"
ENV_DIR = ".venv"
STAMP = ".installed-wheel"


class WorkspaceError(RuntimeError):
    """The workspace could not be made (the message says which step and what to run)."""


def release_to(out_dir: Path) -> Path:
    """Run ``course-grade release --out out_dir`` (its Python API); return the released assignment folder."""
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
    The release's learner install (requirements.txt and its wheel) is refreshed in ``root``.
    """
    root = Path(root).resolve()
    folder = root / ASSIGNMENT
    say = (lambda *_: None) if quiet else (lambda msg: print(msg, file=sys.stderr))
    if (folder / NOTEBOOK_NAME).is_file() and (folder / LAB_NAME).is_file():
        # Nothing of the learner's to add: only the learner install is refreshed (a zip of course_lib,
        # no nbgrader run), so a newer course library reaches the workspace's Python on the next start.
        write_learner_install(root)
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
        for src in sorted(released.parent.iterdir()):   # requirements.txt and the wheel it names
            if src.is_file():
                shutil.copy2(src, root / src.name)
    return folder


def learner_python(root: str | Path = DEFAULT_DIR) -> Path:
    return Path(root).resolve() / ENV_DIR / "bin" / "python"


def ensure_learner_env(root: str | Path = DEFAULT_DIR, *, quiet: bool = False, torch: str | None = None,
                       system_site_packages: bool = False) -> Path:
    """The workspace's own Python, made from ``root/requirements.txt`` on first use; returns it.

    When the release's wheel changed since (a newer course library), only the wheel is reinstalled.
    ``torch``: a pip requirement (``make lab`` passes its pinned CPU build) installed when the
    learner's Python has no torch, so the measurement cells run; ``system_site_packages``: see
    the base interpreter's packages instead (a user whose Python already has a CUDA torch).
    """
    root = Path(root).resolve()
    requirements = root / "requirements.txt"
    if not requirements.is_file():
        raise WorkspaceError(f"{requirements} is missing: build the workspace first (make lab)")
    wheels = sorted(root.glob("*.whl"))
    wheel_sha = hashlib.sha256(b"".join(w.read_bytes() for w in wheels)).hexdigest()
    python, stamp = learner_python(root), root / ENV_DIR / STAMP
    out = subprocess.DEVNULL if quiet else None
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    if not python.is_file():
        if not quiet:
            print(f"workspace: creating the learner's Python in {root / ENV_DIR} (first run: a minute or two)",
                  file=sys.stderr, flush=True)
        venv.EnvBuilder(with_pip=True, clear=True, system_site_packages=system_site_packages).create(root / ENV_DIR)
        step = pip + ["install", "-q", "-r", str(requirements)]
    elif not stamp.is_file() or stamp.read_text() != wheel_sha:
        step = pip + ["install", "-q", "--no-deps", "--force-reinstall", *map(str, wheels)]
    else:
        step = None
    if step is None and not torch:
        return python
    if step is not None:
        _pip(step, root, out)
        stamp.write_text(wheel_sha)
    if torch and subprocess.run([str(python), "-c", "import torch"], capture_output=True).returncode != 0:
        if not quiet:
            print(f"workspace: adding {torch} to the learner's Python (for the measurement cells)", file=sys.stderr,
                  flush=True)
        _pip(pip + ["install", "-q", torch], root, out)
    return python


def _pip(step: list[str], root: Path, out) -> None:
    proc = subprocess.run(step, cwd=root, stdout=out, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise WorkspaceError(f"installing the learner environment failed ({' '.join(step[3:6])}...): "
                             f"{(proc.stderr.strip().splitlines() or ['no output'])[-1]}")


def server_env(base: dict | None = None, python: str | Path | None = None) -> dict:
    """The environment for the learner's server and its kernels.

    No PYTHONPATH at all (the checkout holds the grader; the learner's Python has course_lib
    installed), and the learner's venv first on PATH.
    """
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONPATH", None)
    if python is not None:
        env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
        env["VIRTUAL_ENV"] = str(Path(python).parents[1])
    return env


def lab_argv(root: str | Path, python: str | Path, *, open_path: str | None = None, port: int | None = None,
             token: str | None = None, open_browser: bool = False, extra: list[str] | None = None) -> list[str]:
    """The JupyterLab command line: the learner's Python, 127.0.0.1 only, rooted at ``root``.

    ``open_path`` (relative to root) is where the printed URL and the browser land.
    ``token=None`` keeps Jupyter's own random token (printed in that URL). Announcements and
    update checks are off: they would call out to the internet.
    """
    argv = [str(python), "-m", "jupyterlab",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.root_dir={Path(root).resolve()}",
            f"--ServerApp.open_browser={open_browser}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly"]
    if open_path:
        argv.append(f"--ServerApp.default_url=/lab/tree/{open_path}")
    if port is not None:
        argv += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if token is not None:
        argv.append(f"--IdentityProvider.token={token}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--ServerApp.allow_root=True")   # containers and course VMs often run as root
    return argv + (extra or [])


def _has_display() -> bool:
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def serve(root: str | Path = DEFAULT_DIR, *, port: int | None = None, open_browser: bool | None = None,
          torch: str | None = None, system_site_packages: bool = False) -> None:
    """Build the workspace and its Python if needed, then replace this process with JupyterLab on it."""
    folder = build_workspace(root)
    python = ensure_learner_env(root, torch=torch, system_site_packages=system_site_packages)
    root = Path(root).resolve()
    argv = lab_argv(root, python, open_path=f"{folder.name}/{NOTEBOOK_NAME}", port=port,
                    open_browser=_has_display() if open_browser is None else open_browser)
    print(f"workspace: starting JupyterLab on 127.0.0.1 in {root}; open the http://127.0.0.1:.../lab/tree/"
          f"{folder.name}/{NOTEBOOK_NAME}?token=... URL it prints below (it opens the notebook). "
          f"Stop it with Ctrl-C. To hand in, submit the folder {folder} (notebook and lab file).",
          file=sys.stderr, flush=True)
    os.chdir(root)
    os.execve(argv[0], argv, server_env(python=python))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.workspace", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=str(DEFAULT_DIR), help="workspace folder (default: %(default)s)")
    parser.add_argument("--serve", action="store_true", help="start JupyterLab on the workspace (what `make lab` runs)")
    parser.add_argument("--port", type=int, default=None, help="port for --serve (default: Jupyter's, 8888 or the next free one)")
    browser = parser.add_mutually_exclusive_group()
    browser.add_argument("--browser", dest="open_browser", action="store_true", default=None,
                         help="open a web browser (default: only when a display is available)")
    browser.add_argument("--no-browser", dest="open_browser", action="store_false")
    parser.add_argument("--torch", metavar="REQUIREMENT", default=None,
                        help="install this torch into the learner's Python when it has none (make lab: its pinned CPU build)")
    parser.add_argument("--system-site-packages", action="store_true",
                        help="let the learner's Python see the base interpreter's packages (a CUDA torch already there)")
    args = parser.parse_args(argv)
    try:
        if args.serve:
            serve(args.dir, port=args.port, open_browser=args.open_browser, torch=args.torch,
                  system_site_packages=args.system_site_packages)
        else:
            folder = build_workspace(args.dir)
            ensure_learner_env(args.dir, torch=args.torch, system_site_packages=args.system_site_packages)
            print(folder)
    except WorkspaceError as exc:
        print(f"workspace: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

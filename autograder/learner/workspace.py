"""The learner's workspace: the release, in a Python of its own, opened in JupyterLab (``make lab``).

The workspace is made from the **release** (``course-grade release``: solutions and hidden tests
removed), never from the instructor source, and files a learner already has are never
overwritten, so ``make lab`` can be rerun safely. It gets its own virtual environment,
installed from the release's ``requirements.txt`` (:mod:`autograder.learner.learner_env`): the course
library and JupyterLab, no grader, so nothing a learner runs there can import ``autograder``.
In that JupyterLab nbgrader's instructor tools are switched off and Validate stays. Layout::

    learner-workspace/
        .venv/                          # the learner's Python (course_lib, JupyterLab; no grader)
            etc/jupyter/jupyter_server_config.json, etc/course-terminal/bashrc
                                        # its terminal: bash, the learner's start-up files, then .venv/bin first
        .ipynb_checkpoints/             # JupyterLab's checkpoints, outside the folder handed in
        requirements.txt, l14_course_lib-*.whl
        l14-04-model-memory/            # the folder to hand in
            l14-04-model-memory.ipynb   # the lesson notebook
            l14-04-runtime-lab.ipynb    # the runtime-lab notebook
            l14-04-model-memory.py      # the lab file, beside the notebook (find_lab_file looks here)

``make lab`` builds nothing else: it runs this module with the machine's ``python3`` (the
standard library is enough until the learner's Python exists), in four steps it prints as it goes:

1. the learner install: a wheel of ``course_lib`` and ``requirements.txt`` (a zip, no build tool);
2. the learner's Python from them, with the pinned CPU torch in the same pip run (or the base
   interpreter's own torch through ``--system-site-packages``): one copy of torch, no dev tools;
3. the release, by nbgrader, run in that Python with this checkout on its path for that one
   process only (the grader is never installed there), copied in where files are missing;
4. JupyterLab there, bound to 127.0.0.1, with a URL that opens the notebook, and a terminal whose
   ``python3`` is the workspace's (:func:`write_terminal_config`)::

    python3 -m autograder.learner.workspace --serve [--dir learner-workspace] [--port 8888] [--no-browser]

JupyterLab's own ``LabApp.default_url`` is what it prints and opens (it overrides
``ServerApp.default_url``), so it is set to the notebook's ``/lab/tree/...`` URL. The tests use
:func:`lab_argv` and :func:`server_env` too, so they start the server ``make lab`` starts.

>>> "--LabApp.default_url=/lab/tree/a/b.ipynb" in lab_argv("/ws", "/ws/.venv/bin/python", open_path="a/b.ipynb")
True
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

from ..source.assignment import default_assignment
from ..errors import AutograderError
from .learner_env import write_learner_install

REPO = Path(__file__).resolve().parents[2]
_LESSON = default_assignment()   # the installed lesson: its notebook, and the file released beside it
ASSIGNMENT, NOTEBOOK_NAME, LAB_NAME = _LESSON.name, _LESSON.notebook_name, _LESSON.file_names[0]
#: Every notebook of the assignment (the first is the one the printed link opens).
NOTEBOOK_NAMES = _LESSON.notebook_names
DEFAULT_DIR = REPO / "learner-workspace"
ENV_DIR = ".venv"
STAMP = ".installed-wheel"
#: JupyterLab's checkpoints, in the workspace root: never inside the assignment folder a learner hands in.
CHECKPOINTS = ".ipynb_checkpoints"
#: What is never copied from a release into a workspace (nor travels with a hand-in).
NOT_COPIED = (CHECKPOINTS, "__pycache__")
#: The oldest Python requirements.txt installs on: nbgrader==0.9.6 (for Validate) has Requires-Python >=3.11.
MIN_PYTHON = (3, 11)


class WorkspaceError(RuntimeError):
    """The workspace could not be made (the message says which step and what to run)."""


def _say(quiet: bool, message: str) -> None:
    if not quiet:
        print(f"workspace: {message}", file=sys.stderr, flush=True)


def release_to(out_dir: Path, python: str | Path | None = None) -> Path:
    """Run ``course-grade release --out out_dir``; return the released assignment folder.

    ``python``: the interpreter to run it in (the learner's, which has nbgrader), with this
    checkout on its path for that process only; None: this process (its Python API).
    """
    if python is None:
        from .release import main as release
        try:
            folder = Path(release(out=out_dir).folder)
        except AutograderError as exc:
            raise WorkspaceError(f"`course-grade release` failed: {exc}") from exc
    else:
        code = ("import sys\nfrom autograder.errors import AutograderError\nfrom autograder.learner.release import main\n"
                "try:\n    print(main(out=sys.argv[1]).folder)\n"
                "except AutograderError as e:\n    sys.exit(f'`course-grade release` failed: {e}')\n")
        env = dict(os.environ, PYTHONPATH=str(REPO))
        proc = subprocess.run([str(python), "-c", code, str(out_dir)], cwd=REPO, env=env, capture_output=True,
                              text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise WorkspaceError(f"building the release in {python} failed: {last}")
        folder = Path(proc.stdout.strip().splitlines()[-1])
    for name in (*NOTEBOOK_NAMES, LAB_NAME):
        if not (folder / name).is_file():
            raise WorkspaceError(f"the release in {folder} has no {name}; the workspace needs the notebook "
                                 f"and the lab file beside it")
    return folder


def build_workspace(root: str | Path = DEFAULT_DIR, *, quiet: bool = False, python: str | Path | None = None) -> Path:
    """Make ``root/l14-04-model-memory/`` from a fresh release, keeping every file already there.

    Returns the assignment folder. A file the learner already has (edited or not) is left alone;
    only missing files are copied in, so a deleted lab file comes back but work is never lost.
    The learner install (requirements.txt and its wheel) is refreshed in ``root``. ``python``:
    the interpreter that runs the release (see :func:`release_to`).
    """
    root = Path(root).resolve()
    folder = root / ASSIGNMENT
    root.mkdir(parents=True, exist_ok=True)
    # A zip of course_lib (no nbgrader run), so a newer course library reaches the workspace's Python
    # on the next start even when the learner's files are all there.
    write_learner_install(root)
    if all((folder / name).is_file() for name in (*NOTEBOOK_NAMES, LAB_NAME)):
        _say(quiet, f"keeping your work in {folder}")
        return folder
    _say(quiet, "building the release (nbgrader generate_assignment: solutions and hidden tests removed)")
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        released = release_to(Path(tmp), python=python)
        folder.mkdir(parents=True, exist_ok=True)
        for src in sorted(released.rglob("*")):
            relative = src.relative_to(released)
            if any(part in NOT_COPIED for part in relative.parts):
                continue
            dest = folder / relative
            if src.is_dir():
                dest.mkdir(exist_ok=True)
            elif dest.exists():
                _say(quiet, f"keeping your {relative}")
            else:
                shutil.copy2(src, dest)
                _say(quiet, f"added {dest}")
    return folder


def learner_python(root: str | Path = DEFAULT_DIR) -> Path:
    return Path(root).resolve() / ENV_DIR / "bin" / "python"


def _has_torch(python: Path) -> bool:
    return subprocess.run([str(python), "-c", "import torch"], capture_output=True).returncode == 0


def ensure_learner_env(root: str | Path = DEFAULT_DIR, *, quiet: bool = False, torch: str | None = None,
                       system_site_packages: bool = False) -> Path:
    """The workspace's own Python, made from ``root/requirements.txt`` on first use; returns it.

    When the release's wheel changed since (a newer course library), only the wheel is reinstalled.
    ``torch``: a pip requirement (``make lab`` passes its pinned CPU build), installed with the
    rest in one pip run for a new Python, or on its own into one that has no torch, so the
    measurement cells run; ``system_site_packages``: see the base interpreter's packages instead
    (a user whose Python already has a CUDA torch).
    """
    root = Path(root).resolve()
    requirements = root / "requirements.txt"
    if not requirements.is_file():
        raise WorkspaceError(f"{requirements} is missing: build the workspace first (make lab)")
    wheels = sorted(root.glob("*.whl"))
    wheel_sha = hashlib.sha256(b"".join(w.read_bytes() for w in wheels)).hexdigest()
    python, stamp = learner_python(root), root / ENV_DIR / STAMP
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    if not python.is_file():
        _say(quiet, f"creating the learner's Python in {root / ENV_DIR}")
        venv.EnvBuilder(with_pip=True, clear=True, system_site_packages=system_site_packages).create(root / ENV_DIR)
        extra = [torch] if torch and not _has_torch(python) else []
        _say(quiet, f"installing requirements.txt (the course library, JupyterLab, nbgrader for Validate)"
                    f"{' and ' + torch + ' (CPU)' if extra else ''}: about a minute, once")
        _pip(pip + ["install", "-r", str(requirements), *extra], root, quiet)
        stamp.write_text(wheel_sha)
        return python
    if not stamp.is_file() or stamp.read_text() != wheel_sha:
        _say(quiet, "the course library changed: reinstalling its wheel")
        _pip(pip + ["install", "--no-deps", "--force-reinstall", *map(str, wheels)], root, quiet)
        stamp.write_text(wheel_sha)
    if torch and not _has_torch(python):
        _say(quiet, f"adding {torch} to the learner's Python (for the measurement cells)")
        _pip(pip + ["install", torch], root, quiet)
    return python


def _pip(step: list[str], root: Path, quiet: bool) -> None:
    """Run pip; say how many packages it installs and how long it took; one line on failure."""
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([*step, "--progress-bar", "off"], cwd=root, stdout=subprocess.PIPE, stderr=err,
                                text=True)
        for line in proc.stdout:
            if line.startswith("Installing collected packages:"):
                names = [n.strip() for n in line.split(":", 1)[1].split(",") if n.strip()]
                _say(quiet, f"  pip: unpacking {len(names)} packages ({', '.join(names[:4])}"
                            f"{', ...' if len(names) > 4 else ''})")
        proc.wait()
        err.seek(0)
        stderr = err.read()
    if proc.returncode != 0:
        errors = [line for line in stderr.strip().splitlines() if line.startswith("ERROR")] or \
                 stderr.strip().splitlines() or ["no output"]
        raise WorkspaceError(f"installing the learner environment failed ({' '.join(step[4:7])}...): {errors[-1]}")
    _say(quiet, f"  pip: done in {time.monotonic() - start:.0f} s")


#: JupyterLab's terminal start-up file, inside the workspace's Python (:func:`write_terminal_config`).
TERMINAL_RC = Path("etc") / "course-terminal" / "bashrc"
#: The server config of the workspace's Python: Jupyter reads ``{sys.prefix}/etc/jupyter/`` for any
#: server that Python runs (``make lab``, or the learner's own ``.venv/bin/jupyter lab``).
TERMINAL_CONFIG = Path("etc") / "jupyter" / "jupyter_server_config.json"
_RC_TEXT = """\
# JupyterLab's terminal in the course workspace (written by `make lab` at each start; edits are lost).
# First what a login bash reads: /etc/profile, then the first of ~/.bash_profile, ~/.bash_login and
# ~/.profile (Debian's and Ubuntu's ~/.profile read ~/.bashrc); ~/.bashrc when there is none of them.
if [ -r /etc/profile ]; then . /etc/profile; fi
if [ -r ~/.bash_profile ]; then . ~/.bash_profile
elif [ -r ~/.bash_login ]; then . ~/.bash_login
elif [ -r ~/.profile ]; then . ~/.profile
elif [ -r ~/.bashrc ]; then . ~/.bashrc
fi
# Then the workspace's Python first, whatever those put ahead of it (pyenv's shims, conda's base).
export VIRTUAL_ENV={venv}
export PATH="$VIRTUAL_ENV/bin:$PATH"
hash -r
"""


def write_terminal_config(root: str | Path = DEFAULT_DIR) -> Path | None:
    """Make JupyterLab's terminal run the workspace's Python, whatever the learner's shell start-up files do.

    The server starts with the workspace's ``.venv/bin`` first on PATH (:func:`server_env`), but the
    terminal's shell (``$SHELL -l`` by default: jupyter_server_terminals 0.5's ``app.py``) then reads
    start-up files that may put another Python first: ``pyenv init`` and ``conda init`` in ``~/.bashrc``
    do. So the workspace's own server config sets the terminal to ``bash --rcfile RC -i``, where RC
    reads the learner's start-up files as a login bash would and *then* puts ``.venv/bin`` first
    (terminado's ``shell_command``). Returns the config file, or ``None`` where there is no bash
    (Jupyter's own default shell stays, and any old config of ours is removed).

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> config = write_terminal_config(root)
    >>> json.loads(config.read_text())["ServerApp"]["terminado_settings"]["shell_command"][1:]  # doctest: +ELLIPSIS
    ['--rcfile', '.../.venv/etc/course-terminal/bashrc', '-i']
    """
    env = Path(root).resolve() / ENV_DIR
    config, rc = env / TERMINAL_CONFIG, env / TERMINAL_RC
    bash = shutil.which("bash") or ("/bin/bash" if os.access("/bin/bash", os.X_OK) else None)
    if bash is None or os.name == "nt":
        config.unlink(missing_ok=True)
        return None
    rc.parent.mkdir(parents=True, exist_ok=True)
    rc.write_text(_RC_TEXT.format(venv=shlex.quote(str(env))))
    config.parent.mkdir(parents=True, exist_ok=True)
    settings = {"ServerApp": {"terminado_settings": {"shell_command": [bash, "--rcfile", str(rc), "-i"]}}}
    config.write_text(json.dumps(settings, indent=2) + "\n")
    return config


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

    ``open_path`` (relative to root) is where the printed URL and the browser land: JupyterLab's
    own ``LabApp.default_url`` (it overrides ``ServerApp.default_url``, which is set too for a
    plain ``jupyter server``). ``token=None`` keeps Jupyter's own random token (printed in that
    URL). Checkpoints go to ``root/.ipynb_checkpoints``, outside the folder handed in.
    Announcements and update checks are off: they would call out to the internet.
    """
    root = Path(root).resolve()
    argv = [str(python), "-m", "jupyterlab",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.root_dir={root}",
            f"--ServerApp.open_browser={open_browser}",
            # an absolute folder: FileCheckpoints joins it to each file's folder (os.path.join keeps it)
            f"--FileCheckpoints.checkpoint_dir={root / CHECKPOINTS}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly"]
    if open_path:
        argv += [f"--LabApp.default_url=/lab/tree/{open_path}", f"--ServerApp.default_url=/lab/tree/{open_path}"]
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
    start = time.monotonic()
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    _say(False, f"[1/4] the course library for your Python: {root}/requirements.txt and its wheel")
    write_learner_install(root)
    _say(False, "[2/4] your Python (no grader, no dev tools)")
    python = ensure_learner_env(root, torch=torch, system_site_packages=system_site_packages)
    _say(False, "[3/4] the assignment: the notebook and the lab file")
    folder = build_workspace(root, python=python)
    write_terminal_config(root)
    argv = lab_argv(root, python, open_path=f"{folder.name}/{NOTEBOOK_NAME}", port=port,
                    open_browser=_has_display() if open_browser is None else open_browser)
    _say(False, f"[4/4] ready in {time.monotonic() - start:.0f} s; starting JupyterLab on 127.0.0.1 in {root}. "
                f"Open the http://127.0.0.1:.../lab/tree/{folder.name}/{NOTEBOOK_NAME}?token=... URL it prints "
                f"below (it opens the notebook). Stop it with Ctrl-C. To hand in, submit the folder {folder} "
                f"(notebook and lab file).")
    os.chdir(root)
    os.execve(argv[0], argv, server_env(python=python))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.learner.workspace", description=__doc__.split("\n\n")[0])
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
    if sys.version_info < MIN_PYTHON:
        print(f"workspace: Python {sys.version.split()[0]} is too old; the course needs "
              f"{'.'.join(map(str, MIN_PYTHON))} or newer (make lab PYTHON=python3.12)", file=sys.stderr)
        return 2
    try:
        if args.serve:
            serve(args.dir, port=args.port, open_browser=args.open_browser, torch=args.torch,
                  system_site_packages=args.system_site_packages)
        else:
            write_learner_install(args.dir)
            python = ensure_learner_env(args.dir, torch=args.torch, system_site_packages=args.system_site_packages)
            print(build_workspace(args.dir, python=python))
    except WorkspaceError as exc:
        print(f"workspace: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

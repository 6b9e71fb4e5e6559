"""``course-grade formgrader``: the instructor's JupyterLab on a results folder, opened at nbgrader's formgrader.

The results folder that ``course-grade autograde`` writes is an nbgrader course root (its
``gradebook.db``, ``submitted/`` and ``autograded/``), so formgrader must run with it as the
server's root: that is ``cd results && jupyter lab``. Started by root, JupyterLab refuses to run
("Running as root is not recommended. Use --allow-root to bypass.") and exits at once; this verb
adds ``--allow-root`` then, and only then, and says so. It opens at ``/formgrader`` (the server's
default URL), so *Manual Grading* is one click away.

In formgrader's view of a submission the hidden tests' code is left out (the instructor's copy,
:mod:`autograder.publish.inert`, keeps a comment saying how many lines) and the first cell links to each answer
graded by hand: click it to reach the score and comment boxes.

>>> argv, notes = command("results", port=8899, euid=0)
>>> argv[1:4], "--ServerApp.allow_root=True" in argv, notes
(['-m', 'jupyterlab', '--ServerApp.root_dir=results'], True, ['running as root: --allow-root added (JupyterLab refuses root without it)'])
>>> "--ServerApp.allow_root=True" in command("results", euid=1000)[0]
False
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import AutograderError

#: Where the server opens: formgrader's list of assignments.
DEFAULT_URL = "/formgrader"


def command(results_dir: str | Path, port: int | None = None, no_browser: bool = False, ip: str | None = None,
            euid: int | None = None) -> tuple[list[str], list[str]]:
    """(argv that starts JupyterLab in this Python on ``results_dir``, notes on what was added for this user)."""
    euid = os.geteuid() if euid is None else euid
    argv = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={results_dir}",
            f"--ServerApp.default_url={DEFAULT_URL}"]
    notes = []
    if port is not None:
        argv += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if ip is not None:
        argv.append(f"--ServerApp.ip={ip}")
    if no_browser:
        argv.append("--no-browser")
    if euid == 0:
        argv.append("--ServerApp.allow_root=True")
        notes.append("running as root: --allow-root added (JupyterLab refuses root without it)")
    return argv, notes


def check_results(results_dir: str | Path) -> Path:
    """``results_dir`` when it is a folder ``course-grade autograde`` wrote (its gradebook.db is there);
    else one clear error."""
    path = Path(results_dir)
    if not path.is_dir():
        raise AutograderError(f"{results_dir!s} is not a folder; give the RESULTS_DIR that `course-grade autograde "
                              f"--out` wrote")
    if not (path / "gradebook.db").is_file():
        raise AutograderError(f"{results_dir!s} has no gradebook.db; run `course-grade autograde SUBMITTED_DIR --out "
                              f"{results_dir!s}` first")
    return path


def main(results_dir: str | Path = "results", port: int | None = None, no_browser: bool = False,
         ip: str | None = None) -> None:
    """Replace this process by JupyterLab on ``results_dir`` (its working folder too, as ``cd`` would)."""
    path = check_results(results_dir).resolve()
    argv, notes = command(path, port=port, no_browser=no_browser, ip=ip)
    for note in notes:
        print(f"course-grade formgrader: {note}", file=sys.stderr)
    print(f"course-grade formgrader: JupyterLab on {path}, opening at {DEFAULT_URL} (Ctrl-C to stop)", file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    os.chdir(path)
    os.execv(argv[0], argv)

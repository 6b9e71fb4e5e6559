"""Helpers for tests/lesson/test_browser.py: Chromium, a throwaway JupyterLab server, the reference notebook.

Playwright drives Debian's Chromium (``/usr/bin/chromium``, installed by ``make browser-deps``);
nothing is ever downloaded. JupyterLab is started through ``make lab``'s entry point
(``python -m autograder.learner.workspace --serve``), with a free port, a token and private settings folders.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

from autograder.learner.workspace import learner_python, server_env

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts" / "browser"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


# ---------------------------------------------------------------- skip or fail

def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(reason: str) -> None:
    """Skip on a developer machine; fail under CI=true, where the browser tests must run."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set, so the browser tests must not skip)", pytrace=False)
    pytest.skip(reason)


def chromium_executable() -> str:
    """Debian's Chromium, or skip / fail saying how to install it."""
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if not path:
        missing(f"Chromium not found at {CHROMIUM}: run `make browser-deps` (as root: apt-get install -y chromium)")
    return path


def playwright_module():
    try:
        from playwright import sync_api
    except ImportError:
        missing("the playwright Python package is not installed: `.venv/bin/pip install -e .[dev]`")
    return sync_api


# ---------------------------------------------------------------- JupyterLab

USER_SETTINGS = {
    # Never ask about (or fetch) Jupyter news: the toast would cover the notebook and call out.
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    # Keep every cell in the DOM, so the tests can find cells scrolled out of view.
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    # A terminal's text in the DOM too (xterm.js's accessibility rows), not only drawn on a canvas.
    "@jupyterlab/terminal-extension/plugin": {"screenReaderMode": True},
}

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: The URL a Jupyter server prints: its path and its token.
PRINTED_URL = re.compile(r"http://127\.0\.0\.1:\d+/(\S*)\?token=(\w+)")


class JupyterLab:
    """``make lab``'s server (``python -m autograder.learner.workspace --serve``) on a free port, rooted at ``root``.

    ``root`` must already hold the workspace (``--serve`` keeps a learner's files, so what the test
    put there is what gets served). Token, settings and runtime folders come from a private
    Jupyter config dir under ``home``; stop() ends the server and its kernels. ``fresh=True``: a
    learner's first day instead: an empty config folder (so no settings and no saved workspace),
    empty data, runtime and home folders, and Jupyter's own random token (read from the URL it
    prints: :meth:`printed_url`). ``formgrader=True``: the instructor's JupyterLab in this Python
    (nbgrader's formgrader on) started in ``root``, an nbgrader course root such as a RESULTS_DIR,
    with the command line ``course-grade formgrader RESULTS_DIR`` runs (:func:`autograder.publish.formgrader.command`).
    ``user_home``: the HOME the server (and its terminals) run with.
    """

    def __init__(self, root: Path, home: Path, log_path: Path, fresh: bool = False, formgrader: bool = False,
                 user_home: Path | None = None):
        self.root, self.port, self.token = root, free_port(), secrets.token_hex(16)
        settings, config = home / "user-settings", home / "config"
        config.mkdir(parents=True, exist_ok=True)
        if not fresh:
            for plugin, values in USER_SETTINGS.items():
                path = settings / f"{plugin}.jupyterlab-settings"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(values))
            (config / "jupyter_server_config.json").write_text(json.dumps({
                "IdentityProvider": {"token": self.token},
                "LabApp": {"user_settings_dir": str(settings), "workspaces_dir": str(home / "workspaces")},
            }))
        env = dict(os.environ) if formgrader else server_env(python=learner_python(root))
        env.update(JUPYTER_CONFIG_DIR=str(config), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
                   JUPYTER_DATA_DIR=str(home / "data"), IPYTHONDIR=str(home / "ipython"), MPLBACKEND="agg")
        if fresh:
            (home / "home").mkdir(exist_ok=True)
            env["HOME"] = str(home / "home")
        if user_home is not None:         # the learner's home: their shell start-up files, for a terminal
            env["HOME"] = str(user_home)
        if formgrader:   # the README's `course-grade formgrader RESULTS_DIR`: its command line, as root or not
            from autograder.publish.formgrader import command

            argv = command(root, port=self.port, no_browser=True, ip="127.0.0.1")[0] + ["--LabApp.news_url=None"]
        else:
            argv = [sys.executable, "-m", "autograder.learner.workspace", "--serve", "--dir", str(root),
                    "--port", str(self.port), "--no-browser"]
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(argv, cwd=root if formgrader else REPO, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}?token={self.token}"

    def wait_ready(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}; see {self.log_path}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        raise RuntimeError(f"JupyterLab did not answer on port {self.port} in {timeout_s:.0f} s; log:\n{self.log()}")

    def printed_url(self, timeout_s: float = 120) -> str:
        """The first URL the server printed (with its token), once it has printed one."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            found = PRINTED_URL.search(Path(self.log_path).read_text(errors="replace"))
            if found:
                self.token = found.group(2)
                return found.group(0)
            time.sleep(0.25)
        raise RuntimeError(f"JupyterLab printed no URL in {timeout_s:.0f} s; log:\n{self.log()}")

    def log(self, tail_chars: int = 4000) -> str:
        return Path(self.log_path).read_text(errors="replace")[-tail_chars:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()          # Jupyter shuts its kernels down on SIGTERM
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        self._log.close()


@contextlib.contextmanager
def chromium_page(sync_api, profile: Path, viewport: tuple[int, int] = (1400, 1000)):
    """A page of a headless Debian Chromium with its own profile folder (closed on exit)."""
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=chromium_executable(), headless=True, args=CHROMIUM_ARGS,
            viewport={"width": viewport[0], "height": viewport[1]})
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


# ---------------------------------------------------------------- the reference notebook

_SOLUTION_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)
_HIDDEN_TESTS = re.compile(r"\n*[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", re.DOTALL)


def reference_source(instructor_source: str) -> str:
    """An instructor cell as a learner who wrote the reference answer would have it."""
    return _SOLUTION_MARKER.sub("", _HIDDEN_TESTS.sub("\n", instructor_source)).rstrip("\n")


def fill_in_reference_answers(student: nbformat.NotebookNode, instructor: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The student notebook with every solution cell replaced by the instructor's reference answer.

    Cells are matched by nbgrader ``grade_id``; all other cells stay exactly as released.
    """
    by_id = {c.metadata["nbgrader"]["grade_id"]: c for c in instructor.cells if "nbgrader" in c.metadata}
    filled = nbformat.from_dict(json.loads(json.dumps(student)))
    replaced = 0
    for cell in filled.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            reference = by_id.get(meta["grade_id"])
            assert reference is not None, f"solution cell {meta['grade_id']!r} is not in the instructor notebook"
            cell.source = reference_source(reference.source)
            replaced += 1
    assert replaced, "the student notebook has no solution cells to fill in"
    return filled


def set_active_sequences(lab_file: Path, value: int) -> None:
    """Edit the lab file's ``active_sequences = 8`` line, as step 3 of the lab asks."""
    text = lab_file.read_text()
    new, count = re.subn(r"^active_sequences = \d+", f"active_sequences = {value}", text, flags=re.MULTILINE)
    assert count == 1, f"expected one `active_sequences = N` line in {lab_file}, found {count}"
    lab_file.write_text(new)

"""JupyterLab's terminal in the learner's workspace runs the workspace's Python (issue 34).

The server starts with ``learner-workspace/.venv/bin`` first on PATH, but a terminal's shell reads the
learner's start-up files, and ``pyenv init`` or ``conda init`` there put another Python ahead of it.
Here the terminal's command is taken from the workspace's own server config as
jupyter_server_terminals 0.5 takes it (``ServerApp.terminado_settings["shell_command"]``, else
``$SHELL -l`` when the server has no terminal of its own: its ``app.py``), and run on a pseudo-terminal
as terminado runs it, in the server's environment (:func:`autograder.learner.workspace.server_env`), with a home
whose start-up files put an impostor ``python3`` first. The Python that answers must be the workspace's.
``tests/lesson/test_browser.py`` runs the lab in a real JupyterLab terminal.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import time
import venv
from pathlib import Path

import pytest

from autograder.learner import workspace

IMPOSTOR = "IMPOSTOR-PYTHON"
#: Where each layout of start-up files puts the impostor first, as pyenv's and conda's installers write it.
LAYOUTS = {
    # Debian/Ubuntu: ~/.profile reads ~/.bashrc, where `pyenv init` went (this machine's own layout)
    "debian ~/.profile reads ~/.bashrc": {
        ".profile": 'if [ "$BASH" ]; then if [ -f ~/.bashrc ]; then . ~/.bashrc; fi; fi\n',
        ".bashrc": 'export PATH="$HOME/impostor/bin:$PATH"   # eval "$(pyenv init -)"\n'},
    # macOS-style: conda init writes ~/.bash_profile, and there is no ~/.profile
    "~/.bash_profile (conda init)": {
        ".bash_profile": 'export PATH="$HOME/impostor/bin:$PATH"  # >>> conda initialize >>>\n'},
    # only ~/.bashrc: what an interactive bash reads when it is not a login shell
    "~/.bashrc alone": {".bashrc": 'export PATH="$HOME/impostor/bin:$PATH"\n'},
}


def terminal_command(env_dir: Path, environ: dict) -> list[str]:
    """The shell jupyter_server_terminals starts for a server run by this Python, with no tty of its own."""
    config = env_dir / "etc" / "jupyter" / "jupyter_server_config.json"
    settings = json.loads(config.read_text()).get("ServerApp", {}).get("terminado_settings", {}) \
        if config.is_file() else {}
    command = settings.get("shell_command")
    return list(command) if command else [environ.get("SHELL") or shutil.which("sh"), "-l"]


def run_on_a_pty(argv: list[str], env: dict, cwd: Path, typed: str, timeout_s: float = 30) -> str:
    """What a terminal shows when ``typed`` is typed into ``argv`` started on a pseudo-terminal."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, stdin=follower, stdout=follower, stderr=follower, env=env, cwd=cwd,
                            start_new_session=True)
    os.close(follower)
    os.write(leader, typed.encode())
    out, deadline = b"", time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:           # EIO: the shell exited and the pty closed
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return out.decode(errors="replace")


@pytest.fixture(scope="module")
def workspace_root(tmp_path_factory):
    """A workspace with a Python of its own (a bare venv: the terminal only has to find it)."""
    if not shutil.which("bash"):
        pytest.skip("no bash on this machine: JupyterLab keeps its own default shell")
    root = tmp_path_factory.mktemp("ws")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root / workspace.ENV_DIR)
    return root


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_terminal_runs_the_workspaces_python(workspace_root, tmp_path, layout):
    home = tmp_path / "home"
    (home / "impostor" / "bin").mkdir(parents=True)
    impostor = home / "impostor" / "bin" / "python3"
    impostor.write_text(f"#!/bin/sh\necho {IMPOSTOR}\n")
    impostor.chmod(0o755)
    for name, text in LAYOUTS[layout].items():
        (home / name).write_text(text)
    workspace.write_terminal_config(workspace_root)
    python = workspace.learner_python(workspace_root)
    base = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "SHELL": shutil.which("bash"),
            "TERM": "xterm", "LANG": "C.UTF-8"}
    env = workspace.server_env(base, python=python)
    argv = terminal_command(workspace_root / workspace.ENV_DIR, env)
    shown = run_on_a_pty(argv, env, workspace_root,
                         "python3 -c 'import sys; print(\"PREFIX=\" + sys.prefix)'\nexit\n")
    assert IMPOSTOR not in shown, f"{layout}: the terminal ({' '.join(argv)}) ran the impostor:\n{shown}"
    assert f"PREFIX={workspace_root / workspace.ENV_DIR}" in shown, f"{layout}: {' '.join(argv)}:\n{shown}"


def test_without_bash_jupyter_keeps_its_own_shell(tmp_path, monkeypatch):
    """No bash (a minimal image): no config of ours, so Jupyter's default shell; an old one is removed."""
    assert workspace.write_terminal_config(tmp_path) is not None
    monkeypatch.setattr(workspace.shutil, "which", lambda name: None)
    monkeypatch.setattr(workspace.os, "access", lambda path, mode: False)
    assert workspace.write_terminal_config(tmp_path) is None
    assert not (tmp_path / workspace.ENV_DIR / workspace.TERMINAL_CONFIG).exists()

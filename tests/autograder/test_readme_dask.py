"""The Dask page's commands (docs/dask.md, linked from the README), run as written (on 127.0.0.1, one
worker process, the TLS files made by its openssl line): every server they start listens on the address
given and nowhere else, the worker registers over TLS, and the workers exit when the scheduler goes, as
the page says. The listening sockets are read from the kernel (psutil), not from Dask's logs."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
#: Where the instructor reads the Dask commands (the README links to it).
PAGE = REPO / "docs" / "dask.md"
ADDRESS = "127.0.0.1"


def _readme_command(word: str, program: str = ".venv/bin/dask") -> list[str]:
    """The Dask page's ``.venv/bin/dask <word> ...`` line (or ``<program> <word>``), its prompt and
    comment cut, as argv."""
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        found = re.match(rf"^\w+\$\s+({re.escape(program)} {word}\b.*?)(\s+#.*)?$", line)
        if found:
            return shlex.split(found.group(1))
    raise AssertionError(f"{PAGE.relative_to(REPO)} has no `{program} {word}` line")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((ADDRESS, 0))
        return s.getsockname()[1]


def _listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every socket that ``pid`` or a child of it listens on."""
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return set()
    out = set()
    for proc in procs:
        try:
            out |= {(c.laddr.ip, c.laddr.port) for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
        except psutil.NoSuchProcess:
            continue
    return out


def _argv(words: list[str], scheduler_port: int, dashboard_port: int) -> list[str]:
    text = " ".join(words).replace("$SCHEDULER_IP", ADDRESS).replace("$MY_IP", ADDRESS)
    text = text.replace(":8786", f":{scheduler_port}").replace("--port 8786", f"--port {scheduler_port}")
    text = text.replace(":8787", f":{dashboard_port}").replace("--nworkers 8", "--nworkers 1")
    argv = shlex.split(text)
    assert argv[0] == ".venv/bin/dask"
    return [str(Path(sys.executable).parent / "dask"), *argv[1:]]


def test_readme_dask_servers_listen_only_on_the_address_given_and_workers_exit_without_a_scheduler(tmp_path):
    # The cluster's TLS key and certificate, made by the page's openssl line (openssl comes with ca-certificates).
    subprocess.run(_readme_command("req", program="openssl"), cwd=tmp_path, check=True, capture_output=True, timeout=60)
    assert (tmp_path / "dask.key").is_file() and (tmp_path / "dask.pem").is_file()
    scheduler_port, dashboard_port = _free_port(), _free_port()
    scheduler_argv = _argv(_readme_command("scheduler"), scheduler_port, dashboard_port)
    worker_argv = _argv(_readme_command("worker"), scheduler_port, dashboard_port)
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED="False")
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("scheduler", "worker")}
    scheduler = subprocess.Popen(scheduler_argv, cwd=tmp_path, env=env, stdout=logs["scheduler"],
                                 stderr=subprocess.STDOUT, start_new_session=True)
    worker = None
    try:
        deadline = time.monotonic() + 60
        while (ADDRESS, scheduler_port) not in _listening(scheduler.pid) and time.monotonic() < deadline:
            time.sleep(0.25)
        worker = subprocess.Popen(worker_argv, cwd=tmp_path, env=env, stdout=logs["worker"],
                                  stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 90   # nanny, worker and the worker's dashboard
        while len(_listening(worker.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.25)
        time.sleep(1)
        served = {"scheduler": _listening(scheduler.pid), "worker": _listening(worker.pid)}
        assert {(ADDRESS, scheduler_port), (ADDRESS, dashboard_port)} <= served["scheduler"], served
        assert len(served["worker"]) >= 3, (served, (tmp_path / "worker.log").read_text()[-2000:])
        elsewhere = {name: sorted(s for s in socks if s[0] != ADDRESS) for name, socks in served.items()}
        assert elsewhere == {"scheduler": [], "worker": []}, f"servers listening beyond {ADDRESS}: {elsewhere}"
        log = (tmp_path / "worker.log").read_text()
        assert re.search(rf"Registered to:\s+tls://{re.escape(ADDRESS)}:{scheduler_port}\b", log), log[-2000:]

        scheduler.send_signal(signal.SIGTERM)             # the scheduler goes...
        scheduler.wait(timeout=30)
        worker.wait(timeout=90)                           # ...and the workers exit: restart them after it
        assert worker.returncode is not None
    finally:
        for proc in (worker, scheduler):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for log in logs.values():
            log.close()

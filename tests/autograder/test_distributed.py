"""Grading on a Dask cluster (``autograde --scheduler``): the same grades as local workers, on real Dask
(LocalCluster), with real workers killed by a real signal, a refused stale worker and bad addresses.

One LocalCluster of two worker processes serves the module (reached over plain tcp, as a remote cluster
may be); the example-class test starts its own through ``local:2`` (TLS, a credential made for the batch),
and the lost-scheduler test a remote TLS scheduler and worker given the --tls-* files. Batches other than the example class
use the small fixture notebook (about 1 s each).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "files" / "autograder"))
import hostile  # noqa: E402
FULL = 5 + hostile.LAB_POINTS  # the fixture notebook's 5 points and the lab check's

from autograder.batch import environment  # noqa: E402
from autograder.batch.autograde import main as autograde  # noqa: E402
from autograder.errors import AutograderError  # noqa: E402

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CLASS = REPO / "examples" / "submissions"
FIXTURE = hostile.assignment()
#: What may differ between two gradings of the same submission: the time taken and where it ran.
WHERE_AND_WHEN = ("seconds", "worker", "isolation")


@pytest.fixture(scope="module")
def cluster():
    """A Dask scheduler with two worker processes (nannies restart a killed one), reached over tcp."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=0, dashboard_address=None,
                      silence_logs=logging.ERROR, scheduler_kwargs={"dashboard_address": ":0"}) as local, Client(local, set_as_default=False) as client:
        yield local.scheduler_address, client


def _hand_in(submitted: Path, sid: str, nb=None) -> None:
    folder = submitted / sid / hostile.ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb if nb is not None else hostile.learner_notebook(), folder / hostile.NOTEBOOK)
    (folder / hostile.LAB.name).write_text(hostile.lab_text(16))


def _slow_class(submitted: Path, n: int, sleep_s: float = 2) -> list[str]:
    slow = hostile.insert_after(hostile.learner_notebook(), "test_kv_per_token", f"import time; time.sleep({sleep_s})")
    students = [f"s{i}" for i in range(n)]
    for sid in students:
        _hand_in(submitted, sid, nb=slow)
    return students


def _grade(submitted, results, scheduler, **kw):
    return autograde(submitted, out=results, scheduler=scheduler, cell_timeout=20, notebook_timeout=60,
                     progress=False, assignment=FIXTURE, **kw)


def _sandbox_processes() -> list[int]:
    """Learner processes of this checkout that outlived their grader (tests/sandbox_support.py)."""
    from sandbox_support import leftover_sandbox_processes

    return leftover_sandbox_processes()


def _ours(info: dict) -> bool:
    from sandbox_support import is_sandbox_process

    return is_sandbox_process(info)


def _records(results: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((results / "records").glob("*.json"))}


def _without(record: dict, keys=WHERE_AND_WHEN) -> dict:
    return {k: v for k, v in record.items() if k not in keys}


def _raw_tls(address: str, folder: Path, credential) -> str:
    """Speak TLS to ``address`` presenting ``credential``'s certificate (a Dask Security) and trusting any
    server: what the server says. Dask's handshake starts with the server writing, so a server that accepts
    us sends bytes."""
    (folder / "probe.pem").write_text(credential.tls_client_cert)
    (folder / "probe.key").touch(mode=0o600)
    (folder / "probe.key").write_text(credential.tls_client_key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.load_cert_chain(folder / "probe.pem", folder / "probe.key")
    host, port = address.split("://", 1)[1].rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=5) as raw, context.wrap_socket(raw) as tls:
            data = tls.recv(64)
    except TimeoutError:
        return "connected (the server waited for us)"
    except (ssl.SSLError, ConnectionError) as e:
        return f"refused: {type(e).__name__}: {e}"
    return f"connected, the server sent {data[:16]!r}" if data else "refused: closed"


def _probe_outsiders(monkeypatch, folder: Path) -> dict[str, str]:
    """Once a batch's cluster is up (Cluster.connect), clients without its credential try to reach its
    scheduler: Dask clients over plain tcp and over TLS with a credential of their own, and a raw TLS
    client that presents another certificate and trusts any server. What each got, by name."""
    from distributed import Client
    from distributed.security import Security

    from autograder.batch import distributed

    seen: dict[str, str] = {}
    connect = distributed.Cluster.connect

    def probing(cluster):
        client = connect(cluster)
        if "address" not in seen:
            seen["address"] = address = client.scheduler.address
            for name, target, security in (("plain tcp", address.replace("tls://", "tcp://", 1), None),
                                           ("another credential", address, Security.temporary())):
                try:
                    Client(target, security=security, timeout="3s", set_as_default=False).close()
                    seen[name] = "connected"
                except Exception as e:  # noqa: BLE001 - any refusal will do; what matters is that none connects
                    seen[name] = f"refused: {type(e).__name__}: {str(e)[:200]}"
            seen["raw TLS, another certificate"] = _raw_tls(address, folder, Security.temporary())
            dashboard = client.scheduler_info().get("services", {}).get("dashboard")
            seen["dashboard on"] = sorted({c.laddr.ip for c in psutil.Process().net_connections("tcp")
                                           if c.status == psutil.CONN_LISTEN and c.laddr.port == dashboard})
            if getattr(cluster, "security", None) is not None:   # the control: the batch's own is let in
                seen["raw TLS, the batch's certificate"] = _raw_tls(address, folder, cluster.security)
        return client

    monkeypatch.setattr(distributed.Cluster, "connect", probing)
    return seen


#: The example class's learners graded again on Dask (grading one takes a kernel's full lesson run): the
#: reference and the blank, a carried-forward error, a partial credit, the lab left unedited, and a
#: misconception of the log-reading tasks. Each must get exactly its local grade, files and all.
ON_DASK = ("reference", "blank", "forgot_k_and_v", "attention_heads", "lab_not_edited", "whole_device_log")


def test_example_class_on_local_dask_workers_gets_exactly_the_local_grades(example_class_local, tmp_path, monkeypatch):
    local, local_dir = example_class_local
    submitted, results = tmp_path / "submitted", tmp_path / "results"
    for sid in ON_DASK:
        shutil.copytree(EXAMPLE_CLASS / sid, submitted / sid)
    outsiders = _probe_outsiders(monkeypatch, tmp_path)
    batch = autograde(submitted, out=results, scheduler="local:2", progress=False)
    # The batch's scheduler talks TLS with a credential of its own: no other client gets in (issue 22:
    # learner code that reaches the scheduler runs as root on the workers). Grades are as before.
    assert outsiders["address"].startswith("tls://127.0.0.1:"), outsiders
    assert all(outsiders[probe].startswith("refused: ") for probe in
               ("plain tcp", "another credential", "raw TLS, another certificate")), outsiders
    assert outsiders["raw TLS, the batch's certificate"].startswith("connected, the server sent"), outsiders
    assert outsiders["dashboard on"] == ["127.0.0.1"], "the dashboard (task names hold student ids) is this host's"
    mine, theirs = _records(results), _records(local_dir)
    assert set(mine) == set(ON_DASK) <= set(theirs) == {p.name for p in EXAMPLE_CLASS.iterdir() if p.is_dir()}
    grades, local_grades = (json.loads((d / "grades.json").read_text()) for d in (results, local_dir))
    assert grades["assignment"] == local_grades["assignment"]
    assert grades["students"] == {sid: local_grades["students"][sid] for sid in ON_DASK}
    # rows as a CSV reader reads them (a field may hold several lines: each failed part of a question)
    import csv
    local_rows = {r["student_id"]: r for r in csv.DictReader((local_dir / "grades.csv").open(newline=""))}
    rows = list(csv.DictReader((results / "grades.csv").open(newline="")))
    assert {r["student_id"] for r in rows} == set(ON_DASK)
    for row in rows:
        assert row == local_rows[row["student_id"]], row
    for sid, record in mine.items():
        assert _without(record) == _without(theirs[sid]), f"{sid}: the Dask record differs from the local one"
        assert record["worker"].startswith("tls://127.0.0.1:") and record["isolation"] == local.isolation, record
        for folder in ("autograded", "feedback", "gradescope"):
            assert sorted(p.name for p in (results / folder).rglob(f"*{sid}*")) == \
                   sorted(p.name for p in (local_dir / folder).rglob(f"*{sid}*")), (sid, folder)
        page = (results / "feedback" / sid / hostile.ASSIGNMENT / f"{hostile.ASSIGNMENT}.html").read_text()
        assert "Autograded score" in page and "BEGIN HIDDEN TESTS" not in page
    assert batch.isolation == f"Dask workers: {local.isolation}"


def _executing(client, address: str) -> list[str]:
    return client.run(lambda dask_worker: [str(ts.key) for ts in dask_worker.state.executing],
                      workers=[address])[address]


def test_a_worker_killed_mid_task_costs_nothing(cluster, tmp_path):
    address, client = cluster
    submitted, results = tmp_path / "submitted", tmp_path / "results"
    students = _slow_class(submitted, 4, sleep_s=3)
    outcome: dict = {}
    grading = threading.Thread(target=lambda: outcome.update(batch=_grade(submitted, results, address)))
    grading.start()
    # Wait until a worker is grading: a task is executing there and its sandboxed kernel is running.
    deadline, victim = time.monotonic() + 120, None
    while victim is None:
        assert time.monotonic() < deadline and grading.is_alive(), "no worker started grading"
        for worker, pid in client.run(os.getpid).items():
            keys = _executing(client, worker)
            kids = psutil.Process(pid).children(recursive=True)
            if keys and any(_ours(k.as_dict(["uids", "cmdline", "environ"])) for k in kids):
                victim = (worker, pid, keys[0])
                break
        time.sleep(0.2)
    worker, pid, key = victim
    os.kill(pid, signal.SIGKILL)
    grading.join(timeout=300)
    assert not grading.is_alive()
    batch = outcome["batch"]
    assert set(batch.students) == set(students)
    assert all((r.status, r.score) == ("graded", FULL) for r in batch.students.values()), batch.counts()
    killed = next(sid for sid in students if key.startswith(f"grade-{sid}-"))
    assert batch.students[killed].worker and not batch.students[killed].worker.startswith(worker + " "), \
        "the killed task was graded again on another worker"
    rows = (results / "grades.csv").read_text().splitlines()[1:]
    assert sorted(r.split(",")[0] for r in rows) == students, "each student exactly once"
    assert sorted(_records(results)) == students
    time.sleep(1)
    assert _sandbox_processes() == [], "the killed worker's kernel outlived it"


def test_client_killed_mid_batch_resumes_with_nothing_lost_or_duplicated(cluster, tmp_path):
    address, _ = cluster
    submitted, results = tmp_path / "submitted", tmp_path / "results"
    students = _slow_class(submitted, 6, sleep_s=1)
    script = ("from autograder.batch.autograde import main; " + hostile.ASSIGNMENT_CODE +
              f"main({str(submitted)!r}, out={str(results)!r}, scheduler={address!r}, progress=False, "
              f"cell_timeout=20, notebook_timeout=60, assignment=fixture)")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not list(results.glob("records/*.json")):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    done_before = set(_records(results))
    assert 0 < len(done_before) < len(students)

    batch = _grade(submitted, results, address)
    assert set(batch.students) == set(students) and set(batch.reused) >= done_before
    assert all((r.status, r.score) == ("graded", FULL) for r in batch.students.values())
    rows = (results / "grades.csv").read_text().splitlines()[1:]
    assert sorted(r.split(",")[0] for r in rows) == students, "each student exactly once"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_scheduler_that_cannot_be_reached_is_one_line_and_exit_2(tmp_path, capsys):
    submitted = tmp_path / "submitted"
    _hand_in(submitted, "alice")
    address = f"tcp://127.0.0.1:{_free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_DISTRIBUTED__COMM__TLS")}  # no credential
    env["DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT"] = "2s"
    run = lambda *a: subprocess.run([sys.executable, "-m", "autograder", "autograde", str(submitted), "--out",  # noqa: E731
                                     str(tmp_path / "r"), "--no-progress", *a], cwd=REPO, env=env,
                                    capture_output=True, text=True, timeout=120)
    proc = run("--scheduler", address)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and f"cannot reach the Dask scheduler at {address}" in proc.stderr, proc.stderr
    assert not (tmp_path / "r" / "records").exists(), "nothing graded, nothing written for a student"

    # The bad addresses and credentials are refused before anything connects: the CLI's own main() in this
    # process (as test_autograde.py's bad options), not a Python apiece (0.7 s of CPU each, 8 of them).
    from autograder import cli

    def run(*a):  # noqa: F811 - the same verb and folders as above, in-process
        previous = signal.getsignal(signal.SIGTERM)
        try:
            code = cli.main(["autograde", str(submitted), "--out", str(tmp_path / "r"), "--no-progress", *a])
        finally:
            signal.signal(signal.SIGTERM, previous)
        return subprocess.CompletedProcess(a, code, "", capsys.readouterr().err)
    assert not [k for k in os.environ if k.startswith("DASK_DISTRIBUTED__COMM__TLS")], "no credential here either"
    pem = tmp_path / "grader.pem"
    pem.write_text("not a certificate")
    for bad, phrase in ((["nonsense"], "not a Dask scheduler address"), (["local:0"], "use 1 to"),
                        (["local"], "local:N"), (["missing.json"], "no such scheduler file"),
                        # a TLS scheduler and no credential: Dask's own TypeError was a traceback
                        ([address.replace("tcp://", "tls://")], "DASK_DISTRIBUTED__COMM__TLS__CA_FILE"),
                        ([address, "--tls-cert", str(pem)], "is plain tcp; give its tls://HOST:PORT"),
                        ([address.replace("tcp://", "tls://"), "--tls-ca-file", str(pem), "--tls-cert", str(pem)],
                         "cannot load this client's TLS credential"),
                        (["local:2", "--tls-cert", str(pem)], "makes a TLS credential of its own")):
        proc = run("--scheduler", *bad)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and phrase in proc.stderr, (bad, proc.stderr)
    proc = run("--scheduler", "local:2", "--workers", "2")
    assert proc.returncode == 2 and "--workers counts this machine's" in proc.stderr


def _stale_copy(root: Path) -> Path:
    """The course package as another version: the same files, one comment added to course_lib."""
    for name in ("course_lib", "autograder"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    init = root / "course_lib" / "__init__.py"
    init.write_text(init.read_text() + "\n# another release of the course library\n")
    return root


def _start_worker(address: str, cwd: Path, name: str, *flags: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                             "--no-nanny", "--no-dashboard", "--name", name, *flags], cwd=cwd, env=dict(os.environ, **env),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_a_worker_with_another_environment_is_refused_and_one_without_bubblewrap_grades_only_when_insecure(tmp_path):
    from distributed import Client, LocalCluster

    submitted, results = tmp_path / "submitted", tmp_path / "results"
    for sid in ("alice", "bob"):
        _hand_in(submitted, sid)
    stale = _stale_copy(tmp_path / "stale")
    with LocalCluster(n_workers=0, threads_per_worker=1, processes=True, memory_limit=0, dashboard_address=None,
                      silence_logs=logging.ERROR, scheduler_kwargs={"dashboard_address": ":0"}) as local, Client(local, set_as_default=False) as client:
        address = local.scheduler_address
        workers = [_start_worker(address, stale, "stale", PYTHONPATH=str(stale))]
        try:
            client.wait_for_workers(1, timeout=60)
            (stale_address,) = client.scheduler_info(n_workers=-1)["workers"]
            assert json.loads(subprocess.check_output(  # the copy really is what that worker imports
                [sys.executable, "-c", "import json, autograder.batch.environment as e; print(json.dumps(e.environment()))"],
                cwd=stale, env=dict(os.environ, PYTHONPATH=str(stale))))["course_lib"] != \
                environment.environment()["course_lib"]
            # Only the stale worker: refused, and the batch with it (nothing is graded by it).
            with pytest.raises(AutograderError, match=f"no Dask worker at {address} can grade this batch.*"
                                                      f"refused the Dask worker {stale_address}.*course_lib differs"):
                _grade(submitted, results, address)
            assert not list(results.glob("records/*.json"))
            # A worker of this environment joins, on a PATH without bubblewrap (nor unshare): below the
            # isolation minimum it is refused too, in one line saying what it lacks and how to get it...
            workers.append(_start_worker(address, tmp_path, "no-bwrap", PATH=str(Path(sys.executable).parent)))
            client.wait_for_workers(2, timeout=60)
            no_bwrap = next(a for a in client.scheduler_info(n_workers=-1)["workers"] if a != stale_address)
            with pytest.raises(AutograderError, match=f"refused the Dask worker {no_bwrap} .*cannot isolate "
                                                      f"learner code, it lacks namespaces.*apt-get install bubblewrap"):
                _grade(submitted, results, address)
            assert not list(results.glob("records/*.json"))
            # ...and with --insecure the batch is graded, all of it there, under the isolation it has; the
            # records and the report say which.
            batch = _grade(submitted, results, address, insecure=True)
            assert all((r.status, r.score) == ("graded", FULL) for r in batch.students.values())
            assert all(r.worker and not r.worker.startswith(stale_address + " ") for r in batch.students.values())
            assert any(f"refused the Dask worker {stale_address}" in w and "course_lib differs" in w
                       for w in batch.warnings), batch.warnings
            assert all(r.isolation.startswith("no bubblewrap, ") for r in batch.students.values()), batch.students
            assert any("bubblewrap (bwrap) is not installed" in w for w in batch.warnings), batch.warnings
            assert batch.isolation.startswith("Dask workers: no bubblewrap")
        finally:
            for worker in workers:
                worker.kill()
                worker.wait(timeout=30)


def _tls_files(folder: Path) -> list[str]:
    """One key and self-signed certificate for a whole cluster, as files (made by Dask's own
    Security.temporary, as `openssl req -x509` makes them in the README): the --tls-* flags that use them."""
    from distributed.security import Security

    made = Security.temporary()
    folder.mkdir()
    (folder / "dask.pem").write_text(made.tls_ca_file)
    (folder / "dask.key").touch(mode=0o600)
    (folder / "dask.key").write_text(made.tls_client_key)
    return ["--tls-ca-file", str(folder / "dask.pem"), "--tls-cert", str(folder / "dask.pem"),
            "--tls-key", str(folder / "dask.key")]


def test_a_scheduler_lost_mid_batch_is_one_line_and_the_graded_are_kept(tmp_path):
    # The issue saw a raw FuturesCancelledError traceback here (the README promises one line). The
    # scheduler, its worker and the grader talk TLS with the files given by --tls-* (the README's remote setup).
    submitted, results = tmp_path / "submitted", tmp_path / "results"
    students = _slow_class(submitted, 6, sleep_s=1)
    port = _free_port()
    address = f"tls://127.0.0.1:{port}"
    tls = _tls_files(tmp_path / "tls")
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--protocol", "tls", "--port", str(port), "--no-dashboard", *tls], cwd=tmp_path,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = _start_worker(address, REPO, "w1", *tls)
    try:
        client = subprocess.Popen([sys.executable, "-m", "autograder", "autograde", str(submitted), "--out",
                                   str(results), "--no-progress", "--scheduler", address, "--cell-timeout", "20", *tls],
                                  cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  # Dask's client tries to reconnect for its connect timeout (30 s) first
                                  env=dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="5s"))
        deadline = time.monotonic() + 240
        while not list(results.glob("records/*.json")):
            assert time.monotonic() < deadline and client.poll() is None, client.communicate()[1][-2000:]
            time.sleep(0.1)
        scheduler.send_signal(signal.SIGKILL)
        _, err = client.communicate(timeout=180)
    finally:
        for proc in (scheduler, worker):
            proc.kill()
            proc.wait(timeout=30)
    assert client.returncode == 2, err[-3000:]
    assert err.count("\n") == 1 and f"lost the Dask scheduler at {address}" in err and "graded students are kept" in err, err[-3000:]
    kept = _records(results)
    assert 0 < len(kept) < len(students) and all(r["status"] == "graded" for r in kept.values())

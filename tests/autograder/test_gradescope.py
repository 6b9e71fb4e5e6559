"""The Gradescope bundle (``course-grade gradescope``): built through the CLI, unpacked into a temporary
root as Gradescope unpacks it, and its ``run_autograder`` run on submissions of the example class, each
in a root of its own; every results.json must carry the local grader's grades of the same students.

A representative third of the class (:data:`STUDENTS`), not all of it: all 15 took 38-52 s, the
slowest test of the suite, and what the bundle adds to the engine (unpacking, finding the upload,
results.json) is the same for everyone, while the engine itself is compared on every student by
test_distributed.py. The five: full marks uploaded as a folder, zero, a notebook misconception
uploaded as a folder and one at the top, and the lab checks failing.

setup.sh as a whole (apt, the image's Python, PyPI) is not run here: it runs in a fresh Ubuntu 22.04 root
filesystem in benchmarks/gradescope_chroot.sh (minutes; recorded in benchmarks/results/first-day.md); here its
Python gate runs, and the grading runs use this checkout's Python, as ``COURSE_GRADE_PYTHON`` allows. Two runs at a time (the machine has 2 cores); each is a fresh process.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.source.assignment import load_source
from lessons.l14_04 import NAME as ASSIGNMENT
from lessons.l14_04.examples import this_assignment
from autograder.batch.environment import environment
from autograder.batch.gradescope import ROOT_VARIABLE

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CLASS = REPO / "examples" / "submissions"
STUDENTS = ("reference", "blank", "forgot_k_and_v", "gb_gib_mixup", "lab_doubled_context_too")
#: Students whose files are uploaded inside their folder (a zip of it), not at the top of submission/.
NESTED = {"reference", "gb_gib_mixup"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    proc = subprocess.run([sys.executable, "-m", "autograder", "gradescope", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def _unpack(bundle: Path, root: Path) -> None:
    """As Gradescope does: the bundle in root/source/, modes kept (run_autograder is executable)."""
    with zipfile.ZipFile(bundle) as zf:
        for info in zf.infolist():
            target = root / "source" / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            os.chmod(target, (info.external_attr >> 16) & 0o777)


def _run(root: Path, **extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, **{ROOT_VARIABLE: str(root), "COURSE_GRADE_PYTHON": sys.executable}, **extra)
    return subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=env, capture_output=True,
                          text=True, timeout=600)


def test_the_bundle_holds_what_gradescope_runs(bundle):
    with zipfile.ZipFile(bundle) as zf:
        names = set(zf.namelist())
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in zf.infolist()}
        meta = json.loads(zf.read("bundle.json"))
        (wheel,) = [n for n in names if n.startswith("wheels/")]
        setup = zf.read("setup.sh").decode()
        wheel_bytes = zf.read(wheel)
    assert {"setup.sh", "run_autograder", "bundle.json", f"instructor/{ASSIGNMENT}.ipynb",
            f"instructor/{ASSIGNMENT}.py"} <= names
    assert modes["setup.sh"] & 0o100 and modes["run_autograder"] & 0o100
    assert modes[f"instructor/{ASSIGNMENT}.ipynb"] == 0o600, "the solutions are root's alone"
    assert meta["environment"] == environment() and meta["max_score"] == load_source(this_assignment()).max_score
    assert subprocess.run(["bash", "-n", "-c", setup]).returncode == 0, "setup.sh is valid bash"
    # the base image's own Python (3.10 or newer), not the builder's pinned and downloaded (issue 24)
    assert "\"$PY\" -m venv" in setup and "--python" not in setup and "uv " not in setup
    assert "bubblewrap" in setup and "torch" not in setup.split("no torch")[0]
    import io
    with zipfile.ZipFile(io.BytesIO(wheel_bytes)) as wz:
        inside = wz.namelist()
        metadata = wz.read(next(n for n in inside if n.endswith(".dist-info/METADATA"))).decode()
    assert "lessons/l14_04/checks.py" in inside and "course_lib/serving/budget.py" in inside
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert any("nbgrader" in r for r in requires) and any("dask" in r for r in requires)
    assert not any("torch" in r or "pytest" in r for r in requires), requires


def _submission(root: Path, sid: str) -> None:
    source = EXAMPLE_CLASS / sid / ASSIGNMENT
    target = root / "submission" / (ASSIGNMENT if sid in NESTED else "")
    target.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        shutil.copy(f, target / f.name)
    (root / "results").mkdir()
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"email": f"{sid}@example.edu"}]}))


def test_run_autograder_gives_the_local_grades(bundle, example_class_local, tmp_path):
    _, local_dir = example_class_local
    students = list(STUDENTS)
    roots = {}
    for sid in students:
        roots[sid] = tmp_path / sid
        _unpack(bundle, roots[sid])
        _submission(roots[sid], sid)
    with cf.ThreadPoolExecutor(2) as pool:
        procs = dict(zip(students, pool.map(_run, (roots[s] for s in students))))
    for sid in students:
        assert procs[sid].returncode == 0, (sid, procs[sid].stderr[-2000:])
        got = json.loads((roots[sid] / "results" / "results.json").read_text())
        want = json.loads((local_dir / "gradescope" / f"{sid}.json").read_text())
        assert got["score"] == want["score"], sid
        assert got["tests"] == want["tests"], f"{sid}: the tests differ from the local grader's"
        assert {k: v for k, v in got["extra_data"].items() if k not in ("isolation", "notes")} == want["extra_data"], sid
        assert got["output"].splitlines()[0] == want["output"], sid
        # how the machine isolates learner code is the instructor's (the hidden stdout, extra_data), not the learner's
        assert "isolation" not in got["output"] and got["stdout_visibility"] == "hidden"
        assert got["extra_data"]["isolation"] and "isolation: " in procs[sid].stdout
        for t in got["tests"]:
            # the written answer, graded on Gradescope by hand, is a pending test without a score (issue 24)
            fields = {"name", "output", "visibility"} | (set() if t.get("tags") == ["pending"] else {"score", "max_score"})
            assert fields <= set(t), t
            assert "BEGIN HIDDEN TESTS" not in t["output"]


def test_a_grader_other_than_the_bundles_is_refused(bundle, tmp_path):
    root = tmp_path / "root"
    _unpack(bundle, root)
    _submission(root, "blank")
    meta_path = root / "source" / "bundle.json"
    meta = json.loads(meta_path.read_text())
    meta["environment"]["autograder"] = "0" * 64
    meta_path.write_text(json.dumps(meta))
    env = dict(os.environ, **{ROOT_VARIABLE: str(root)})
    check = subprocess.run([sys.executable, "-m", "autograder.batch.gradescope", "--check"], env=env, capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 2 and "autograder differs" in check.stderr and check.stderr.count("\n") == 1
    proc = _run(root)
    assert proc.returncode == 0, proc.stderr
    got = json.loads((root / "results" / "results.json").read_text())
    assert got["score"] == 0.0 and got["extra_data"]["status"] == "grader_error"
    assert "not the one this bundle was built with" in got["output"]


def test_the_image_s_python_may_be_another_minor_version(bundle, tmp_path):
    """setup.sh installs into the base image's Python (3.10 on Gradescope's Ubuntu 22.04): a bundle built
    with another minor version is still this grader, so it grades, and the output says which Pythons."""
    root = tmp_path / "root"
    _unpack(bundle, root)
    _submission(root, "reference")
    meta_path = root / "source" / "bundle.json"
    meta = json.loads(meta_path.read_text())
    meta["environment"]["python"] = "3.10" if environment()["python"] != "3.10" else "3.12"
    meta_path.write_text(json.dumps(meta))
    env = dict(os.environ, **{ROOT_VARIABLE: str(root)})
    check = subprocess.run([sys.executable, "-m", "autograder.batch.gradescope", "--check"], env=env, capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 0 and f"the bundle was built with {meta['environment']['python']}" in check.stdout
    proc = _run(root)
    assert proc.returncode == 0, proc.stderr
    got = json.loads((root / "results" / "results.json").read_text())
    assert got["extra_data"]["status"] == "graded" and got["score"] == 46.0
    # the instructor's to read (the hidden stdout and extra_data), as the isolation summary is
    assert f"note: python {environment()['python']} here; the bundle was built with" in proc.stdout
    assert any(n.startswith(f"python {environment()['python']} here") for n in got["extra_data"]["notes"])
    assert "python" not in got["output"]


def _fake_bin(folder: Path, python_version: str) -> Path:
    """A PATH with a no-op apt-get, a python3 that says it is ``python_version`` (and is too old), and
    no python3.N (these fail as a missing command does: the host's own must not be found)."""
    folder.mkdir()
    (folder / "apt-get").write_text("#!/bin/sh\nexit 0\n")
    (folder / "python3").write_text(f"#!/bin/sh\n[ \"$1\" = -V ] && echo 'Python {python_version}' && exit 0\nexit 1\n")
    for minor in range(11, 15):
        (folder / f"python3.{minor}").write_text("#!/bin/sh\nexit 127\n")
    for f in folder.iterdir():
        f.chmod(0o755)
    return folder


def test_setup_sh_refuses_a_python_too_old_in_one_line(bundle, tmp_path):
    """The fast part of setup.sh's test (the whole of it runs in a fresh Ubuntu root filesystem:
    benchmarks/gradescope_chroot.sh, recorded in RESULTS): an image whose python3 is too old and whose
    apt has no newer python3.N stops at the gate, in one line, before any venv is made."""
    root = tmp_path / "root"
    _unpack(bundle, root)
    fake = _fake_bin(tmp_path / "bin", "3.8.10")
    env = dict(os.environ, **{ROOT_VARIABLE: str(root)}, PATH=f"{fake}:/usr/bin:/bin")
    proc = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and not (root / "venv").exists(), proc.stderr
    assert proc.stderr.strip() == ("setup.sh: the base image's Python 3.8.10 is too old and apt has no python3.11 "
                                   "or newer: the grader needs Python 3.11 or newer; choose the Ubuntu 22.04 (or "
                                   "newer) base image on Configure Autograder")
    gate = next(line for line in (root / "source" / "setup.sh").read_text().splitlines() if "sys.version_info" in line)
    snippet = gate.split("-c '", 1)[1].split("'", 1)[0]
    assert "(3, 11)" in snippet, "nbgrader==0.9.6 has Requires-Python >=3.11: the gate asks for that"
    assert subprocess.run([sys.executable, "-c", snippet]).returncode == 0, "this Python (3.11+) passes the gate"


def test_a_container_that_cannot_isolate_learner_code_grades_nothing(bundle, tmp_path):
    """No isolation, no grading, and never --insecure: here as a container without bubblewrap (PATH has none)."""
    root = tmp_path / "root"
    _unpack(bundle, root)
    _submission(root, "reference")
    shell = tmp_path / "bin"   # bash for run_autograder, and no bwrap anywhere on PATH
    shell.mkdir()
    (shell / "bash").symlink_to(shutil.which("bash"))
    no_bwrap = f"{shell}:{Path(sys.executable).parent}"
    env = dict(os.environ, **{ROOT_VARIABLE: str(root), "PATH": no_bwrap})
    check = subprocess.run([sys.executable, "-m", "autograder.batch.gradescope", "--check"], env=env, capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 2 and check.stderr.count("\n") == 1, check.stderr
    assert "cannot isolate learner code" in check.stderr and "apt-get install bubblewrap" in check.stderr
    proc = _run(root, PATH=no_bwrap)
    assert proc.returncode == 0, proc.stderr
    got = json.loads((root / "results" / "results.json").read_text())
    assert got["score"] == 0.0 and got["extra_data"]["status"] == "grader_error"
    assert "cannot isolate learner code, so nothing is graded; it lacks namespaces" in got["output"]


def test_setup_installs_a_python_the_throwaway_uid_can_run(bundle):
    with zipfile.ZipFile(bundle) as zf:
        setup = zf.read("setup.sh").decode()
    # A Python downloaded by uv lives under /root (mode 700), which the throwaway uid cannot run: the venv is
    # made from a system Python under /usr (the image's or apt's), never a downloaded one; the build fails
    # unless an unprivileged uid runs the venv's Python, then unless the image isolates learner code
    assert "uv " not in setup and '"$PY" -m venv "$ROOT/venv"' in setup and "chmod -R a+rX" in setup
    lines = setup.splitlines()
    drop = next(i for i, line in enumerate(lines) if line.startswith("setpriv --reuid=65534"))
    assert lines[drop + 1].strip().startswith("|| {") and "exit 1" in lines[drop + 1]
    assert drop < next(i for i, line in enumerate(lines) if "--check" in line and not line.startswith("#"))
    assert 'for package in autograder lessons' in setup, "the expected answers are root's alone"


def test_bad_bundle_options_are_one_line(tmp_path, capsys):
    proc = subprocess.run([sys.executable, "-m", "autograder", "gradescope", "--out", str(tmp_path / "bundle.tar")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "as a .zip" in proc.stderr, proc.stderr
    # the other bad options through the same main() in this process (a Python apiece was 0.8 s of CPU each)
    import signal

    from autograder import cli
    for args, phrase in ((["--out", str(tmp_path / "a.zip"), "--memory-limit", "lots"], "memory-limit"),
                         (["--out", str(tmp_path / "a.zip"), "--cell-timeout", "0"], "cell-timeout")):
        previous = signal.getsignal(signal.SIGTERM)
        try:
            code = cli.main(["gradescope", *args])
        finally:
            signal.signal(signal.SIGTERM, previous)
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and phrase in err and not (tmp_path / "a.zip").exists(), (args, err)


def test_an_uploaded_link_to_the_solutions_is_not_followed(bundle, tmp_path):
    """A zip may unpack to a link; one to the root would reach source/instructor/, the solutions."""
    root = tmp_path / "root"
    _unpack(bundle, root)
    (root / "submission").mkdir()
    (root / "results").mkdir()
    (root / "submission" / "a").symlink_to(root)
    (root / "submission" / f"{ASSIGNMENT}.py").symlink_to(root / "source" / "instructor" / f"{ASSIGNMENT}.py")
    proc = _run(root)
    assert proc.returncode == 0, proc.stderr
    got = json.loads((root / "results" / "results.json").read_text())
    assert (got["score"], got["extra_data"]["status"]) == (0.0, "missing_submission"), got["output"]


def test_a_folder_chain_beside_the_hand_in_still_gets_results_json(bundle, tmp_path):
    """Issue 34: 1,200 nested folders beside the hand-in ended run_autograder in RecursionError (os.walk
    recursed) with no results.json. The hand-in is found and graded, and the output students read holds no
    isolation summary."""
    root = tmp_path / "root"
    _unpack(bundle, root)
    _submission(root, "reference")
    chain = root / "submission"
    for _ in range(1200):     # os.makedirs and Path.mkdir(parents=True) recurse too
        chain = chain / "d"
        os.mkdir(chain)
    try:
        proc = _run(root)
        assert proc.returncode == 0, proc.stderr[-2000:]
        got = json.loads((root / "results" / "results.json").read_text())
        assert got["extra_data"]["status"] == "graded" and got["score"] == 46.0, got["output"]
        assert "isolation" not in got["output"] and "isolation" not in json.dumps(got["tests"])
    finally:
        # pytest's own clean-up of old temporary folders (shutil.rmtree) recurses and would die on the chain
        # in a later session: take it down here, deepest first, without recursion
        while chain != root / "submission":
            os.rmdir(chain)
            chain = chain.parent

"""The course's environment (issue 39, item 3): ``--python PATH`` runs the notebooks in the course's Python,
inside the sandbox, and before grading the notebooks' imports are checked in the Python actually used.

Before, a package the grader's ``.venv`` lacked failed every hand-in alike (one ``ModuleNotFoundError`` per
student, exit 0), and there was no way to name the course's Python at all.

The course's Python here is a virtual environment made in the test (``python -m venv --without-pip``, about
a second): ``bare`` has nothing installed; ``course`` reaches the grader's site-packages through a ``.pth``
file (so it has ipykernel) and holds one module of its own, ``coursepkg``, that the grader's Python lacks.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[2]


def _venv(folder: Path, with_grader_packages: bool) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    packages = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    if with_grader_packages:
        (packages / "grader-packages.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    (packages / "coursepkg.py").write_text("ANSWER = 42\n")
    return python


def _course(root: Path, test: str) -> tuple[Path, Path]:
    meta = {"nbgrader": {"grade": True, "solution": False, "locked": True, "schema_version": 3,
                         "grade_id": "test_env", "points": 1}}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(test, metadata=meta)], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    for folder in (root / "source" / "ps1", root / "submitted" / "s1" / "ps1"):
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / "env.ipynb")
    return root / "source", root / "submitted"


def _cli(capsys, *argv) -> tuple[int, str]:
    from autograder.cli import main

    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_a_package_the_grader_lacks_is_one_line_before_grading(tmp_path, capsys):
    source, submitted = _course(tmp_path, "import numpy\nfrom coursepkg import ANSWER\nassert ANSWER == 42")
    code, err = _cli(capsys, "autograde", submitted, "--out", tmp_path / "out", "--source", source)
    assert code == 2 and err.count("\n") == 1, err
    assert "coursepkg (env.ipynb)" in err and "the grader's own Python" in err and "--python PATH" in err, err
    assert "numpy" not in err, "what the grader's Python has is not named"
    assert not (tmp_path / "out").exists()


def test_a_course_python_without_ipykernel_is_refused_in_one_line(tmp_path, capsys):
    python = _venv(tmp_path / "bare", with_grader_packages=False)
    source, submitted = _course(tmp_path / "c", "from coursepkg import ANSWER")
    code, err = _cli(capsys, "autograde", submitted, "--out", tmp_path / "out", "--source", source,
                     "--python", python)
    assert code == 2 and err.count("\n") == 1, err
    assert f"the course's Python ({python}) has no ipykernel" in err, err


def test_a_missing_python_is_refused_in_one_line(tmp_path, capsys):
    source, submitted = _course(tmp_path, "pass")
    code, err = _cli(capsys, "autograde", submitted, "--out", tmp_path / "out", "--source", source,
                     "--python", tmp_path / "nope" / "python")
    assert code == 2 and err.count("\n") == 1 and "--python" in err and "no Python there" in err, err


@pytest.mark.slow
@pytest.mark.parametrize("kernels", ["fork", "exec"])
def test_the_notebooks_run_in_the_course_python_inside_the_sandbox(tmp_path, kernels):
    """Forked from a fork server that the course's Python runs, or started fresh under bubblewrap."""
    from autograder.sandbox import KERNELS_ENV

    python = _venv(tmp_path / "course", with_grader_packages=True)
    source, submitted = _course(tmp_path / "c", (
        "import os, sys\nfrom coursepkg import ANSWER\nassert ANSWER == 42\n"
        f"assert sys.executable == {str(python)!r}, sys.executable   # the course's Python, not the grader's\n"
        f"assert sys.prefix == {str(tmp_path / 'course')!r}, sys.prefix\n"
        "assert os.getuid() >= 1_000_000   # in the sandbox, as its throwaway user"))
    proc = subprocess.run([sys.executable, "-m", "autograder", "autograde", str(submitted), "--out",
                           str(tmp_path / "out"), "--source", str(source), "--no-progress", "--python", str(python)],
                          cwd=REPO, capture_output=True, text=True, timeout=600, env={**os.environ, KERNELS_ENV: kernels})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "fresh Python" not in proc.stderr, proc.stderr   # the fork server started with the course's Python
    q = json.loads((tmp_path / "out" / "grades.json").read_text())["students"]["s1"]["questions"]["test_env"]
    assert q["score"] == 1.0, q["message"]


def test_requirements_are_built_once_into_a_kept_environment_that_is_checked(tmp_path, capsys, monkeypatch):
    """Offline: a requirements file that names nothing builds (a venv of the base Python, pip installs
    nothing), and the import check then runs in that environment, not the grader's: no ipykernel there."""
    monkeypatch.setenv("COURSE_GRADE_CACHE", str(tmp_path / "cache"))
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# the course's packages, one a line\n")
    source, submitted = _course(tmp_path / "c", "pass")
    args = ("autograde", submitted, "--out", tmp_path / "out", "--source", source, "--requirements", requirements)
    code, err = _cli(capsys, *args)
    built = list((tmp_path / "cache" / "envs").glob("*/bin/python"))
    assert len(built) == 1 and (built[0].parents[1] / ".course-grade-built").is_file()
    assert code == 2 and err.count("\n") == 2 and "building the course's environment" in err, err
    assert f"the environment built from {requirements} ({built[0]}) has no ipykernel" in err, err
    assert f"add ipykernel to {requirements}" in err, err
    code, err = _cli(capsys, *args)
    assert code == 2 and err.count("\n") == 1 and "has no ipykernel" in err, "kept, not built again: " + err
    requirements.write_text("not a requirement ===\n")
    code, err = _cli(capsys, *args)
    assert code == 2 and err.splitlines()[-1].count("Invalid requirement") == 1, err
    assert "could not build the environment" in err and "--python PATH" in err
    assert len(list((tmp_path / "cache" / "envs").glob("*/bin/python"))) == 1, "a failed build leaves nothing"

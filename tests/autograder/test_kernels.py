"""The kernel a notebook names is honoured (issue 39, item 2; autograder.source.kernels).

Stock nbgrader runs a notebook in the kernel its kernelspec names and fails where it is not installed;
course-grade, before, ran every notebook in its Python kernel whatever it named. Now: a Python kernel
under another name (``xpython``) runs as Python and the instructor is told in one line; a kernel of
another language runs with its installed kernelspec's command, in the sandbox; one that is not
installed refuses the batch before grading, in one line naming it and the installed kernels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[2]


def _notebook(path: Path, kernelspec: dict, test: str) -> None:
    meta = {"nbgrader": {"grade": True, "solution": False, "locked": True, "schema_version": 3,
                         "grade_id": f"test_{path.stem}", "points": 1}}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(test, metadata=meta)],
                                  metadata={"kernelspec": kernelspec})
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _course(root: Path, notebooks: dict[str, tuple[dict, str]]) -> tuple[Path, Path]:
    """source/ps1/ with a notebook per entry (name: (kernelspec, its test cell)), and one learner who hands
    them in unchanged."""
    for name, (kernelspec, test) in notebooks.items():
        _notebook(root / "source" / "ps1" / f"{name}.ipynb", kernelspec, test)
        submitted = root / "submitted" / "s1" / "ps1"
        submitted.mkdir(parents=True, exist_ok=True)
        (submitted / f"{name}.ipynb").write_bytes((root / "source" / "ps1" / f"{name}.ipynb").read_bytes())
    return root / "source", root / "submitted"


@pytest.mark.parametrize("kernelspec", [{"name": "ir", "display_name": "R", "language": "R"},
                                        {"name": "julia-1.10", "display_name": "Julia 1.10", "language": "julia"}],
                         ids=["R", "Julia"])
def test_a_kernel_of_another_language_that_is_not_installed_is_refused_in_one_line(tmp_path, capsys, kernelspec):
    from autograder.cli import main

    source, submitted = _course(tmp_path, {"hw": (kernelspec, "1 + 1")})
    code = main(["autograde", str(submitted), "--out", str(tmp_path / "out"), "--source", str(source)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"the kernel {kernelspec['name']!r} (language {kernelspec['language']})" in err
    assert "not installed here (installed kernels: python3" in err
    assert not (tmp_path / "out").exists(), "refused before anything is graded"


@pytest.mark.slow
def test_a_python_kernel_under_another_name_and_an_installed_kernel_of_another_language_run(tmp_path):
    """One batch, two notebooks: ``xpython`` (language python) runs in course-grade's Python kernel, with a
    warning; ``fake-octave`` (language octave, installed through $JUPYTER_PATH) runs its own command in the
    sandbox (that command is a plain ``python -m ipykernel_launcher``: without course-grade's ``-P``)."""
    kernels = tmp_path / "jupyter" / "kernels" / "fake-octave"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Fake language", "language": "octave"}))
    source, submitted = _course(tmp_path, {
        "intro": ({"name": "xpython", "display_name": "Python 3.11 (XPython)", "language": "python"},
                  "import sys\nassert sys.flags.safe_path  # course-grade's own Python kernel"),
        "other": ({"name": "fake-octave", "display_name": "Fake language", "language": "octave"},
                  "import os, sys\nassert not sys.flags.safe_path  # the installed kernel's command\n"
                  "assert os.path.basename(os.getcwd()) == 'work'  # in the sandbox's folder")})
    env = dict(os.environ, JUPYTER_PATH=str(tmp_path / "jupyter"))
    proc = subprocess.run([sys.executable, "-m", "autograder", "autograde", str(submitted), "--out",
                           str(tmp_path / "out"), "--source", str(source), "--no-progress"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warnings = [line for line in proc.stderr.splitlines() if "xpython" in line]
    assert len(warnings) == 1 and "language python" in warnings[0] and "Python kernel" in warnings[0], proc.stderr
    grades = json.loads((tmp_path / "out" / "grades.json").read_text())["students"]["s1"]
    assert {gid: (q["score"], q["message"]) for gid, q in grades["questions"].items()} == {
        "test_intro": (1.0, "correct"), "test_other": (1.0, "correct")}

"""The L14.4 lab, run as a learner runs it: `python3 labs/notebooks/level-14/l14-04-model-memory.py`.

Expected figures are worked by hand from the lesson: a 24 GB device, 14 GB weights, 2 GB
workspace, 2 GB reserve; Llama-2-7B's fp16 KV cache is 2 x 32 layers x 32 heads x 128 dims
x 2 B = 524,288 B per token, x 1,024 tokens = 536,870,912 B per sequence.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

LAB = Path("labs") / "notebooks" / "level-14" / "l14-04-model-memory.py"
KV_PER_SEQUENCE = 524_288 * 1024                 # 536,870,912 B
KNOB = re.compile(r"^active_sequences = 8\b", re.MULTILINE)


def run_lab(python: str, lab: Path, cwd: Path, env: dict[str, str]) -> dict:
    proc = subprocess.run([python, str(lab)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"the lab failed under {python}:\n{proc.stderr}"
    return parse(proc.stdout)


def parse(stdout: str) -> dict:
    """Read `name = <python literal>` lines and the verdict line back."""
    out: dict = {"stdout": stdout}
    for line in stdout.splitlines():
        for key in ("parts_gb", "parts_bytes", "headroom_gb", "active_sequences"):
            if line.startswith(f"{key} = "):
                out[key] = ast.literal_eval(line[len(key) + 3:].strip())
        if line.startswith("verdict:"):
            out["verdict"] = line
    for key in ("parts_gb", "parts_bytes", "headroom_gb", "verdict"):
        assert key in out, f"the lab should print a `{key}` line:\n{stdout}"
    return out


def env_without_pythonpath() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)           # the lab must find course_lib by itself, from the repo root
    return env


@pytest.fixture(scope="module", params=["venv python", "system python3"])
def python(request, python_exe):
    """The lab runs under the test interpreter and under plain `python3`, as learners run it."""
    if request.param == "venv python":
        return python_exe
    system = shutil.which("python3")
    if system is None:
        pytest.skip("no python3 on PATH")
    return system


@pytest.fixture(scope="module")
def lab_at_8(repo_root, python):
    return run_lab(python, LAB, repo_root, env_without_pythonpath())


@pytest.fixture(scope="module")
def lab_at_16(repo_root, python, tmp_path_factory):
    source = (repo_root / LAB).read_text(encoding="utf-8")
    assert len(KNOB.findall(source)) == 1, "the lab should have exactly one line `active_sequences = 8`"
    edited = KNOB.sub("active_sequences = 16", source)
    changed = [l for l in difflib.ndiff(source.splitlines(), edited.splitlines()) if l[:2] in ("- ", "+ ")]
    assert len(changed) == 2, f"only the active_sequences line should change: {changed}"
    root = tmp_path_factory.mktemp("learner")
    lab = root / LAB
    lab.parent.mkdir(parents=True)
    lab.write_text(edited, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(repo_root))
    return run_lab(python, lab, repo_root, env)


def test_at_8_parts_and_headroom(lab_at_8):
    out = lab_at_8
    assert out["active_sequences"] == 8
    assert set(out["parts_gb"]) == {"weights", "workspace", "reserve", "kv_cache"}
    # 8 x 536,870,912 B = 4,294,967,296 B = 4.295 GB
    assert out["parts_bytes"] == {"weights": 14 * 10**9, "workspace": 2 * 10**9, "reserve": 2 * 10**9,
                                  "kv_cache": 8 * KV_PER_SEQUENCE}
    assert out["parts_gb"] == {"weights": 14.0, "workspace": 2.0, "reserve": 2.0, "kv_cache": 4.295}
    # 24 - 14 - 2 - 2 - 4.294967296 = 1.705032704 GB
    assert out["headroom_gb"] == 1.705


def test_at_8_fits(lab_at_8):
    verdict = lab_at_8["verdict"]
    assert "fits" in verdict and "not" not in verdict, verdict


def test_at_16_only_kv_cache_doubles(lab_at_8, lab_at_16):
    before, after = lab_at_8["parts_bytes"], lab_at_16["parts_bytes"]
    assert lab_at_16["active_sequences"] == 16
    assert after["kv_cache"] == 2 * before["kv_cache"] == 16 * KV_PER_SEQUENCE == 8_589_934_592
    for fixed in ("weights", "workspace", "reserve"):
        assert after[fixed] == before[fixed], f"{fixed} must not change with active_sequences"
    assert lab_at_16["parts_gb"]["kv_cache"] == 8.59


def test_at_16_does_not_fit(lab_at_16):
    # 6 GB left for requests, 8.589934592 GB needed: 2.59 GB over
    assert lab_at_16["headroom_gb"] == -2.59
    assert "does not fit" in lab_at_16["verdict"], lab_at_16["verdict"]


def test_graders_run_the_same_lab_file_once(tmp_path, monkeypatch, repo_root):
    """The notebook runs the lab twice; under a grader (NBGRADER_EXECUTION) the same bytes run once
    and print the same again, an edited file runs again, and a learner's notebook always runs it."""
    from course_lib.lessons.l14_04 import labfile

    lab = tmp_path / LAB.name
    lab.write_text((repo_root / LAB).read_text())
    runs = []
    real_run = subprocess.run
    monkeypatch.setattr(labfile.subprocess, "run", lambda *a, **kw: runs.append(a) or real_run(*a, **kw))
    monkeypatch.setattr(labfile, "_GRADED_RUNS", {})
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    first = labfile.run_lab(lab)
    assert labfile.run_lab(lab) == first and len(runs) == 2, "a learner's notebook runs the lab every time"
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    graded = labfile.run_lab(lab)
    graded["parts_gb"]["kv_cache"] = "changed by the caller"
    assert labfile.run_lab(lab) == first and len(runs) == 3, "the same bytes: printed again, not run again"
    lab.write_text(lab.read_text().replace("active_sequences = 8 ", "active_sequences = 16 ", 1))
    edited = labfile.run_lab(lab)
    assert len(runs) == 4 and edited["fits"] is False and first["fits"] is True


def test_runs_beside_the_notebook_with_the_installed_course_lib(tmp_path, repo_root, python_exe):
    """In a workspace the lab sits beside the notebook and runs as ``python3 l14-04-model-memory.py``,
    with the course_lib installed in that Python. Nothing else goes on sys.path: a ``course_lib``
    four folders up (where the old ``parent.parent.parent.parent`` insert looked) is never imported."""
    folder = tmp_path / "home" / "learner-workspace" / "l14-04-model-memory"
    folder.mkdir(parents=True)
    shutil.copy(repo_root / LAB, folder / LAB.name)
    decoy = tmp_path / "course_lib"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the lab imported an unrelated folder')\n")
    out = run_lab(python_exe, Path(LAB.name), folder, env_without_pythonpath())   # the venv has course_lib installed
    assert out["parts_gb"] == {"weights": 14.0, "workspace": 2.0, "reserve": 2.0, "kv_cache": 4.295}
    assert "does not fit" not in out["verdict"]


def test_the_docstring_says_how_to_run_it_in_both_places(repo_root):
    doc = ast.get_docstring(ast.parse((repo_root / LAB).read_text(encoding="utf-8")))
    assert "python3 l14-04-model-memory.py" in doc, "the workspace command (the lab beside the notebook)"
    assert f"python3 {LAB.as_posix()}" in doc, "the repository command (from its root)"


@pytest.mark.parametrize("typo, error", [
    ("active_sequences = 16 +", "SyntaxError"),                      # does not parse
    ("active_sequences = activ_sequences", "NameError: name 'activ_sequences' is not defined"),
])
def test_a_typo_in_the_lab_is_one_line_naming_the_learners_own_line(typo, error, tmp_path, repo_root):
    """Issue 41: a typo showed a traceback through the library (labfile.py:148). Now the notebook shows one
    line: the lab file's name, the line of the learner's typo (counted here from the file) and the error,
    and no frame or line of course_lib (IPython renders an exception by its _render_traceback_)."""
    from course_lib.lessons.l14_04.labfile import LabFailed, run_lab as library_run_lab

    source = (repo_root / LAB).read_text(encoding="utf-8")
    lab = tmp_path / LAB.name
    lab.write_text(KNOB.sub(typo, source), encoding="utf-8")
    line = next(i for i, text in enumerate(source.splitlines(), 1) if KNOB.match(text))
    with pytest.raises(LabFailed) as failed:
        library_run_lab(lab)
    shown = failed.value._render_traceback_()
    assert len(shown) == 1 and shown[0].startswith(f"LabFailed: {LAB.name}, line {line}: {error}"), shown
    assert "labfile.py" not in shown[0] and "course_lib" not in shown[0] and "Traceback" not in shown[0]


def test_the_released_code_lines_are_the_labs(repo_root):
    """labfile.RELEASED_CODE_LINES (what the visible lab check compares with: a learner's folder keeps no
    released copy) are the lines of code of the lab in this checkout, the knob at its released value."""
    from course_lib.lessons.l14_04 import labfile
    from lessons.l14_04.lab import EDITED_VALUE, RELEASED_VALUE       # what the grader compares with
    assert (labfile.LAB_RELEASED_SEQUENCES, labfile.LAB_EDITED_SEQUENCES) == (RELEASED_VALUE, EDITED_VALUE)
    text = (repo_root / LAB).read_text(encoding="utf-8")
    digests = tuple(labfile.line_digest(line) for _, line in labfile.code_lines(text))
    assert digests == labfile.RELEASED_CODE_LINES, f"update RELEASED_CODE_LINES to {digests}"


@pytest.mark.parametrize("edit, words", [
    # the slip: a global sed also rewrote the docstring's step 3 (2 points lost, silently)
    (lambda t: t.replace("active_sequences = 8", "active_sequences = 16"), "changed outside active_sequences: line 13"),
    (lambda t: KNOB.sub("active_sequences = 16", t).replace("context_tokens = 1024", "context_tokens = 2048"),
     "line 35: context_tokens = 2048"),
    (lambda t: KNOB.sub("active_sequences = 12", t), "step 3 asks for the whole number 16"),
])
def test_the_visible_lab_check_names_a_change_the_grader_takes_points_for(edit, words, tmp_path, repo_root,
                                                                           monkeypatch):
    """Issue 41: nothing visible said that only the knob changed. The rerun cell's check names the first other
    changed line (as the grader's AST comparison counts it: comments and blank lines are free)."""
    from course_lib.lessons.l14_04 import practice
    from lessons.l14_04.lab import compare_lab
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    released = (repo_root / LAB).read_text(encoding="utf-8")
    lab = tmp_path / LAB.name
    lab.write_text(edit(released), encoding="utf-8")
    with pytest.raises(practice.CheckFailed, match=re.escape(words)):
        practice.check_lab_edit(lab)
    assert compare_lab(released, lab.read_text())[1] is False, "the grader takes the edit's point as well"


def test_the_visible_lab_check_passes_the_one_edit_and_reminds_an_unedited_lab(tmp_path, repo_root, monkeypatch,
                                                                                capsys):
    from course_lib.lessons.l14_04 import practice
    from course_lib.lessons.l14_04.labfile import edit_knob
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    released = (repo_root / LAB).read_text(encoding="utf-8")
    lab = tmp_path / LAB.name
    lab.write_text(released, encoding="utf-8")
    practice.check_lab_edit(lab)
    assert "still says active_sequences = 8" in capsys.readouterr().out
    lab.write_text(edit_knob(released, 16).replace("# sequences generating", "# now 16 sequences generating"))
    practice.check_lab_edit(lab)
    assert capsys.readouterr().out.startswith("\u2713 the lab edit")

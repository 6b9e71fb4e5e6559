"""The batch reads each hand-in once without holding every hand-in's bytes in its memory (issue 39).

A class whose notebooks are each near the size cap (a hostile class can do that on purpose) must not turn
into a grader that needs the class's total in memory: ``collect_hand_ins`` stages each hand-in's bytes in
``RESULTS_DIR/.hand-ins/`` as it reads them, and the job (local or Dask) and ``submitted/`` read that copy,
one hand-in at a time. Measured with :mod:`tracemalloc` (every Python allocation, the bytes read included)
around the collect step for 40 hand-ins of ~2 MB each: the peak must stay under three hand-ins' bytes,
where holding them all is 40.
"""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import nbformat

from autograder.batch.autograde import Request, Source, collect_hand_ins
from autograder.contract.settings import Settings
from autograder.run.handin import HandIn
from autograder.run.job import Batch
from autograder.source.assignment import Assignment

STUDENTS = 40
NOTEBOOK_BYTES = 2_000_000
ASSIGNMENT = Assignment("ps1", (Path("problem1.ipynb"),))


def _class(tmp_path: Path) -> tuple[Request, Source, Batch, dict[str, bytes]]:
    """STUDENTS hand-ins, each a valid notebook of ~NOTEBOOK_BYTES (one big markdown cell), each its own."""
    submitted, results = tmp_path / "submitted", tmp_path / "results"
    results.mkdir()
    template = nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("@" * NOTEBOOK_BYTES)]))
    written = {}
    for i in range(STUDENTS):
        sid = f"s{i:03d}"
        (submitted / sid / ASSIGNMENT.name).mkdir(parents=True)
        data = template.replace("@" * 8, sid.ljust(8, "-"), 1).encode()
        (submitted / sid / ASSIGNMENT.name / "problem1.ipynb").write_bytes(data)
        written[sid] = data
    request = Request(submitted, results, Settings(), workers=1, cluster=None, course_env=None, requirements=None)
    source = Source(ASSIGNMENT, lesson=None, students=sorted(written), skipped={}, kernels={})
    batch = Batch(ASSIGNMENT, Settings(), {}, "f" * 64, str(results))
    return request, source, batch, written


def test_collecting_a_class_holds_about_one_hand_in_in_memory_not_the_class(tmp_path):
    request, source, batch, written = _class(tmp_path)
    one = max(len(data) for data in written.values())
    tracemalloc.start()
    try:
        plan = collect_hand_ins(request, source, batch, regrade=False)
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(plan.jobs) == STUDENTS
    print(f"peak {peak_bytes:,} bytes for {STUDENTS} hand-ins of {one:,} bytes ({peak_bytes / one:.2f} hand-ins)")
    assert peak_bytes < 3 * one, (f"collecting {STUDENTS} hand-ins of {one:,} bytes peaked at {peak_bytes:,} bytes "
                                  f"({peak_bytes / one:.1f} hand-ins)")
    # and the hashes are the ones of the bytes in memory (the reuse rule is unchanged)
    for sid, data in list(written.items())[:3]:
        in_memory = HandIn.read(request.submitted_dir / sid / ASSIGNMENT.name, ASSIGNMENT)
        assert in_memory.files["problem1.ipynb"] == data and plan.hand_ins[sid].sha == in_memory.sha


def test_a_job_and_a_dask_task_read_the_staged_copy_of_their_hand_in_alone(tmp_path):
    from autograder.batch.autograde import staging_folder
    from autograder.run.handin import Staged

    request, source, batch, written = _class(tmp_path)
    plan = collect_hand_ins(request, source, batch, regrade=False)
    job = plan.jobs[7]
    staged = job.hand_in.files["problem1.ipynb"]
    assert isinstance(staged, Staged) and Path(staged.path).parent.parent == staging_folder(request.results_dir)
    assert os.stat(staging_folder(request.results_dir)).st_mode & 0o077 == 0   # the grader's alone
    # the learner's file is gone; the staged copy is what is graded and what a Dask task carries
    (request.submitted_dir / job.student_id / ASSIGNMENT.name / "problem1.ipynb").unlink()
    assert job.hand_in.contents()["problem1.ipynb"] == written[job.student_id]
    assert job.hand_in.loaded().files["problem1.ipynb"] == written[job.student_id]


def test_staging_left_by_a_killed_batch_is_not_trusted(tmp_path):
    from autograder.batch.autograde import staging_folder

    request, source, batch, written = _class(tmp_path)
    left = staging_folder(request.results_dir) / "s000"
    left.mkdir(parents=True)
    (left / "0").write_bytes(b"what a killed batch left")
    (staging_folder(request.results_dir) / "gone").mkdir()
    plan = collect_hand_ins(request, source, batch, regrade=False)
    assert plan.hand_ins["s000"].contents()["problem1.ipynb"] == written["s000"]
    assert not (staging_folder(request.results_dir) / "gone").exists()


def test_a_staging_folder_that_cannot_be_made_is_one_line_not_a_traceback(tmp_path):
    import pytest

    from autograder.batch.autograde import staging_folder
    from autograder.errors import AutograderError

    request, source, batch, _ = _class(tmp_path)
    staging_folder(request.results_dir).write_text("a file where the folder goes")
    with pytest.raises(AutograderError, match="cannot make .*hand-ins"):
        collect_hand_ins(request, source, batch, regrade=False)

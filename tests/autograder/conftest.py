"""Fixtures shared by the grader's tests: the example class as local workers grade it."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CLASS = REPO / "examples" / "submissions"


@pytest.fixture(scope="session")
def example_class_local(tmp_path_factory):
    """The committed example class graded once per session by local worker processes, default settings:
    the grades the Dask and Gradescope graders must reproduce. Returns (BatchResult, RESULTS_DIR)."""
    from autograder.autograde import main as autograde

    results = tmp_path_factory.mktemp("example-class-local") / "results"
    batch = autograde(EXAMPLE_CLASS, out=results, workers=2, progress=False)
    students = {p.name for p in EXAMPLE_CLASS.iterdir() if p.is_dir()}
    assert set(batch.students) == students and all(r.status == "graded" for r in batch.students.values()), batch.counts()
    return batch, results

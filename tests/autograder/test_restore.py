"""Reading and restoring a hand-in (autograder.source.restore), without a kernel: fast, every shape.

The hardening batch grades one submission per bad-metadata shape (all four cells at once); here
each of the 28 (shape, cell) pairs goes alone through read, restore, scoring and the feedback page, and the file reader meets links, FIFOs, foreign owners and oversized files.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "files" / "autograder"))
import hostile  # noqa: E402

from autograder.source.assignment import load_source  # noqa: E402
from autograder.contract.cells import has_nbgrader, nbgrader_meta  # noqa: E402
from autograder.run.execute import Execution  # noqa: E402
from autograder.publish.feedback import feedback_html  # noqa: E402
from autograder.source.restore import MAX_CELLS, Refused, read_handed_in, read_submission, restore_cells  # noqa: E402
from autograder.contract.results import StudentResult  # noqa: E402
from autograder.run.scoring import score_tests  # noqa: E402
from autograder.source.assignment import load_lesson  # noqa: E402

SPEC = load_source(hostile.assignment()).notebooks[0]
CHECKS = load_lesson(str(hostile.FIXTURE_LESSON)).checks
PAIRS = list(itertools.product(hostile.BAD_METADATA, hostile.BAD_METADATA_CELLS))


def test_there_are_28_shapes():
    assert len(PAIRS) == 28


@pytest.mark.parametrize("shape, cell", PAIRS, ids=[f"{s}-{c}" for s, c in PAIRS])
def test_every_bad_metadata_shape_is_restored_from_the_source(shape, cell):
    nb = hostile.bad_metadata(hostile.BAD_METADATA[shape], cells=(cell,))
    submitted = read_submission(nbformat.writes(nb).encode())
    restored, notes = restore_cells(submitted, SPEC)
    assert any("unknown shape" in n for n in notes), notes
    source = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"] for c in SPEC.nb.cells if has_nbgrader(c)}
    for c in restored.cells:  # every nbgrader metadata left is the instructor's, word for word
        if has_nbgrader(c):
            meta = nbgrader_meta(c)
            assert meta == source[meta["grade_id"]]
    ids = [nbgrader_meta(c).get("grade_id") for c in restored.cells]
    assert all(t.grade_id in ids for t in SPEC.tests), "every test is there"
    if cell == "test_kv_per_token":  # re-inserted after the answer it tests, not before it
        assert ids.index("test_kv_per_token") > ids.index("kv_per_token")
    # What scoring and the feedback page do with it must not raise either.
    execution = Execution(nb=restored, status="completed", message="", stopped_at=None, seconds=0.0)
    questions = score_tests(execution, SPEC, CHECKS)
    result = StudentResult("x", "graded", 0.0, 8.0, 2.0, True, questions)
    assert "Autograded score" in feedback_html(restored, result)


def _hand_in(tmp_path: Path, data: bytes | None = None) -> Path:
    folder = tmp_path / "submitted" / "alice" / hostile.ASSIGNMENT
    folder.mkdir(parents=True)
    if data is not None:
        (folder / hostile.NOTEBOOK).write_bytes(data)
    return folder


def test_the_reader_takes_a_plain_file_and_says_absent_for_none(tmp_path):
    folder = _hand_in(tmp_path, b"{}")
    assert read_handed_in(folder, hostile.NOTEBOOK, 100) == b"{}"
    assert read_handed_in(folder, "other.py", 100) is None
    assert read_handed_in(tmp_path / "submitted" / "bob" / hostile.ASSIGNMENT, hostile.NOTEBOOK, 100) is None


def test_the_victim_of_a_hard_link_is_graded_and_the_linker_refused(tmp_path):
    """Mallory links Alice's notebook into her own folder: Alice's hand-in is still hers (owned by her,
    in her folder) and is read; Mallory's is Alice's file, owned by Alice, and is refused."""
    if os.geteuid() != 0:
        pytest.skip("two learners' uids need root")
    alice, mallory = (tmp_path / "submitted" / sid / hostile.ASSIGNMENT for sid in ("alice", "mallory"))
    for uid, folder in ((5001, alice), (5002, mallory)):
        folder.mkdir(parents=True)
        os.chown(folder, uid, uid)
    (alice / hostile.NOTEBOOK).write_bytes(b'{"alice": 1}')
    os.chown(alice / hostile.NOTEBOOK, 5001, 5001)
    os.link(alice / hostile.NOTEBOOK, mallory / hostile.NOTEBOOK)
    assert read_handed_in(alice, hostile.NOTEBOOK, 100) == b'{"alice": 1}'
    with pytest.raises(Refused, match="owned by uid 5001, not by the owner of its folder"):
        read_handed_in(mallory, hostile.NOTEBOOK, 100)


@pytest.mark.parametrize("how, why", [
    ("hardlink", "2 hard links"), ("symlink", "is a link"), ("fifo", "not a regular file"),
    ("folder", "not a regular file"), ("big", "over the"), ("owner", "owned by uid 4242"),
    ("linked_folder", "submission folder is a link")])
def test_the_reader_refuses_without_reading(tmp_path, how, why):
    secret = tmp_path / "secret"
    secret.write_text(hostile.SECRET)
    os.chmod(secret, 0o600)
    folder = _hand_in(tmp_path)
    target = folder / hostile.NOTEBOOK
    if how == "hardlink":
        os.link(secret, target)
    elif how == "symlink":
        target.symlink_to(secret)
    elif how == "fifo":
        os.mkfifo(target)
    elif how == "folder":
        target.mkdir()
    elif how == "big":
        target.write_bytes(b" " * 101)
    elif how == "owner":
        if os.geteuid() != 0:
            pytest.skip("chown needs root")
        target.write_text("{}")
        os.chown(target, 4242, 4242)
    elif how == "linked_folder":
        real = tmp_path / "elsewhere"
        real.mkdir()
        (real / hostile.NOTEBOOK).write_text("{}")
        folder.rmdir()
        folder.symlink_to(real)
    with pytest.raises(Refused, match=why) as info:
        read_handed_in(folder, hostile.NOTEBOOK, 100)
    assert hostile.SECRET not in str(info.value)


@pytest.mark.parametrize("data", [
    hostile.SECRET.encode() + b" {", b'{"cells": "' + hostile.SECRET.encode() + b'"}',
    b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "' + hostile.SECRET.encode()
    + b'", "metadata": {}, "source": ""}]}', b"\xff" + hostile.SECRET.encode()])
def test_refusals_never_quote_the_file(data):
    with pytest.raises(Refused) as info:
        read_submission(data)
    assert hostile.SECRET not in str(info.value) and "d41d8" not in str(info.value)


def test_the_cell_count_and_source_size_are_bounded_before_nbformat_sees_them():
    nb = json.loads(nbformat.writes(hostile.learner_notebook()))
    nb["cells"] += [{"cell_type": "markdown", "metadata": {}, "source": "x"}] * MAX_CELLS
    with pytest.raises(Refused, match="cells, over the limit"):
        read_submission(json.dumps(nb).encode())
    nb = json.loads(nbformat.writes(hostile.learner_notebook()))
    nb["cells"][1]["source"] = "#" * 3_000_000
    with pytest.raises(Refused, match="characters of source"):
        read_submission(json.dumps(nb).encode())


@pytest.mark.parametrize("flags, refusal", [
    ({"points": True}, "needs points"),        # a bool is not a number of points
    ({"points": "2"}, "needs points"),
    ({"points": -1}, "needs points"),
])
def test_instructor_metadata_is_read_by_the_same_rules_as_a_submission(tmp_path, flags, refusal):
    from autograder.errors import AutograderError

    nb = nbformat.read(hostile.FIXTURE, as_version=4)
    test = next(c for c in nb.cells if nbgrader_meta(c).get("grade") is True and not nbgrader_meta(c).get("solution"))
    test.metadata["nbgrader"].update(flags)
    path = tmp_path / "source.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(AutograderError, match=refusal):
        load_source(hostile.assignment(path))


def test_a_truthy_flag_that_is_not_true_makes_no_grade_cell(tmp_path):
    # "grade": 1 is not true for a submission's cells (cells.is_grade), so not for the source either:
    # the source and every restored submission agree on which cells carry points.
    nb = nbformat.read(hostile.FIXTURE, as_version=4)
    test = next(c for c in nb.cells if nbgrader_meta(c).get("grade") is True and not nbgrader_meta(c).get("solution"))
    test.metadata["nbgrader"]["grade"] = 1
    path = tmp_path / "source.ipynb"
    nbformat.write(nb, path)
    spec = load_source(hostile.assignment(path))
    assert test.metadata["nbgrader"]["grade_id"] not in {t.grade_id for t in spec.tests}
    assert spec.max_score == load_source(hostile.assignment()).max_score - nbgrader_meta(test)["points"]


def test_an_nbformat_3_hand_in_is_converted_as_stock_nbgrader_converts_it():
    """Issue 34: a notebook saved as nbformat 3 (IPython 2: cells in worksheets, code in "input") was refused
    ("no list of cells") where stock nbgrader reads it with nbformat.read(..., as_version=4). The reference
    hand-in written as v3 is read as the same cells, answers and all, with nothing noted."""
    from lessons.l14_04.examples import this_assignment
    path = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "reference" / "l14-04-model-memory" / "l14-04-model-memory.ipynb"
    v4 = nbformat.read(path, as_version=4)
    v3 = nbformat.writes(nbformat.convert(copy.deepcopy(v4), 3), version=3)   # convert changes its argument
    assert '"worksheets"' in v3 and '"cells": [' in v3
    got = read_submission(v3.encode())
    expected = nbformat.reads(v3, as_version=4)          # what stock nbgrader reads
    assert [(c.cell_type, c.source) for c in got.cells] == [(c.cell_type, c.source) for c in expected.cells]
    assert [(c.cell_type, c.source) for c in got.cells] == [(c.cell_type, c.source) for c in v4.cells]
    spec = load_source(this_assignment()).notebooks[0]
    assert restore_cells(got, spec)[1] == []

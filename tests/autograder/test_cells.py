"""cells.released_source gives what nbgrader's own ClearSolutions releases, on every solution cell the
grader meets (L14.4, the hardening fixture, nbgrader's ps1) and on cells written for its corners."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
import pytest
from nbgrader.preprocessors import ClearSolutions

from autograder.contract.cells import grade_id, is_solution, released_source

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = [REPO / "notebooks" / "level-14" / "l14-04-model-memory.ipynb",
             REPO / "notebooks" / "level-14" / "l14-04-runtime-lab.ipynb",
             REPO / "tests" / "files" / "autograder" / "fixture" / "l14-04-model-memory.ipynb",
             *sorted((REPO / "tests" / "files" / "nbgrader_example" / "source" / "ps1").glob("*.ipynb"))]


def _cell(kind: str, source: str) -> nbformat.NotebookNode:
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    return make(source, metadata={"nbgrader": {"grade": False, "solution": True, "locked": False,
                                               "grade_id": "answer", "schema_version": 3}})


CORNERS = [
    _cell("code", "x = 1"),                                                    # no region: the stub whole
    _cell("markdown", "An answer with no markers."),
    _cell("code", "def f():\n\t### BEGIN SOLUTION\n\treturn 1\n\t### END SOLUTION\nprint(f())"),   # a tab indent
    _cell("code", "a = 1\n# BEGIN SOLUTION\nb = 2\n# END SOLUTION\nc = 3\n### BEGIN SOLUTION\nd\n### END SOLUTION"),
    _cell("markdown", "Intro\n=== BEGIN SOLUTION ===\nsecret\n=== END SOLUTION ===\nOutro"),
    _cell("code", ""),
]


def _nbgrader(nb: nbformat.NotebookNode) -> dict[int, str]:
    released, _ = ClearSolutions().preprocess(copy.deepcopy(nb), {})
    return {i: c.source for i, c in enumerate(released.cells) if is_solution(c)}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.parent.name + "/" + p.name for p in NOTEBOOKS])
def test_every_solution_cell_is_released_as_nbgrader_releases_it(path):
    nb = nbformat.read(path, as_version=4)
    expected = _nbgrader(nb)
    assert expected, f"{path.name} has solution cells"
    got = {i: released_source(c) for i, c in enumerate(nb.cells) if is_solution(c)}
    assert got == expected, [grade_id(nb.cells[i]) for i in got if got[i] != expected.get(i)]


@pytest.mark.parametrize("cell", CORNERS, ids=range(len(CORNERS)))
def test_the_corners_are_released_as_nbgrader_releases_them(cell):
    nb = nbformat.v4.new_notebook(cells=[cell])
    assert released_source(cell) == _nbgrader(nb)[0]


def test_an_unclosed_region_is_refused_as_nbgrader_refuses_it():
    cell = _cell("code", "### BEGIN SOLUTION\nx = 1")
    with pytest.raises(RuntimeError):
        ClearSolutions().preprocess(nbformat.v4.new_notebook(cells=[copy.deepcopy(cell)]), {})
    with pytest.raises(ValueError, match="without its END SOLUTION"):
        released_source(cell)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.parent.name + "/" + p.name for p in NOTEBOOKS])
def test_every_locked_cell_is_released_as_nbgrader_releases_it(path):
    from nbgrader.preprocessors import ClearHiddenTests

    from autograder.contract.cells import is_locked, released_test_source
    nb = nbformat.read(path, as_version=4)
    released, _ = ClearHiddenTests().preprocess(copy.deepcopy(nb), {})
    locked = [i for i, c in enumerate(nb.cells) if is_locked(c)]
    if not locked:
        pytest.skip(f"{path.name} has no locked cells")
    assert {i: released_test_source(nb.cells[i]) for i in locked} == {i: released.cells[i].source for i in locked}


def test_an_honest_hand_in_has_no_restore_notes_and_a_real_edit_has_one():
    """Issue 34: every honest hand-in got 25 "test_X was edited; restored" notes (its test cells are the
    released ones, without the hidden tests, never the instructor's), so real tampering could not be seen.
    The reference learner of the example class hands in the release's test cells untouched."""
    from autograder.source.assignment import load_source
    from autograder.source.restore import restore_cells
    from lessons.l14_04.examples import this_assignment

    spec = load_source(this_assignment()).notebooks[0]
    handed = nbformat.read(REPO / "examples" / "submissions" / "reference" / "l14-04-model-memory" /
                           "l14-04-model-memory.ipynb", as_version=4)
    assert restore_cells(handed, spec)[1] == []
    test = next(c for c in handed.cells if grade_id(c) == "test_kv_cache")
    test.source += "\nprint('an edit')"
    assert restore_cells(handed, spec)[1] == ["test_kv_cache was edited; restored from the instructor source"]

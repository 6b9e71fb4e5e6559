"""Put the instructor's cells back into a submitted notebook, and read submissions safely.

Everything that decides a grade comes from the instructor source, never from a
submission: :func:`restore_cells` replaces every locked cell (tests included) by
grade_id, wherever the learner edited, moved or deleted it, and clears every output.
"""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat

from .assignment import SourceSpec
from .cells import grade_id as _grade_id


def restore_cells(submitted: nbformat.NotebookNode, spec: SourceSpec) -> tuple[nbformat.NotebookNode, list[str]]:
    """The notebook to execute: the learner's answers with every locked cell put back from the source.

    - test cells and read-only cells are replaced, by grade_id, with the instructor's cell
      (hidden tests included), and re-inserted where the source has them if deleted;
    - answer cells keep the learner's text but take their nbgrader metadata (points) from the source;
    - any other cell claiming nbgrader metadata (a copied or invented grade_id) loses it;
    - every output is cleared, so nothing from the submitted file can pass as an answer.

    Returns the notebook and a list of notes on what was restored.
    """
    source_cells = {_grade_id(c): c for c in spec.nb.cells if _grade_id(c)}
    out, notes, taken = [], [], set()
    for cell in submitted.cells:
        cell = copy.deepcopy(cell)
        gid = _grade_id(cell)
        if gid is not None and (gid in taken or gid not in source_cells):
            cell.metadata.pop("nbgrader", None)  # a duplicate or an invented grade cell
            if gid in taken:
                notes.append(f"a second cell claiming {gid!r} was demoted to a plain cell")
            gid = None
        if gid in spec.locked_ids:
            original = source_cells[gid]
            if cell.get("source") != original.source or cell.cell_type != original.cell_type:
                notes.append(f"{gid} was edited; restored from the instructor source")
            cell = _fresh(original)
        elif gid in spec.solution_ids:
            cell.metadata["nbgrader"] = copy.deepcopy(source_cells[gid].metadata["nbgrader"])
            if cell.cell_type != source_cells[gid].cell_type:
                cell = _fresh(source_cells[gid], source=cell.get("source", ""))
        if gid:
            taken.add(gid)
        out.append(cell)

    # Re-insert deleted locked cells after the nearest preceding source cell that is present.
    order = [_grade_id(c) for c in spec.nb.cells if _grade_id(c)]
    for pos, gid in enumerate(order):
        if gid in taken or gid not in spec.locked_ids:
            continue
        anchor = next((order[j] for j in range(pos - 1, -1, -1) if order[j] in taken), None)
        if anchor is None:
            at = 0
        else:
            at = next(i for i, c in enumerate(out) if _grade_id(c) == anchor) + 1
        out.insert(at, _fresh(source_cells[gid]))
        taken.add(gid)
        notes.append(f"{gid} was deleted; re-inserted from the instructor source")

    for i, cell in enumerate(out):
        cell["id"] = f"cell-{i}"  # unique ids: a copied cell would otherwise repeat one
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb = nbformat.v4.new_notebook(cells=out, metadata=copy.deepcopy(spec.nb.metadata))
    return nb, notes


def _fresh(cell, source: str | None = None) -> nbformat.NotebookNode:
    new = copy.deepcopy(cell)
    if source is not None:
        new.source = source
    if new.cell_type == "code":
        new.outputs = []
        new.execution_count = None
    return new


def read_submission(path: Path, max_bytes: int = 20 * 2**20) -> nbformat.NotebookNode:
    """Read and validate a submitted notebook; raises ValueError with a reason if it is not one."""
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"the notebook is {size / 2**20:.1f} MiB, over the {max_bytes / 2**20:.0f} MiB limit")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the notebook is not UTF-8 text") from None
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as e:  # NotJSONError, ValueError, KeyError...
        raise ValueError(f"the notebook is not valid JSON: {str(e).splitlines()[0][:200]}") from None
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as e:
        raise ValueError(f"the notebook does not follow the notebook format: {e.message[:200]}") from None
    return nb

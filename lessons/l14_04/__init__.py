"""L14.4 Model Loading and Memory, as course-grade grades it: everything of this lesson, in one folder.

==============  ========================================================================
``collect.py``  what each hidden test collects in the learner's kernel (inputs only)
``checks.py``   the trusted check of each test, expected answers included (grader only)
``lab.py``      the lab-edit side check: three questions on the learner's edited lab
``record.py``   the predictions' record, run beside the notebooks (no points of its own)
``examples.py`` the example class (examples/submissions/): one learner per misconception
==============  ========================================================================

The instructor files stay where the course keeps them: the two notebooks in ``notebooks/level-14/``
(the lesson, then the runtime lab; both built by its ``build_notebook.py``, whose hidden tests
:func:`hidden_block` writes) and the lab in ``labs/notebooks/level-14/``.

>>> LESSON.name, [p.name for p in LESSON.notebooks], LESSON.side_questions()["lab_reports_not_fit"]
('l14-04-model-memory', ['l14-04-model-memory.ipynb', 'l14-04-runtime-lab.ipynb'], 0.5)
"""

from __future__ import annotations

from pathlib import Path

from autograder.contract.lesson import Lesson

from . import checks, collect
from .lab import LabEdit
from .record import PredictionRecord

REPO = Path(__file__).resolve().parents[2]
NAME = "l14-04-model-memory"
NOTEBOOK = REPO / "notebooks" / "level-14" / f"{NAME}.ipynb"
#: The second notebook of the assignment: what vLLM will actually allocate.
RUNTIME_NOTEBOOK = REPO / "notebooks" / "level-14" / "l14-04-runtime-lab.ipynb"
LAB = REPO / "labs" / "notebooks" / "level-14" / f"{NAME}.py"
#: Where the reveal cells record each prediction at its first reveal (released empty, handed in with the notebooks).
PREDICTIONS = REPO / "notebooks" / "level-14" / "l14-04-predictions.json"

LESSON = Lesson(
    name=NAME,
    notebooks=(NOTEBOOK, RUNTIME_NOTEBOOK),
    files=(LAB, PREDICTIONS),
    checks=checks.CHECKS,
    side_checks=(LabEdit(file=LAB.name), PredictionRecord(file=PREDICTIONS.name)),
    # what the notebook's cells import, beyond numpy and matplotlib: the fork server imports it once a batch
    preload=("course_lib", "course_lib.lessons.l14_04.demos", "course_lib.views.explorer", "course_lib.lessons.l14_04.labfile",
             "course_lib.views.report", "course_lib.views.vllm_explorer"),
    course_id="l14",
)


def hidden_block(grade_id: str, points: float | None = None) -> str:
    """The hidden part of ``grade_id``'s test cell (what build_notebook.py writes into the notebook);
    ``points``: the cell's, for stock nbgrader's partial credit."""
    from autograder.source.hidden import hidden_block as write

    return write(grade_id, collect, checks, points)

"""Whether a grader is running the notebook, and the one line a skipped demonstration prints.

nbgrader sets ``NBGRADER_EXECUTION`` while it runs a notebook ("autograde" for ``nbgrader autograde``,
"validate" for the *Validate* button; nbgrader/preprocessors/execute.py), and course-grade sets it the
same way for its kernels (autograder/sandbox/kernel_env.py). Demonstrations that earn no points (the
real measurement, the interactive explorers) are skipped then: a class of a thousand is graded without
measuring the grader's machine a thousand times or drawing widgets that no grader can show.

>>> import os
>>> os.environ.pop("NBGRADER_EXECUTION", None) and None
>>> grading()
False
>>> os.environ["NBGRADER_EXECUTION"] = "autograde"
>>> skipped_while_grading("the launch explorer")
(the launch explorer is skipped while grading: NBGRADER_EXECUTION is set; nothing graded depends on it)
True
>>> del os.environ["NBGRADER_EXECUTION"]
"""

from __future__ import annotations

import os


def grading() -> bool:
    """True while nbgrader or course-grade runs the notebook (``NBGRADER_EXECUTION`` is set)."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def skipped_while_grading(what: str) -> bool:
    """True (and say so, in one line) while grading: the caller skips ``what``."""
    if grading():
        print(f"({what} is skipped while grading: NBGRADER_EXECUTION is set; nothing graded depends on it)")
        return True
    return False

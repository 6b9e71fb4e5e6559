"""The grader's part of ``make demo``: release L14.4, grade its example class, print the gradebook.

``python -m demo`` runs it after the library's sections. Results go under ``OUT/autograde/``; a second
``make demo`` reuses every unchanged result, so it takes seconds.
"""

from __future__ import annotations

import time
from pathlib import Path

from course_lib.views.report import banner as _banner

from autograder.publish.layout import db_url
from lessons.l14_04 import NAME as ASSIGNMENT

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "submissions"


def gradebook_table(results_dir: Path) -> str:
    """nbgrader's own gradebook, read back: student | autograded | manual | total (as formgrader sums it)."""
    from nbgrader.api import Gradebook

    rows = [("student", "auto score", "needs manual", "score / max")]
    with Gradebook(db_url(results_dir)) as gb:
        for sub in sorted(gb.assignment_submissions(ASSIGNMENT), key=lambda s: s.student.id):
            auto = sum(g.auto_score or 0 for nb in sub.notebooks for g in nb.grades)
            rows.append((sub.student.id, f"{auto:g}", "yes" if sub.needs_manual_grade else "no",
                         f"{sub.score:g} / {sub.max_score:g}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def demo_section(out_dir: str | Path = "out") -> None:
    """Build the release, autograde examples/submissions/ into OUT/autograde/, print both tables."""
    from autograder.batch import autograde
    from autograder.learner import release
    from autograder.publish.report import grades_table

    out = Path(out_dir)
    _banner("Autograder 1/3: course-grade release  (nbgrader generate_assignment, then a leak check)")
    rel = release.main(out=out / "release")
    print(f"released {rel.folder}/: {', '.join(rel.files)}  ({rel.seconds:.1f} s); no solution or hidden test in it")

    _banner(f"Autograder 2/3: course-grade autograde {EXAMPLES.relative_to(REPO)} --out {out / 'autograde'}")
    start = time.monotonic()
    batch = autograde.main(EXAMPLES, out=out / "autograde", progress=None)
    for warning in batch.warnings:
        print(f"warning: {warning}")
    print(grades_table(batch))
    kept = f", {len(batch.reused)} unchanged results reused" if batch.reused else ""
    print(f"\n{len(batch.students)} submissions in {time.monotonic() - start:.1f} s{kept}; "
          f"isolation: {batch.isolation}")

    _banner("Autograder 3/3: the nbgrader gradebook (gradebook.db; `nbgrader formgrader` grades the written part)")
    print(gradebook_table(out / "autograde"))
    print(f"\nfeedback: {out / 'autograde' / 'feedback'}/<student>/{ASSIGNMENT}/{ASSIGNMENT}.html; "
          f"Gradescope: {out / 'autograde' / 'gradescope'}/<student>.json")

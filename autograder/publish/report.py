"""The class at a glance: one line per student, as ``autograde`` and ``make demo`` print it."""

from __future__ import annotations

from ..contract.results import BatchResult

WIDTH = 52


def _short(text: str, width: int = WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def grades_table(batch: BatchResult) -> str:
    """student | status | autograded | manual | what was lost first.

    The last column names the first question that lost points, with its message, so a
    misconception or a failure is visible without opening the feedback.
    """
    rows = [("student", "status", "autograded", "manual", "first point lost")]
    for sid, r in sorted(batch.students.items()):
        lost = next(((gid, q) for gid, q in r.questions.items() if q.score < q.max_score), None)
        if r.status != "graded" and r.message:
            note = r.message
        elif lost:
            note = f"{lost[1].label or lost[0]}: {lost[1].message}"
        else:
            note = "-"
        manual = f"? / {r.manual_max_score:g}" if r.needs_manual_grading else "-"
        rows.append((sid, r.status, f"{r.score:g} / {r.max_score:g}", manual, _short(note)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)

"""``course-grade feedback``: per-student HTML feedback, without hidden tests or recorded answers.

nbgrader's ``generate_feedback`` renders the autograded notebook as it is, hidden
tests and all. Here, before rendering, every test cell loses its
``### BEGIN HIDDEN TESTS`` block, every answer payload
(:data:`~autograder.collect.ANSWER_MIME`) is dropped, and tracebacks in test
cells shrink to their last line (a traceback quotes the hidden source). Each test
cell is followed by its score and message, and a summary leads the page. HTML
from the learner's cells is sanitised (it could run in the instructor's browser).
"""

from __future__ import annotations

import copy
import html
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .assignment import LAB_QUESTIONS
from .collect import ANSWER_MIME
from .errors import AutograderError
from .layout import assignment_from_results, autograded_path, feedback_path, load_records
from .results import StudentResult, write_atomic

HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[ \t]*\n?", re.S | re.M)
LAB_TITLES = {
    "lab_edit_only_active_sequences": "Lab: only active_sequences changed, to 16",
    "lab_reports_not_fit": "Lab: the edited lab reports that the workload does not fit",
    "lab_only_kv_doubled": "Lab: only kv_cache doubled",
}
STATUS_WORDS = {
    "graded": "graded",
    "timeout": "stopped: time limit reached",
    "kernel_died": "stopped: the kernel died",
    "memory_limit": "memory limit reached",
    "invalid_submission": "not graded: the notebook could not be read",
    "missing_submission": "not graded: nothing was handed in",
    "grader_error": "not graded: the grader failed (your instructor will rerun it)",
}


@dataclass
class FeedbackResult:
    """What ``feedback`` wrote."""

    files: list[str]
    """One HTML file per student, under RESULTS_DIR/feedback/<student>/<assignment>/."""


def strip_hidden(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` without hidden tests, answer payloads, or tracebacks of test cells."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader") or {}
        is_test = bool(meta.get("grade")) and not meta.get("solution") and cell.cell_type == "code"
        had_hidden = is_test and "BEGIN HIDDEN TESTS" in cell.source
        if is_test:
            source = HIDDEN.sub("", cell.source)
            if "### BEGIN HIDDEN TESTS" in source:  # an unterminated block: drop everything after it
                source = source[:source.index("### BEGIN HIDDEN TESTS")]
            cell.source = source.rstrip() + "\n"
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data") or {}
            if ANSWER_MIME in data:
                continue
            if had_hidden and out.get("output_type") in ("execute_result", "display_data"):
                continue  # a value shown by the hidden part (e.g. its last expression)
            if out.get("output_type") == "error" and is_test:
                out = copy.deepcopy(out)
                out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
            kept.append(out)
        cell.outputs = kept
    return nb


def _is_test(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader") or {}
    return bool(meta.get("grade")) and not meta.get("solution")


def _md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(text)


def _score_line(title: str, q) -> str:
    mark = {"passed": "✔", "failed": "✘", "not_run": "–"}.get(q.status, "")
    message = html.escape(q.message or "")
    return f"**{mark} {html.escape(title)}: {q.score:g} / {q.max_score:g}**" + (f" — {message}" if message else "")


def annotate(nb: nbformat.NotebookNode, result: StudentResult) -> nbformat.NotebookNode:
    """Insert a summary at the top, a score line after each test cell, and the lab checks at the end."""
    nb = copy.deepcopy(nb)
    cells = []
    lines = [f"# Feedback: {html.escape(result.student_id)}",
             f"**Autograded score: {result.score:g} / {result.max_score:g}** "
             f"({STATUS_WORDS.get(result.status, result.status)})"]
    if result.message:
        lines.append(html.escape(result.message))
    if result.manual_max_score:
        lines.append(f"Your written answer ({result.manual_max_score:g} points) is graded by hand"
                     + (" and is not included above." if result.needs_manual_grading else "."))
    cells.append(_md("\n\n".join(lines)))
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") in LAB_QUESTIONS:
            continue  # the grader's own lab cells in the autograded notebook; summarised below
        cells.append(cell)
        gid = (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id")
        if gid in result.questions and _is_test(cell):
            cells.append(_md(_score_line(gid, result.questions[gid])))
    lab = [_score_line(LAB_TITLES.get(g, g), result.questions[g]) for g in LAB_QUESTIONS if g in result.questions]
    if lab:
        cells.append(_md("## Lab-edit check\n\n" + "\n\n".join(lab)))
    nb.cells = cells
    return nb


_EXPORTER = None


def render_html(nb: nbformat.NotebookNode) -> str:
    """Sanitised static HTML (one exporter per process: building one costs ~0.1 s)."""
    global _EXPORTER
    if _EXPORTER is None:
        from nbconvert import HTMLExporter
        from nbconvert.preprocessors.sanitize import SanitizeHTML

        _EXPORTER = HTMLExporter(template_name="classic", sanitize_html=True)
        _EXPORTER.register_preprocessor(SanitizeHTML(), enabled=True)
    body, _ = _EXPORTER.from_notebook_node(nb)
    return body


def feedback_html(autograded: nbformat.NotebookNode | None, result: StudentResult) -> str:
    """The learner's feedback page: their notebook as graded, hidden parts removed, scores inline."""
    if autograded is None:
        autograded = nbformat.v4.new_notebook()
    return render_html(annotate(strip_hidden(autograded), result))


def write_feedback(results_dir: Path, result: StudentResult, autograded: nbformat.NotebookNode | None,
                   assignment: str, notebook_name: str) -> Path:
    path = feedback_path(results_dir, result.student_id, assignment, notebook_name)
    write_atomic(path, feedback_html(autograded, result))
    return path


def main(results_dir: str | Path = "results", students: list[str] | None = None) -> FeedbackResult:
    """Re-render feedback HTML for every graded student (or ``students``) from an autograde run."""
    results_dir = Path(results_dir)
    assignment = assignment_from_results(results_dir)
    records = load_records(results_dir)
    if not records:
        raise AutograderError(f"no graded students under {results_dir}/records; run `course-grade autograde` first")
    files = []
    for sid, result in sorted(records.items()):
        if students and sid not in students:
            continue
        nb_path = autograded_path(results_dir, sid, assignment)
        nb = nbformat.read(nb_path, as_version=4) if nb_path.is_file() else None
        files.append(str(write_feedback(results_dir, result, nb, assignment.name, assignment.notebook_name)))
    return FeedbackResult(files=files)

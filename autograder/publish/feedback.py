"""``course-grade feedback``: the learner's feedback page, rendered so a learner can read it.

The page is the graded notebook as the learner wrote it, with a score table on top
(every question, the lesson's side checks included, with points and what to look at: each
failed part of a question of several parts as an item of a list), markdown rendered as HTML,
each test cell followed by its verdict, and, once graded in formgrader (``course-grade export``
or ``feedback`` re-render it), each hand-graded answer followed by its points and the grader's
comment. What the page never shows:

- the hidden part of a test cell, or anything a test cell printed (learner code runs
  while the hidden part collects values, so a test cell shows the grader's verdict only);
- answer payloads (:data:`~autograder.contract.answers.ANSWER_MIME`);
- a line that quotes the hidden collection code, wherever learner code printed it
  (``print(In)``, ``inspect.getsource`` of a frame...): it is replaced by a note;
- anything that runs: learner HTML passes an allow-list sanitiser (nh3), and the page
  carries a Content-Security-Policy that forbids scripts altogether.

Widgets are shown as a note (a static page cannot run them), not as their repr.

>>> page = feedback_html(None, StudentResult("amy", "missing_submission", 0.0, 2.0, 0.0, False, {}, "nothing"))
>>> "<h1>Feedback: amy</h1>" in page and "script-src" not in page and "default-src 'none'" in page
True
"""

from __future__ import annotations

import contextlib
import html
import re
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from functools import lru_cache, wraps
from pathlib import Path

import nbformat

from ..contract.answers import ANSWER_MIME
from ..contract.cells import grade_id as cell_grade_id
from ..contract.cells import is_manual, is_task, is_test
from ..contract.cells import points as cell_points
from ..errors import AutograderError
from .layout import assignment_from_results, autograded_path, feedback_path, load_records
from ..contract.results import StudentResult, write_atomic
from ..contract.text import one_line

HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?(?:^[ \t]*### END HIDDEN TESTS[ \t]*\n?|\Z)", re.S | re.M)
STATUS_WORDS = {
    "graded": "graded",
    "timeout": "a cell ran out of time (only its question lost points)",
    "kernel_died": "the kernel died once (restarted; only the question whose cell failed lost points)",
    "memory_limit": "memory limit reached",
    "process_limit": "process limit reached",
    "disk_limit": "disk space limit reached",
    "invalid_submission": "not graded: the notebook could not be read",
    "missing_submission": "not graded: nothing was handed in",
    "grader_error": "not graded: the grader failed (your instructor will rerun it)",
}
MARK = {"passed": "✔", "failed": "✘", "not_run": "–"}
#: Text no learner output may carry: the hidden collection code's own names and markers.
HIDDEN_MARKERS = ("_course_hidden", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS", ANSWER_MIME)
REDACTED = "[lines quoting the grader's hidden test were removed here]"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
#: What a widget's output becomes on the page and in the instructor's copy (autograder.publish.inert).
WIDGET_NOTE = "An interactive widget was here: open the notebook in JupyterLab to use it (a static page cannot run it)."
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# The allow-list: what markdown and learner HTML may contain (no script, style, iframe, form, event handlers,
# and no class: the page's own classes, "verdict passed" among them, would let learner HTML pass for a verdict).
ALLOWED_TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "code", "dd", "del", "details", "div", "dl", "dt",
                "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s",
                "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead",
                "tr", "u", "ul"}
ALLOWED_ATTRIBUTES = {"*": {"title"}, "a": {"href"}, "img": {"src", "alt", "width", "height"},
                      "td": {"align", "colspan", "rowspan"}, "th": {"align", "colspan", "rowspan"}}
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


@dataclass
class FeedbackResult:
    """What ``feedback`` wrote."""

    files: list[str]
    """One HTML file per student, under RESULTS_DIR/feedback/<student>/<assignment>/."""
    failed: list[str]
    """Students whose page could not be rendered whole (it shows their scores only; the verb went on)."""


# ------------------------------------------------------------------ safe text

def sanitize(fragment: str) -> str:
    """Learner HTML through the allow-list: tags and attributes outside it are dropped.

    >>> sanitize('<b onclick="x()">hi</b><script>alert(1)</script><img src="x" onerror="y()">')
    '<b>hi</b><img>'
    """
    import nh3  # the grader's side only

    return nh3.clean(fragment, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES, clean_content_tags={"script", "style"},
                     url_schemes={"http", "https", "mailto", "data"}, link_rel="noopener noreferrer nofollow",
                     attribute_filter=_only_inline_images)


def _only_inline_images(tag: str, attribute: str, value: str) -> str | None:
    """Images only from the page itself (data: PNG/JPEG/GIF/SVG-free); links never to data:."""
    if tag == "img" and attribute == "src":
        return value if re.match(r"data:image/(png|jpeg|gif);base64,", value) else None
    if tag == "a" and attribute == "href" and value.strip().lower().startswith("data:"):
        return None
    return value


class Redactor:
    r"""Removes every line that quotes the hidden tests of a graded notebook.

    The secret lines are read from the notebook's own test cells (restored from the
    instructor source), less the lines that are public anyway (they also occur outside
    the hidden parts). An output line is removed when it contains one of them anywhere
    (so a ``repr`` of the source, or ``print(In)``, is caught too) or one of
    :data:`HIDDEN_MARKERS`. The search indexes the secrets by their first
    :data:`PREFIX` characters, so it costs one dict lookup per character of output.

    >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
    ...     "assert x == 1\n### BEGIN HIDDEN TESTS\nrecord('t', secret_inputs_here(ns))\n### END HIDDEN TESTS",
    ...     metadata={"nbgrader": {"grade": True, "solution": False, "grade_id": "t", "points": 1}})])
    >>> Redactor(nb).text("ok\n['x', \"record('t', secret_inputs_here(ns))\"]\nassert x == 1")
    "ok\n[lines quoting the grader's hidden test were removed here]\nassert x == 1"
    """

    PREFIX = 12

    def __init__(self, nb: nbformat.NotebookNode | None, secrets_from: nbformat.NotebookNode | None = None):
        secret, public = set(), set()
        for cell in (nb.cells if nb is not None else []):
            source = _joined(cell.get("source", ""))
            for block in HIDDEN.findall(source) if is_test(cell) and secrets_from is None else []:
                secret.update(line.strip() for line in block.splitlines() if len(line.strip()) >= self.PREFIX)
            public.update(line.strip() for line in HIDDEN.sub("", source).splitlines())
        # the instructor's copy leaves the hidden tests out (autograder.publish.inert): their lines come from the source
        for cell in (secrets_from.cells if secrets_from is not None else []):
            for block in HIDDEN.findall(_joined(cell.get("source", ""))) if is_test(cell) else []:
                secret.update(line.strip() for line in block.splitlines() if len(line.strip()) >= self.PREFIX)
        self.lines = frozenset(secret - public)
        self._by_prefix: dict[str, list[str]] = {}
        for line in self.lines:
            self._by_prefix.setdefault(line[:self.PREFIX], []).append(line)

    def _quotes(self, line: str) -> bool:
        if any(marker in line for marker in HIDDEN_MARKERS):
            return True
        n, index = self.PREFIX, self._by_prefix
        for i in range(len(line) - n + 1):
            candidates = index.get(line[i:i + n])
            if candidates and any(line.startswith(c, i) for c in candidates):
                return True
        return False

    def text(self, text: str) -> str:
        """``text`` with each run of quoting lines replaced by one :data:`REDACTED` note."""
        if not self.lines and not any(m in text for m in HIDDEN_MARKERS):
            return text
        out: list[str] = []
        for line in text.split("\n"):
            if not self._quotes(line):
                out.append(line)
            elif not out or out[-1] != REDACTED:
                out.append(REDACTED)
        return "\n".join(out)


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


@lru_cache(maxsize=1)
def _markdown():
    import mistune  # the grader's side only

    return mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])


#: Rendered fragments kept per worker process: a class's pages share most cells (every locked cell
#: and test is restored from the source), so each renders once per batch. Only short texts are
#: kept (the instructor's cells are; a learner's 10 MB cell is not worth keeping in every worker).
FRAGMENT_CACHE = 4096
FRAGMENT_CACHE_MAX_CHARS = 16 * 1024


def _reused(render):
    """``render``, remembered for the last FRAGMENT_CACHE texts of at most FRAGMENT_CACHE_MAX_CHARS."""
    cached = lru_cache(maxsize=FRAGMENT_CACHE)(render)

    @wraps(render)
    def fragment(text: str) -> str:
        return cached(text) if len(text) <= FRAGMENT_CACHE_MAX_CHARS else render(text)

    fragment.cache_info, fragment.cache_clear = cached.cache_info, cached.cache_clear
    return fragment


#: The longest text rendered as markdown or highlighted as code; a longer one is shown as plain escaped
#: text, whose cost is linear (a learner may hand in a 2-million-character cell).
RENDER_MAX_CHARS = 256 * 1024


def _plain(text: str) -> str:
    return f'<pre class="plain">{_esc(text)}</pre>'


@_reused
def markdown_html(text: str) -> str:
    """Markdown as HTML, through the sanitiser (past :data:`RENDER_MAX_CHARS`, escaped text).

    >>> markdown_html("# Hi\\n\\n<script>x()</script>\\n\\n**bold** <img src=x onerror=y()>")
    '<h1>Hi</h1>\\n\\n\\n<p><strong>bold</strong> <img></p>\\n'
    """
    if len(text) > RENDER_MAX_CHARS:
        return _plain(text)
    return sanitize(_markdown()(text))


@lru_cache(maxsize=1)
def _highlighter():
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return PythonLexer(), HtmlFormatter(nowrap=True)


@_reused
def code_html(source: str) -> str:
    """Python source, highlighted (pygments escapes it)."""
    from pygments import highlight

    if len(source) > RENDER_MAX_CHARS:
        return _esc(source)
    lexer, formatter = _highlighter()
    return highlight(source, lexer, formatter)


def _joined(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


# ------------------------------------------------------------------ cells

def assignment_titles(notebooks) -> dict[str, str]:
    """Every test cell's title across an assignment's notebooks (a notebook's page lists them all)."""
    titles: dict[str, str] = {}
    for nb in notebooks:
        if nb is not None:
            titles.update(_titles(nb))
    return titles


def _titles(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Each test cell's title: its ``metadata.course.title`` (the builder writes one), else the last
    "**Task N" (or "## heading") above it."""
    titles, current = {}, ""
    for cell in nb.cells:
        if cell.get("cell_type") == "markdown":
            text = _joined(cell.get("source", ""))
            task = re.findall(r"\*\*(Task \d+[^*.]*)", text)
            heading = re.findall(r"^#{2,3} (.+)$", text, re.M)
            if task:
                current = task[-1].strip()
            elif heading:
                current = heading[-1].strip()
        gid = cell_grade_id(cell)
        if gid and is_test(cell):
            course = (cell.get("metadata") or {}).get("course")
            title = course.get("title") if isinstance(course, dict) else None
            titles[gid] = title if isinstance(title, str) and title else (current or gid)
    return titles


def _output_html(out, redact: Redactor) -> str:
    kind = out.get("output_type")
    if kind == "stream":
        name = "stderr" if out.get("name") == "stderr" else "stdout"
        return f'<pre class="output {name}">{_esc(redact.text(_joined(out.get("text", ""))))}</pre>'
    if kind == "error":
        text = ANSI.sub("", "\n".join(out.get("traceback") or [f"{out.get('ename', '')}: {out.get('evalue', '')}"]))
        return f'<pre class="output error">{_esc(redact.text(text))}</pre>'
    if kind not in ("display_data", "execute_result"):
        return ""
    data = out.get("data") or {}
    if ANSWER_MIME in data:
        return ""
    if WIDGET_MIME in data or _joined(data.get("text/plain", "")) == WIDGET_NOTE:   # the instructor copy's note
        return f'<p class="output note">{WIDGET_NOTE}</p>'
    for mime in ("image/png", "image/jpeg"):
        if isinstance(data.get(mime), str):
            payload = re.sub(r"\s", "", data[mime])
            if re.fullmatch(r"[A-Za-z0-9+/=]*", payload):
                return f'<img class="output" alt="figure" src="data:{mime};base64,{payload}">'
    if "text/html" in data:
        return f'<div class="output html">{sanitize(redact.text(_joined(data["text/html"])))}</div>'
    if "text/markdown" in data:
        return f'<div class="output html">{markdown_html(redact.text(_joined(data["text/markdown"])))}</div>'
    if "text/plain" in data:
        return f'<pre class="output">{_esc(redact.text(_joined(data["text/plain"])))}</pre>'
    return ""


def message_html(q) -> str:
    """A question's message as HTML: each failed part of a question of several parts as an item of a list.

    >>> from autograder.contract.results import QuestionResult
    >>> message_html(QuestionResult(1.0, 3.0, "failed", "partial credit, 1 of 3: a < b; c & d", ["a < b", "c & d"]))
    'partial credit, 1 of 3:<ul class="parts"><li>a &lt; b</li><li>c &amp; d</li></ul>'
    >>> message_html(QuestionResult(0.0, 3.0, "failed", "a; b (because the cell above failed)", ["a", "b"]))
    '<ul class="parts"><li>a</li><li>b</li></ul>(because the cell above failed)'
    """
    message = q.message or ""
    parts = list(getattr(q, "parts", None) or [])
    if len(parts) < 2:
        return _esc(message)
    head, joined, tail = message.partition("; ".join(parts))
    if not joined:          # the message no longer names the parts as they are: both, as they are
        head, tail = message, ""
    head = head.rstrip().rstrip(":").rstrip()
    return ((_esc(head) + ":" if head else "") + '<ul class="parts">' + "".join(f"<li>{_esc(p)}</li>" for p in parts)
            + "</ul>" + _esc(tail.strip()))


def _verdict_html(title: str, q) -> str:
    status = q.status if q.status in MARK else "failed"
    message = message_html(q) if q.message and q.message != "correct" else ("correct" if status == "passed" else "")
    return (f'<div class="verdict {status}"><span class="mark">{MARK[status]}</span> '
            f'<strong>{_esc(title)}: {q.score:g} / {q.max_score:g}</strong>'
            + (f' &mdash; {message}' if message else "") + "</div>")


def _hand_html(cell, key: str, hand) -> str:
    """A hand-graded answer's (or task's) points and its grader's comment, below it on the page."""
    maximum = cell_points(cell) or 0.0
    score = hand.cells.get(key) if hand is not None else None
    comment = hand.cell_comments.get(key, "") if hand is not None else ""
    if score is None:
        verdict = (f'<div class="verdict hand pending"><span class="mark">&#9998;</span> <strong>Graded by hand: '
                   f'{maximum:g} point{"s" if maximum != 1 else ""}, not graded yet</strong></div>')
    else:
        status = "passed" if score == maximum else "failed"
        verdict = (f'<div class="verdict hand {status}"><span class="mark">&#9998;</span> <strong>Graded by hand: '
                   f'{score:g} / {maximum:g}</strong></div>')
    if comment:
        verdict += (f'<div class="comment"><strong>Comment from your grader:</strong>'
                    f'<pre class="comment-text">{_esc(comment)}</pre></div>')
    return verdict


def _comment_html(text: str) -> str:
    return f'<div class="comment"><strong>Comment from your grader:</strong><pre class="comment-text">{_esc(text)}</pre></div>'



def _cell_html(cell, result: StudentResult, titles: dict[str, str], redact: Redactor, keys: dict[str, str],
               hand=None, stem: str | None = None) -> str:
    kind = cell.get("cell_type")
    gid = cell_grade_id(cell)
    anchor = f' id="{_esc(gid)}"' if gid else ""
    source = _joined(cell.get("source", ""))
    graded_by_hand = bool(gid) and (is_manual(cell) or is_task(cell)) and bool(result.manual_max_score)
    after = ""
    if graded_by_hand:
        key = f"{stem}/{gid}" if hand is not None and stem and f"{stem}/{gid}" in hand.cells else gid
        after = _hand_html(cell, key, hand)
    elif gid and hand is not None and hand.comments.cells.get(gid):
        after = _comment_html(hand.comments.cells[gid])
    if kind == "markdown":
        label = '<div class="label">your written answer, graded by hand</div>' if graded_by_hand else ""
        return (f'<section class="cell markdown{" hand" if graded_by_hand else ""}"{anchor}>{label}'
                f'{markdown_html(redact.text(source))}{after}</section>')
    if kind != "code":
        return ""
    if is_test(cell):
        visible = HIDDEN.sub("", source).rstrip()
        q = result.questions.get(keys.get(gid, gid))
        verdict = _verdict_html(q.label or titles.get(gid, gid), q) if q is not None else ""
        return (f'<section class="cell test"{anchor}><div class="label">check</div>'
                f'<pre class="source highlight">{code_html(visible)}</pre>{verdict}</section>')
    outputs = "".join(_output_html(o, redact) for o in cell.get("outputs", []))
    return (f'<section class="cell code"{anchor}><pre class="source highlight">{code_html(redact.text(source))}</pre>'
            + (f'<div class="outputs">{outputs}</div>' if outputs else "") + after + "</section>")


def _score_table(result: StudentResult, titles: dict[str, str], side_titles: dict[str, str],
                 keys: dict[str, str]) -> str:
    here = {key: gid for gid, key in keys.items()}   # this page's tests, by their key: linked to their cell
    rows = []
    for key, q in result.questions.items():
        title = q.label or side_titles.get(key) or titles.get(here.get(key, key), key)
        status = q.status if q.status in MARK else "failed"
        link = f'<a href="#{_esc(here[key])}">{_esc(title)}</a>' if key in here else _esc(title)
        rows.append(f'<tr class="{status}"><td class="mark">{MARK[status]}</td><td>{link}</td>'
                    f'<td class="points">{q.score:g} / {q.max_score:g}</td><td>{message_html(q)}</td></tr>')
    if not rows:
        return ""
    return ('<table class="scores"><thead><tr><th></th><th>question</th><th>points</th><th>what to look at</th>'
            '</tr></thead><tbody>' + "".join(rows) + "</tbody></table>")


STYLE = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328; background: #f6f8fa;
       margin: 0; }
main { max-width: 980px; margin: 0 auto; padding: 24px 28px 64px; background: #fff; min-height: 100vh; }
header { border-bottom: 1px solid #d0d7de; margin-bottom: 20px; padding-bottom: 12px; }
h1, h2, h3 { line-height: 1.25; }
.score { font-size: 1.2em; }
table { border-collapse: collapse; margin: 10px 0; }
th, td { border: 1px solid #d0d7de; padding: 4px 10px; text-align: left; vertical-align: top; }
thead th { background: #f0f3f6; }
table.scores { width: 100%; font-size: 0.95em; }
table.scores td.points { white-space: nowrap; }
tr.passed td.mark, .verdict.passed .mark { color: #1a7f37; }
tr.failed td.mark, .verdict.failed .mark { color: #cf222e; }
tr.not_run td.mark, .verdict.not_run .mark { color: #6e7781; }
.cell { margin: 14px 0; }
pre { background: #f6f8fa; border: 1px solid #e1e4e8; border-radius: 6px; padding: 8px 12px; overflow-x: auto;
      font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; white-space: pre-wrap; }
.output { background: #fff; border-color: #eaeef2; }
.output.stderr { background: #fff8f0; }
.output.error { background: #ffebe9; border-color: #ffcecb; }
.output.note { color: #57606a; font-style: italic; }
img.output { max-width: 100%; border: none; }
.cell.test { border-left: 4px solid #8c959f; padding-left: 12px; }
.cell.hand { border-left: 4px solid #0969da; padding-left: 12px; }
.cell.test .label, .cell.hand .label { font-size: 0.8em; text-transform: uppercase; letter-spacing: 0.05em; color: #57606a; }
.verdict { padding: 8px 12px; border-radius: 6px; background: #f6f8fa; }
.verdict.passed { background: #dafbe1; }
.verdict.failed { background: #ffebe9; }
.verdict.not_run { background: #eaeef2; }
.manual { color: #57606a; }
.manual.graded { color: #1f2328; }
ul.parts { margin: 4px 0 0; padding-left: 20px; }
.verdict.hand { margin-top: 6px; }
.verdict.hand.pending { background: #fff8c5; }
.comment { margin: 6px 0; padding: 6px 12px; border-left: 4px solid #0969da; background: #ddf4ff; border-radius: 6px; }
.comment pre.comment-text { background: transparent; border: none; padding: 2px 0; margin: 0; font: inherit; }
"""


@lru_cache(maxsize=1)
def _pygments_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter().get_style_defs(".highlight")


def _instructor_only(cell) -> bool:
    """A cell the grader added to the instructor's copy (autograder.publish.inert.to_grade_by_hand): not the learner's."""
    meta = (cell.get("metadata") or {}).get("course_grade")
    return isinstance(meta, dict) and meta.get("instructor_only") is True


def _keys(autograded: nbformat.NotebookNode | None, result: StudentResult, notebook_name: str | None,
          side: dict[str, str]) -> dict[str, str]:
    """The question key of each test cell on this page: its grade_id, or ``<stem>/<grade_id>`` where
    two notebooks of the assignment share it."""
    stem = Path(notebook_name).stem if notebook_name else None
    keys = {}
    for cell in (autograded.cells if autograded is not None else []):
        gid = cell_grade_id(cell)
        if gid and is_test(cell) and gid not in side:
            keys[gid] = f"{stem}/{gid}" if stem and f"{stem}/{gid}" in result.questions else gid
    return keys


def feedback_html(autograded: nbformat.NotebookNode | None, result: StudentResult,
                  side_titles: dict[str, str] | None = None, notebook_name: str | None = None,
                  deadline: float | None = None, hand=None, secrets_from: nbformat.NotebookNode | None = None,
                  other_titles: dict[str, str] | None = None) -> str:
    """The learner's feedback page: their notebook as graded, hidden parts removed, scores on top and
    inline; the lesson's side-check questions (``side_titles``: each one's title) in the table only.
    ``deadline`` (time.monotonic()): TimeoutError once it has passed, checked cell by cell (each cell's
    cost is bounded: :data:`RENDER_MAX_CHARS`, and the output budget). ``hand``
    (:class:`~autograder.publish.gradebook.HandGrade`): what formgrader holds, shown at the top (points, total)
    and below each hand-graded answer (its points, its grader's comment). ``secrets_from``: the instructor
    notebook whose hidden tests no output may quote (default: ``autograded``'s own). ``other_titles``: the
    titles of the assignment's other notebooks' questions, for the score table (which lists them all)."""
    redact = Redactor(autograded, secrets_from)
    side_titles = dict(side_titles or {})
    titles = {**(other_titles or {}), **(_titles(autograded) if autograded is not None else {})}
    keys = _keys(autograded, result, notebook_name, side_titles)
    sid = _esc(result.student_id)
    head = [f"<h1>Feedback: {sid}</h1>",
            f'<p class="score"><strong>Autograded score: {result.score:g} / {result.max_score:g}</strong> '
            f'({_esc(STATUS_WORDS.get(result.status, result.status))})</p>']
    if result.message:
        head.append(f"<p>{_esc(result.message)}</p>")
    if result.manual_max_score and hand is not None and hand.graded:
        head.append(f'<p class="manual graded"><strong>Graded by hand: {hand.score:g} / {result.manual_max_score:g}'
                    f'</strong> (your written answer, below with its points and your grader\'s comment). '
                    f'<strong>Total: {result.score + hand.score:g} / {result.max_score + result.manual_max_score:g}'
                    f'</strong></p>')
    elif result.manual_max_score:
        head.append(f'<p class="manual">Your written answer ({result.manual_max_score:g} points) is graded by hand'
                    + (" and is not included above.</p>" if result.needs_manual_grading else ".</p>"))
    head.append(_score_table(result, titles, side_titles, keys))
    cells = []
    for cell in (autograded.cells if autograded is not None else []):
        if cell_grade_id(cell) in side_titles or _instructor_only(cell):
            continue  # the grader's own side-check cells in the autograded notebook: in the table above
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError("rendering ran past its time limit")
        cells.append(_cell_html(cell, result, titles, redact, keys, hand,
                                Path(notebook_name).stem if notebook_name else None))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>Feedback: {sid}</title><style>{STYLE}{_pygments_css()}</style></head>"
            f"<body><main><header>{''.join(head)}</header>{''.join(cells)}</main></body></html>\n")


def write_feedback(results_dir: Path, result: StudentResult, autograded: nbformat.NotebookNode | None,
                   assignment: str, notebook_name: str, side_titles: dict[str, str] | None = None,
                   hand=None) -> Path:
    path = feedback_path(results_dir, result.student_id, assignment, notebook_name)
    write_atomic(path, feedback_html(autograded, result, side_titles, notebook_name, hand=hand))
    return path


#: Seconds a feedback page may take to render, wherever it is rendered (a grading worker, a Dask
#: worker's thread, ``course-grade feedback``); then the page shows the scores only.
RENDER_TIMEOUT_S = 60
#: The largest autograded notebook ``course-grade feedback`` reads: the largest hand-in and the whole
#: output budget fit in it many times over; a larger file is not one the grader wrote.
MAX_AUTOGRADED_BYTES = 64 * 2**20


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raise TimeoutError in this (the main) thread after ``seconds``; nothing in other threads (where
    the deadline that :func:`feedback_html` checks is the limit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise TimeoutError(f"took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def write_feedback_within(results_dir: Path, result: StudentResult, autograded: nbformat.NotebookNode | None,
                          assignment: str, notebook_name: str, side_titles: dict[str, str] | None = None,
                          seconds: float | None = None, hand=None,
                          secrets_from: nbformat.NotebookNode | None = None,
                          other_titles: dict[str, str] | None = None) -> str | None:
    """:func:`write_feedback` within ``seconds`` (default :data:`RENDER_TIMEOUT_S`), in any thread; a page
    that cannot be rendered in time (or at all) is written with the scores only. None, or why it fell back."""
    seconds = RENDER_TIMEOUT_S if seconds is None else seconds
    try:
        with _time_limit(seconds):
            path = feedback_path(results_dir, result.student_id, assignment, notebook_name)
            write_atomic(path, feedback_html(autograded, result, side_titles, notebook_name,
                                             deadline=time.monotonic() + seconds, hand=hand, secrets_from=secrets_from,
                                             other_titles=other_titles))
        return None
    except Exception as e:  # noqa: BLE001 - a page that cannot be rendered: the summary alone, and say so
        write_feedback(results_dir, result, None, assignment, notebook_name, side_titles, hand)
        return traceback.format_exception_only(type(e), e)[-1].strip()[:200]


def main(results_dir: str | Path = "results", students: list[str] | None = None, hand=None) -> FeedbackResult:
    """Re-render feedback HTML for every graded student (or ``students``) from an autograde run, with what
    was graded by hand in formgrader (``hand``: :func:`~autograder.publish.gradebook.hand_grades`' answer; read
    from the gradebook when not given, and then grades.json is brought up to date with it too).

    A student whose page cannot be rendered is reported and skipped; everyone else still gets one.
    """
    from ..source.assignment import load_lesson, load_source
    from .gradebook import hand_grades, update_grades_json

    results_dir = Path(results_dir)
    assignment = assignment_from_results(results_dir)
    side_titles = load_lesson(assignment.lesson).side_titles()
    records = load_records(results_dir)
    if not records:
        raise AutograderError(f"no graded students under {results_dir}/records; run `course-grade autograde` first")
    spec = load_source(assignment)
    if hand is None:
        hand = hand_grades(results_dir, assignment, spec)
        update_grades_json(results_dir, assignment, records, hand)
    sources = {nb.name: nb.nb for nb in spec.notebooks}
    question_titles = assignment_titles(sources.values())
    files, failed = [], []
    for sid, result in sorted(records.items()):
        if students and sid not in students:
            continue
        problems = []
        for name in assignment.notebook_names:
            nb_path = autograded_path(results_dir, sid, assignment, name)
            nb, why = None, None
            try:
                size = nb_path.stat().st_size if nb_path.is_file() else 0
                if size > MAX_AUTOGRADED_BYTES:   # the same caps as at grading: never parse what no grader wrote
                    why = f"{name} is {size / 2**20:.0f} MiB, over the {MAX_AUTOGRADED_BYTES // 2**20} MiB an autograded notebook can be"
                elif size:
                    nb = nbformat.read(nb_path, as_version=4)
            except Exception as e:  # noqa: BLE001 - one bad notebook never stops the others
                why = traceback.format_exception_only(type(e), e)[-1].strip()[:200]
            if why is None:
                why = write_feedback_within(results_dir, result, nb, assignment.name, name, side_titles,
                                            hand=hand.get(sid), secrets_from=sources.get(name),
                                            other_titles=question_titles)
            else:
                write_feedback(results_dir, result, None, assignment.name, name, side_titles, hand.get(sid))
            files.append(str(feedback_path(results_dir, sid, assignment.name, name)))
            if why is not None:
                problems.append(why)
        if problems:
            failed.append(sid)
            print(f"course-grade feedback: could not render {sid} (its page shows the scores only): "
                  f"{one_line(problems[0], 200)}", file=sys.stderr)
    return FeedbackResult(files=files, failed=failed)

"""The executed notebook as instructors' tools open it: nothing a learner wrote can run in their browser.

``RESULTS_DIR/autograded/<id>/<assignment>/*.ipynb`` is what nbgrader's formgrader renders (with
nbconvert's HTML exporter, whose templates put a markdown cell's raw HTML, a ``text/html`` or
``image/svg+xml`` output and an ``application/javascript`` output into the page as they are), in
the instructor's logged-in Jupyter session. A learner's ``<img onerror>`` there could call the
Jupyter API: write files, or set their own hand-graded score through formgrader's. So
:func:`instructor_copy` keeps learner content only through the feedback page's allow-list
(:func:`autograder.feedback.sanitize`) or as inert text:

=========================================  =========================================================
In the executed notebook                   In the instructor's copy
=========================================  =========================================================
a markdown cell the learner could edit     its markdown rendered and sanitised, as one line of HTML
(every cell but the locked ones, which     (so no markdown parser reads it again), with no math in it
are the instructor's, restored)            (:func:`without_math`), attachments and
                                           metadata other than nbgrader's dropped
a raw cell the learner could edit          its text escaped, in a ``<pre>``, with no math in it
an output's ``text/html``, ``text/markdown``  sanitised HTML (``text/html``), with no math in it
``text/plain``, a PNG or JPEG (base64)     kept (nbconvert escapes text; the image must be base64)
a widget (its view and its repr)           the feedback page's note (``feedback.WIDGET_NOTE``), as text
any other type: JavaScript, SVG, LaTeX,    removed, with a ``text/plain`` note naming the type
PDF, vendor types
an output's metadata                       only an image's numeric width and height
the grader's answer payloads               kept (no HTML exporter renders them)
stream and error outputs                   kept (nbconvert escapes them)
=========================================  =========================================================

The notebook's own metadata is the instructor source's (restore_cells) less any widget state.
The copy is made once, where the grader writes the file (grade._write_files), so the Dask path
returns it too; ``course-grade feedback`` re-renders from it and finds the same text.

>>> import nbformat
>>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("**hi** <img src=x onerror=alert(1)>"),
...     nbformat.v4.new_code_cell("1", outputs=[nbformat.v4.new_output("display_data", data={
...         "application/javascript": "alert(1)", "text/html": "<b onclick=x()>b</b>"})])])
>>> copy = instructor_copy(nb)
>>> copy.cells[0].source
'<div class="course-grade-learner-markdown tex2jax_ignore"><p><strong>hi</strong> <img></p>&#10;</div>'
>>> dict(copy.cells[1].outputs[0].data)
{'text/html': '<b>b</b>', 'text/plain': '[an output of type application/javascript was removed: it could run in a browser]'}
"""

from __future__ import annotations

import copy as _copy
import html
import re

import nbformat

from .answers import ANSWER_MIME
from .cells import grade_id, is_locked, is_manual, is_task, is_test, points
from .feedback import WIDGET_MIME, WIDGET_NOTE, markdown_html, sanitize

#: Output types kept as they are: nbconvert escapes text, and images are checked to be base64.
TEXT_MIMES = ("text/plain",)
IMAGE_MIMES = ("image/png", "image/jpeg")
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
#: The wrapper of a learner's markdown in the instructor's copy.
#: ``tex2jax_ignore``: MathJax (which formgrader loads) leaves the text alone, so a ``\\href{javascript:...}``
#: in a learner's formula stays text.
MARKDOWN_CLASS = "course-grade-learner-markdown tex2jax_ignore"


#: What a math renderer starts math at: ``$`` (``$...$``, ``$$...$$``) and ``\\`` (``\\(``, ``\\[``,
#: ``\\begin{...}``), as JupyterLab's MathJax 3 (``processEscapes``, ``processEnvironments``) and nbconvert's read them.
MATH_CHARS = {"$": "&#36;", "\\": "&#92;"}


def without_math(fragment: str) -> str:
    """Sanitised HTML in which no math renderer finds math, shown as the same characters.

    Opened in JupyterLab (formgrader's "Open live notebook", or ``jupyter lab`` in the results), a
    learner's ``$...$`` was typeset by MathJax 3, whose ``\\unicode[FONT]{...}`` writes FONT into a
    ``style`` attribute: learner CSS (an outside image, a click-anywhere overlay). MathJax 3 does not
    read ``tex2jax_ignore``, and JupyterLab looks for math in the markdown's source text before it
    renders it. So every ``$`` and ``\\`` of the learner's text becomes a character reference in an
    element of its own (MathJax finds math only inside one text run), and in attribute values a
    character reference: the source holds neither character, the page shows both.

    >>> without_math('<p>a $x$ and \\(y\\) <a href="https://e.org/$1" title="&quot;$">z</a></p>')
    '<p>a <span>&#36;</span>x<span>&#36;</span> and <span>&#92;</span>(y<span>&#92;</span>) <a href="https://e.org/&#36;1" title="&quot;&#36;">z</a></p>'
    """
    if "$" not in fragment and "\\" not in fragment:
        return fragment
    from html.parser import HTMLParser

    def attr(value: str) -> str:
        value = html.escape(value, quote=True).replace("&#x27;", "'")
        return "".join(MATH_CHARS.get(ch, ch) for ch in value)

    class Rewriter(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.out: list[str] = []

        def tag(self, name, attrs, end=""):
            shown = "".join(f" {k}" if v is None else f' {k}="{attr(v)}"' for k, v in attrs)
            self.out.append(f"<{name}{shown}{end}>")

        def handle_starttag(self, name, attrs):
            self.tag(name, attrs)

        def handle_startendtag(self, name, attrs):
            self.tag(name, attrs, " /")

        def handle_endtag(self, name):
            self.out.append(f"</{name}>")

        def handle_data(self, data):
            text = html.escape(data, quote=False)
            self.out.append("".join(f"<span>{MATH_CHARS[ch]}</span>" if ch in MATH_CHARS else ch for ch in text))

    rewriter = Rewriter()
    rewriter.feed(fragment)
    rewriter.close()
    return "".join(rewriter.out)


def _one_line_html(fragment: str) -> str:
    """Sanitised HTML on one line: a markdown renderer treats a line starting with ``<div`` as a raw HTML
    block up to the next blank line, so with no newline at all nothing of it is parsed as markdown again
    (a ``&#10;`` is a newline to the browser, also inside ``<pre>``)."""
    return f'<div class="{MARKDOWN_CLASS}">' + fragment.replace("\r", "").replace("\n", "&#10;") + "</div>"


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _image_metadata(metadata) -> dict:
    out = {}
    for mime in IMAGE_MIMES:
        dims = metadata.get(mime) if isinstance(metadata, dict) else None
        if isinstance(dims, dict):
            kept = {k: v for k, v in dims.items() if k in ("width", "height") and type(v) in (int, float)}
            if kept:
                out[mime] = kept
    return out


def inert_output(out) -> nbformat.NotebookNode:
    """One output as it may appear in the instructor's copy (see the module's table)."""
    kind = out.get("output_type")
    if kind not in ("display_data", "execute_result"):
        return out   # stream, error: text, escaped by every renderer
    data, kept, removed = out.get("data") or {}, {}, []
    if WIDGET_MIME in data:   # its text/plain is the widget's repr (VBox(children=...)): the page's note instead
        data = {"text/plain": WIDGET_NOTE}
    for mime, value in data.items():
        if mime in TEXT_MIMES or mime == ANSWER_MIME:
            kept[mime] = value
        elif mime in IMAGE_MIMES and isinstance(value, str) and BASE64.fullmatch(value):
            kept[mime] = value
        elif mime == "text/html":
            kept[mime] = without_math(sanitize(_text(value)))
        elif mime == "text/markdown":
            kept["text/html"] = without_math(markdown_html(_text(value)))
        else:
            removed.append(mime)
    if removed:
        note = f"[an output of type {', '.join(removed)} was removed: it could run in a browser]"
        kept["text/plain"] = (_text(kept["text/plain"]) + "\n" + note) if "text/plain" in kept else note
    new = nbformat.NotebookNode(out)
    new["data"] = nbformat.NotebookNode(kept)
    new["metadata"] = nbformat.NotebookNode(_image_metadata(out.get("metadata")))
    return new


def instructor_copy(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of the executed notebook in which nothing a learner wrote can run (see the module)."""
    nb = _copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        trusted = is_locked(cell)   # after restore_cells, the instructor's cell as the source has it
        if not trusted:
            meta = cell.get("metadata") or {}
            cell["metadata"] = nbformat.NotebookNode({"nbgrader": meta["nbgrader"]} if "nbgrader" in meta else {})
            cell.pop("attachments", None)
            if cell.get("cell_type") == "markdown":
                cell["source"] = _one_line_html(without_math(markdown_html(_text(cell.get("source", "")))))
            elif cell.get("cell_type") == "raw":
                cell["source"] = _one_line_html(without_math(f"<pre>{html.escape(_text(cell.get('source', '')))}</pre>"))
        if cell.get("cell_type") == "code":
            cell["outputs"] = [inert_output(o) for o in cell.get("outputs", [])]
        if is_test(cell):
            cell["source"] = leave_out_hidden_tests(_text(cell.get("source", "")))
    note = to_grade_by_hand(nb)
    if note is not None:
        nb.cells.insert(0, note)
    return nb


#: The instructor copy's hidden part of a test cell: the markers kept (the feedback page and every redaction
#: still know it as hidden), the code left out.
HIDDEN_BLOCK = re.compile(r"^([ \t]*)### BEGIN HIDDEN TESTS[^\n]*\n(.*?)^[ \t]*### END HIDDEN TESTS[ \t]*$", re.S | re.M)
LEFT_OUT = ("{indent}# ({n} lines of hidden test: restored from the instructor source and run when this was graded;\n"
            "{indent}#  left out of this copy, see the source notebook)")
#: ``metadata.course_grade.instructor_only``: a cell the grader adds to the instructor's copy (never on a learner's page).
INSTRUCTOR_ONLY = "instructor_only"


def leave_out_hidden_tests(source: str) -> str:
    """A test cell's source without its hidden tests' code (formgrader showed 2,039 such lines above the
    one answer to grade by hand); the markers and a line saying how many lines were left out remain.

    >>> print(leave_out_hidden_tests("### BEGIN HIDDEN TESTS\\nx = secret()\\nrecord(x)\\n### END HIDDEN TESTS\\nassert ok"))
    ### BEGIN HIDDEN TESTS
    # (2 lines of hidden test: restored from the instructor source and run when this was graded;
    #  left out of this copy, see the source notebook)
    ### END HIDDEN TESTS
    assert ok
    """
    def fold(m: re.Match) -> str:
        n = len(m.group(2).splitlines())
        return (f"{m.group(1)}### BEGIN HIDDEN TESTS\n{LEFT_OUT.format(indent=m.group(1), n=n)}\n"
                f"{m.group(1)}### END HIDDEN TESTS")
    return HIDDEN_BLOCK.sub(fold, source)


def to_grade_by_hand(nb: nbformat.NotebookNode) -> nbformat.NotebookNode | None:
    """The markdown cell put first in the instructor's copy: a link to each answer graded by hand (the
    link goes to formgrader's score box, whose id is the cell's grade_id), or None when there is none.

    >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("Explain.", metadata={"nbgrader": {
    ...     "grade": True, "solution": True, "grade_id": "explain", "points": 3, "locked": False}})])
    >>> print(to_grade_by_hand(nb).source)
    **To grade by hand in this notebook:** [explain (3 points)](#explain)
    """
    links = [f"[{html.escape(gid)} ({points(cell):g} point{'s' if points(cell) != 1 else ''})](#{gid})"
             for cell in nb.cells if (is_manual(cell) or is_task(cell)) and (gid := grade_id(cell))
             and re.fullmatch(r"[A-Za-z0-9_.-]+", gid) and points(cell)]
    if not links:
        return None
    return nbformat.v4.new_markdown_cell("**To grade by hand in this notebook:** " + " · ".join(links),
                                         metadata={"course_grade": {INSTRUCTOR_ONLY: True}})


def instructor_only(cell) -> bool:
    """A cell the grader added to the instructor's copy (:func:`to_grade_by_hand`)."""
    meta = (cell.get("metadata") or {}).get("course_grade") if isinstance(cell, dict) else None
    return isinstance(meta, dict) and meta.get(INSTRUCTOR_ONLY) is True

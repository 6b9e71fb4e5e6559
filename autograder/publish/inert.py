"""The executed notebook as instructors' tools open it: nothing a learner wrote can run in their browser.

``RESULTS_DIR/autograded/<id>/<assignment>/*.ipynb`` is what nbgrader's formgrader renders (with
nbconvert's HTML exporter, whose templates put a markdown cell's raw HTML, a ``text/html`` or
``image/svg+xml`` output and an ``application/javascript`` output into the page as they are), in
the instructor's logged-in Jupyter session. A learner's ``<img onerror>`` there could call the
Jupyter API: write files, or set their own hand-graded score through formgrader's. So
:func:`instructor_copy` keeps learner content only through the feedback page's allow-list
(:func:`autograder.publish.feedback.sanitize`) or as inert text:

=========================================  =========================================================
In the executed notebook                   In the instructor's copy
=========================================  =========================================================
a markdown cell the learner could edit     its markdown rendered and sanitised, as one line of HTML
(every cell but the locked ones, which     (so no markdown parser reads it again), with no math in it
are the instructor's, restored)            (:func:`without_math`), attachments and
                                           metadata other than nbgrader's dropped
a raw cell the learner could edit          its text escaped, in a ``<pre>``, with no math in it
an output's ``text/html``, ``text/markdown``  sanitised HTML (``text/html``), with no math in it
any of these, once rendered, more than     its text escaped, in a ``<pre>``; past that size too,
twice its own size (:func:`bounded`)       cut there, with a note (a hand-in of ``$`` and ``\\``
                                           became an instructor's copy 12 times its size)
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
'<div class="course-grade-learner-markdown tex2jax_ignore mathjax_ignore"><p><strong>hi</strong> <img></p>&#10;</div>'
>>> copy.cells[1].outputs[0].data["text/html"]
'<div class="tex2jax_ignore mathjax_ignore"><b>b</b></div>'
>>> copy.cells[1].outputs[0].data["text/plain"]
'[an output of type application/javascript was removed: it could run in a browser]'
"""

from __future__ import annotations

import copy as _copy
import html
import re

import nbformat

from ..contract.answers import ANSWER_MIME
from ..contract.cells import grade_id, is_locked, is_manual, is_task, is_test, points
from .feedback import WIDGET_MIME, WIDGET_NOTE, markdown_html, sanitize

#: Output types kept as they are: nbconvert escapes text, and images are checked to be base64.
TEXT_MIMES = ("text/plain",)
IMAGE_MIMES = ("image/png", "image/jpeg")
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
#: The classes of the element around learner HTML that tell math renderers to leave it as text, so a
#: ``\\href{javascript:...}`` or a ``\\unicode[FONT]`` (learner CSS) in a learner's formula stays text:
#: ``tex2jax_ignore`` for MathJax 2 (formgrader's pages), ``mathjax_ignore`` for MathJax 3 (JupyterLab: its
#: default ``ignoreHtmlClass``, which JupyterLab 4.6.6's ``mathjax.document(...)`` keeps; MathJax 3 skips
#: every element inside). The sanitiser keeps no class of the learner's, so none inside turns it back on.
IGNORE_MATH_CLASS = "tex2jax_ignore mathjax_ignore"
#: The wrapper of a learner's markdown in the instructor's copy.
MARKDOWN_CLASS = "course-grade-learner-markdown " + IGNORE_MATH_CLASS
#: What learner text may grow to once rendered: ``GROWTH_FACTOR`` times its own size (as JSON, as the
#: notebook file holds it) and ``GROWTH_SLACK_CHARS`` (the wrapper and a note): see :func:`bounded`.
GROWTH_FACTOR = 2
GROWTH_SLACK_CHARS = 256


#: What a math renderer starts math at: ``$`` (``$...$``, ``$$...$$``) and ``\\`` (``\\(``, ``\\[``,
#: ``\\begin{...}``), as JupyterLab's MathJax 3 (``processEscapes``, ``processEnvironments``) and nbconvert's read them.
MATH_CHARS = {"$": "&#36;", "\\": "&#92;"}


def without_math(fragment: str) -> str:
    """Sanitised HTML in which no math renderer finds math, shown as the same characters.

    Opened in JupyterLab (formgrader's "Open live notebook", or ``jupyter lab`` in the results), a
    learner's ``$...$`` was typeset by MathJax 3, whose ``\\unicode[FONT]{...}`` writes FONT into a
    ``style`` attribute: learner CSS (an outside image, a click-anywhere overlay). JupyterLab looks for
    math in the markdown's source text before it renders it, so every ``$`` and ``\\`` becomes a character
    reference, in text and in attribute values alike: the source holds neither character, the page
    shows both; in the page, the element around it (:data:`IGNORE_MATH_CLASS`) keeps MathJax out. One
    reference per character (5 characters for 1; each was its own ``<span>`` before, 19 for 1). The
    fragment is the sanitiser's output: tag and attribute names hold neither character.

    >>> without_math('<p>a $x$ and \\(y\\) <a href="https://e.org/$1" title="&quot;$">z</a></p>')
    '<p>a &#36;x&#36; and &#92;(y&#92;) <a href="https://e.org/&#36;1" title="&quot;&#36;">z</a></p>'
    """
    return fragment.replace("$", MATH_CHARS["$"]).replace("\\", MATH_CHARS["\\"])


def _escaped(text: str) -> str:
    """Plain text as inert HTML: escaped, and with no math (:func:`without_math`)."""
    return without_math(html.escape(text, quote=False))


def bounded(rendered: str, text: str, what: str = "this answer") -> str:
    """``rendered`` (learner ``text`` made HTML) if it is at most :data:`GROWTH_FACTOR` times the size of
    ``text`` and :data:`GROWTH_SLACK_CHARS`, sizes as JSON (the notebook file's); else ``text`` escaped in a
    ``<pre>`` (:func:`pre`), and if that is past the bound too, cut there with a note. So the instructor's
    copy of a hand-in of ``$`` and ``\\`` is at most about twice its size (each is 5 characters once
    escaped), and nbconvert (formgrader) renders it in seconds; a table in markdown (6 times its source
    as HTML) shows as its source.

    >>> bounded("<p>fine</p>", "fine")
    '<p>fine</p>'
    >>> text = "$" * 1000
    >>> out = bounded(without_math(text), text)   # 5,000 characters for 1,000
    >>> out.startswith("<pre><span>&#36;&#36;") and "is cut here" in out, _json_chars(out) <= 2 * _json_chars(text) + 256
    (True, True)
    """
    budget = GROWTH_FACTOR * _json_chars(text) + GROWTH_SLACK_CHARS
    if _json_chars(rendered) <= budget:
        return rendered
    escaped = _escaped(text)
    whole = pre(escaped)
    if _json_chars(whole) <= budget:
        return whole
    note = (f"<p>[{what} is cut here: shown whole it would be more than {GROWTH_FACTOR} times its size "
            f"in the hand-in; the submitted notebook holds all of it]</p>")
    room = max(0, budget - _json_chars(note))
    shown = escaped[:room]
    while shown and _json_chars(pre(shown)) > room:   # the pieces' tags and JSON's escapes count: a little less
        shown = shown[:len(shown) - max(16, _json_chars(pre(shown)) - room)]
    return pre(shown) + note


#: The longest run of text :func:`pre` leaves without a tag: nbconvert's ``clean_html`` (bleach, on raw
#: cells: formgrader's template) copies a text node once for each character reference in it, so one long
#: run of ``&#36;`` costs the square of its length (6.3 s for 160,000 characters; 0.1 s in pieces).
PIECE_CHARS = 1024


def pre(escaped: str) -> str:
    """Escaped text in a ``<pre>``, in ``<span>`` pieces of at most :data:`PIECE_CHARS` characters, never
    cut inside a character reference.

    >>> pre("a &amp; b")
    '<pre><span>a &amp; b</span></pre>'
    >>> [len(p) for p in pre("&#36;" * 300).split("<span>")[1:]]   # 204 references and </span>; 96 and </span></pre>
    [1027, 493]
    """
    pieces, at = [], 0
    while at < len(escaped):
        end = at + PIECE_CHARS
        amp = escaped.rfind("&", max(at + 1, end - 10), end)
        if end < len(escaped) and amp >= 0 and escaped.find(";", amp, end) < 0:
            end = amp
        pieces.append(escaped[at:end])
        at = end
    return "<pre>" + "".join(f"<span>{p}</span>" for p in pieces) + "</pre>"


def _json_chars(text: str) -> int:
    """Characters ``text`` takes as a JSON string in a notebook file (nbformat writes non-ASCII as is).

    >>> _json_chars('a"')
    5
    """
    import json

    return len(json.dumps(text, ensure_ascii=False))


def _one_line_html(fragment: str) -> str:
    """Sanitised HTML on one line: a markdown renderer treats a line starting with ``<div`` as a raw HTML
    block up to the next blank line, so with no newline at all nothing of it is parsed as markdown again
    (a ``&#10;`` is a newline to the browser, also inside ``<pre>``)."""
    return f'<div class="{MARKDOWN_CLASS}">' + fragment.replace("\r", "").replace("\n", "&#10;") + "</div>"


def _ignore_math(fragment: str) -> str:
    return f'<div class="{IGNORE_MATH_CLASS}">{fragment}</div>'


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
            kept[mime] = _ignore_math(bounded(without_math(sanitize(_text(value))), _text(value), "this output"))
        elif mime == "text/markdown":
            kept["text/html"] = _ignore_math(bounded(without_math(markdown_html(_text(value))), _text(value),
                                                     "this output"))
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
            text = _text(cell.get("source", ""))
            if cell.get("cell_type") == "markdown":
                cell["source"] = _one_line_html(bounded(without_math(markdown_html(text)), text))
            elif cell.get("cell_type") == "raw":
                cell["source"] = _one_line_html(bounded(pre(_escaped(text)), text))
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

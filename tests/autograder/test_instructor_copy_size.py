"""The instructor's copy (autograder/publish/inert.py) is bounded by the hand-in's size (issue 39, round 5).

Round 4 made every ``$`` and ``\\`` of learner text a ``<span>&#36;</span>`` of its own, 19 characters for
one: a 2.9 MB hand-in of ``$`` and ``\\`` became a 34.5 MB instructor's copy, which nbconvert (what
formgrader runs) took 110 s and 2.72 GB to render. Now each is one character reference (5 characters)
inside an element math renderers skip, and learner text that would still grow past twice its size is shown
escaped in a ``<pre>``, cut with a note past that. The figures for the full-size case are in
benchmarks/results/instructor-copy.md.
"""

from __future__ import annotations

import nbformat

from autograder.publish.inert import instructor_copy

SLACK_BYTES = 4096   # the copy's own wrappers and notes, whatever the hand-in's size

LEGIT = "Legit: $\\sum_{i=1}^n i^2 = \\frac{n(n+1)(2n+1)}{6}$ and **bold**"


def _hand_in(chars: int) -> nbformat.NotebookNode:
    """A learner's notebook: a markdown cell and a raw cell of ``$`` and ``\\`` (``chars`` each), and an ordinary answer."""
    text = "$\\" * (chars // 2)
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text), nbformat.v4.new_raw_cell(text),
                                           nbformat.v4.new_markdown_cell(LEGIT)])


def test_a_hand_in_of_dollars_and_backslashes_makes_a_copy_at_most_twice_its_size():
    nb = _hand_in(200_000)
    hand_in_bytes = len(nbformat.writes(nb).encode())
    copy = instructor_copy(nb)
    copy_bytes = len(nbformat.writes(copy).encode())
    assert copy_bytes <= 2 * hand_in_bytes + SLACK_BYTES, (hand_in_bytes, copy_bytes)
    first, raw, legit = (c.source for c in copy.cells)
    assert "is cut here" in raw, "what does not fit says so"   # markdown reads "\\$" as "$": 5 characters for 2
    assert not any("$" in s or "\\" in s for s in (first, raw, legit)), "no math left for a renderer to find"
    # an ordinary answer is rendered as before: formula as text, markdown as HTML
    assert "&#36;&#92;sum_{i=1}^n i^2 = &#92;frac{n(n+1)(2n+1)}{6}&#36;" in legit and "<strong>bold</strong>" in legit


def test_nbconvert_renders_the_bounded_copy_and_shows_the_characters():
    """What formgrader does with the copy (nbconvert's HTML exporter, its classic template, which formgrader's
    extends): the page shows the learner's characters, as many as the copy kept, inside the element MathJax 2
    skips (``tex2jax_ignore``: formgrader's page typesets with MathJax 2)."""
    from nbconvert import HTMLExporter

    nb = _hand_in(20_000)
    body, _ = HTMLExporter(template_name="classic").from_notebook_node(instructor_copy(nb))
    assert body.count("$\\") >= 4_000
    assert body.count('<div class="course-grade-learner-markdown tex2jax_ignore mathjax_ignore">') == 3
    assert '<div class="course-grade-learner-markdown tex2jax_ignore mathjax_ignore"><p>Legit: $' in body


def test_markdown_that_would_grow_more_than_twice_shows_as_its_source():
    """A markdown table is ~6 times its source as HTML: it shows as its source text, whole."""
    table = "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * 200
    copy = instructor_copy(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(table)]))
    assert "<table>" not in copy.cells[0].source and "is cut here" not in copy.cells[0].source
    assert copy.cells[0].source.replace("</span><span>", "").count("| 1 | 2 |") == 200

"""Learner text the grader repeats (check messages, error lines, student ids): bounded before it goes anywhere.

A check message can quote learner text: an exception's value, a line printed to stderr, an
expression from the lab file. It ends up in grades.json, the CSV, the score table on the
instructor's terminal, the feedback page and Gradescope's ``results.json``, which learners see.
:func:`one_line` is what every such message passes through: terminal escape sequences (CSI, OSC,
and every other ``ESC`` sequence) removed, every other control character (C0, C1, DEL) and every
bidirectional override (which can make text read backwards) made a space, whitespace runs
collapsed to one space, and the result cut to ``limit`` characters. Escaping for HTML and CSV
is left to where the text is written (``html.escape``, :func:`autograder.publish.export.csv_safe`).

>>> one_line("\\x1b[31mred\\x1b[0m\\x1b]0;owned\\x07 text\\r\\nnext\\u202eline")
'red text next line'
>>> one_line("x" * 50, limit=10)
'xxxxxxxxx…'
"""

from __future__ import annotations

import re

#: The most characters a message keeps.
MESSAGE_CHARS = 300
#: ESC sequences: CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \\), and two-character ones.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")
#: Control characters (C0, DEL, C1) and the bidirectional overrides and isolates.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u061c]")


def strip_escapes(text: str) -> str:
    """``text`` without terminal escape sequences (colours, titles, cursor moves); other characters kept.

    >>> strip_escapes("\\x1b[1;32mok\\x1b[0m")
    'ok'
    """
    return _ESCAPES.sub("", text)


def one_line(text: object, limit: int = MESSAGE_CHARS) -> str:
    """``text`` as one printable line of at most ``limit`` characters (see the module)."""
    text = _CONTROL.sub(" ", strip_escapes(str(text)))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"

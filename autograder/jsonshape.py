"""How deep and how many: a JSON text's shape, read from its bytes before any object is built.

Everything the grader parses from learner code or a hand-in (a notebook file, a kernel message) is
JSON, and Python's ``json.loads`` has no bound but the interpreter's recursion limit (``RecursionError``
in the grader) and the machine's memory: 19 MiB of empty objects (``{}``, 2 bytes each) is 6.6 million
dicts, ~4 GB once nbformat has made each a node. :func:`shape` reads the text's structure with a few
passes of C-speed byte operations and builds nothing:

1. every string is cut out (one regular expression: a JSON string is ``"``, then anything but ``"``
   and ``\\``, or ``\\`` and any one character, then ``"``); outside strings, ``"`` only ever opens one,
   so on valid JSON the cut is exact, and the number of cuts is the number of strings;
2. what is left is numbers, ``true``/``false``/``null``, commas, colons, blanks and brackets: the
   brackets are kept (``bytes.translate``) and the objects and arrays counted;
3. the depth is the number of passes that each remove every innermost pair (``[]`` or ``{}`` side by
   side, after the strings are gone), at most ``max_depth + 1`` passes over at most twice
   ``max_containers`` bytes, since the count was bounded first.

A text that is not JSON may be counted wrongly, but then ``json.loads`` refuses it anyway, and only
after building what came before the error: that prefix is JSON, and counted right.

>>> shape(b'{"cells": [{"source": "x = [[1]]  # not counted: a string"}], "n": [1, [2, {}]]}')
Shape(depth=4, containers=6, strings=4)
>>> shape(b"[" * 40 + b"]" * 40, max_depth=32)
Traceback (most recent call last):
...
autograder.jsonshape.TooLarge: nests deeper than 32 levels
>>> shape(b"[" + b",".join([b"{}"] * 1000) + b"]", max_containers=100)
Traceback (most recent call last):
...
autograder.jsonshape.TooLarge: holds 1,001 objects and arrays, more than 100
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: One JSON string, escapes included (the "unrolled loop" form: no backtracking).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
#: Every byte but the four brackets (what bytes.translate deletes).
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
#: An innermost pair: an empty array or object once strings and scalars are gone.
_INNERMOST = re.compile(rb"\[\]|\{\}")


class TooLarge(ValueError):
    """A JSON text past a bound: the message says which (to follow "the notebook ..." or "a message ..."),
    never what the text holds."""


@dataclass(frozen=True)
class Shape:
    """A JSON text's structure, read without building it."""

    depth: int
    """Levels of nesting: 0 for a scalar, 1 for ``[]`` or ``[1, "a"]``, 2 for ``{"a": []}``."""
    containers: int
    """Objects and arrays."""
    strings: int
    """Strings, keys included."""


def shape(data: bytes, *, max_depth: int = 1_000_000, max_containers: int = 100_000_000) -> Shape:
    """The depth and counts of the JSON text ``data`` (see the module); :class:`TooLarge` past a bound.

    >>> shape(b'"[[["')
    Shape(depth=0, containers=0, strings=1)
    >>> shape(b'{"a": {"b": "\\\\"}"}, "c": []}')
    Shape(depth=2, containers=3, strings=4)
    """
    skeleton, strings = _STRING.subn(b"", data)
    brackets = skeleton.translate(None, _NOT_BRACKETS)
    del skeleton
    containers = brackets.count(b"[") + brackets.count(b"{")
    if containers > max_containers:
        raise TooLarge(f"holds {containers:,} objects and arrays, more than {max_containers:,}")
    depth = 0
    while brackets:
        brackets, removed = _INNERMOST.subn(b"", brackets)
        if not removed:
            break   # unbalanced: not JSON, and the parser will say so
        depth += 1
        if depth > max_depth:
            raise TooLarge(f"nests deeper than {max_depth:,} levels")
    return Shape(depth=depth, containers=containers, strings=strings)

"""How deep and how many: a JSON text's shape, read from its bytes before any object is built.

Everything the grader parses from learner code or a hand-in (a notebook file, a kernel message) is
JSON, and Python's ``json.loads`` has no bound but the interpreter's recursion limit (``RecursionError``
in the grader) and the machine's memory: 19 MiB of empty objects (``{}``, 2 bytes each) is 6.6 million
dicts, ~4 GB once nbformat has made each a node. :func:`shape` reads the text's structure with a few
passes of C-speed byte operations, a piece at a time, and builds nothing but those pieces:

1. every string is cut out: first the escaped backslashes and then the escaped quotes are deleted
   (``bytes.replace`` pairs backslashes from the left, as a JSON parser does), so that every ``"`` left
   opens or closes a string; the text is cut into pieces of ~256 KiB that each hold whole strings
   (``bytes.count`` says whether a cut falls inside one), and in each piece the strings are what
   lies between the 1st and 2nd ``"``, the 3rd and 4th, ... (``bytes.split``); on valid JSON the cut
   is exact, and half the quotes is the number of strings;
2. what is left is numbers, ``true``/``false``/``null``, commas, colons, blanks and brackets: the
   commas are counted (each value in an array or object but its first follows one), then the brackets
   are kept (``bytes.translate``) and the objects and arrays counted;
3. the depth is the number of passes that each remove every innermost pair (``[]`` or ``{}`` side by
   side, after the strings are gone), at most ``max_depth + 1`` passes over at most twice
   ``max_containers`` bytes, since the count was bounded first.

A text that is not JSON may be counted wrongly, but then ``json.loads`` refuses it anyway, and only
after building what came before the error: that prefix is JSON, and counted right, its brackets left open
included (each is a level: ``json.loads`` recursed down 30,000 ``[`` before it found no ``]``).

>>> shape(b'{"cells": [{"source": "x = [[1]]  # not counted: a string"}], "n": [1, [2, {}]]}')
Shape(depth=4, containers=6, strings=4, values=10)
>>> shape(b"[" * 40 + b"]" * 40, max_depth=32)
Traceback (most recent call last):
...
autograder.contract.jsonshape.TooLarge: nests deeper than 32 levels
>>> shape(b"[" + b",".join([b"{}"] * 1000) + b"]", max_containers=100)
Traceback (most recent call last):
...
autograder.contract.jsonshape.TooLarge: holds more than 100 objects and arrays
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The bytes read at a time (more, to the end of a string that a cut would split): what a piece's split costs.
_PIECE_BYTES = 256 * 1024
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
    values: int
    """Values, keys not included, at most: one more than the commas, plus the objects and arrays (exact
    when no array or object is empty)."""


def shape(data: bytes, *, max_depth: int = 1_000_000, max_containers: int = 100_000_000,
          max_values: int = 1_000_000_000) -> Shape:
    """The depth and counts of the JSON text ``data`` (see the module); :class:`TooLarge` past a bound.

    >>> shape(b'"[[["')
    Shape(depth=0, containers=0, strings=1, values=1)
    >>> shape(b"[" * 30_000, max_depth=100)
    Traceback (most recent call last):
    ...
    autograder.contract.jsonshape.TooLarge: nests deeper than 100 levels
    >>> shape(b'{"a": {"b": "\\\\"}"}, "c": [1, 2.5, null]}')
    Shape(depth=2, containers=3, strings=4, values=7)
    """
    data = data.replace(b"\\\\", b"").replace(b'\\"', b"")   # every quote left opens or closes a string
    strings = commas = containers = 0
    kept = []   # the brackets, outside strings
    start = 0
    while start < len(data):
        end = min(len(data), start + _PIECE_BYTES)
        if data.count(b'"', start, end) % 2:   # the cut is inside a string: cut after it
            close = data.find(b'"', end)
            end = len(data) if close < 0 else close + 1
        pieces = data[start:end].split(b'"')
        strings += (len(pieces) - 1) // 2
        skeleton = b"".join(pieces[::2])
        del pieces
        commas += skeleton.count(b",")
        brackets = skeleton.translate(None, _NOT_BRACKETS)
        containers += len(brackets) - brackets.count(b"]") - brackets.count(b"}")
        if containers > max_containers:
            raise TooLarge(f"holds more than {max_containers:,} objects and arrays")
        if commas + containers + 1 > max_values:
            raise TooLarge(f"holds more than {max_values:,} values")
        kept.append(brackets)
        start = end
    values = commas + containers + 1
    brackets = b"".join(kept)
    depth = 0
    while brackets:
        brackets, removed = _INNERMOST.subn(b"", brackets)
        if not removed:
            # Unbalanced: not JSON, and the parser will say so, but only after it has gone down every bracket
            # opened before the error: each one left is one more level (a prefix of 30,000 "[" is 30,000 deep).
            depth += len(brackets) - brackets.count(b"]") - brackets.count(b"}")
            if depth > max_depth:
                raise TooLarge(f"nests deeper than {max_depth:,} levels")
            break
        depth += 1
        if depth > max_depth:
            raise TooLarge(f"nests deeper than {max_depth:,} levels")
    return Shape(depth=depth, containers=containers, strings=strings, values=values)

"""Which folder names of SUBMITTED_DIR can be student ids: a safe character set and a length the files fit.

A student id is a folder name, and it goes everywhere: file names under RESULTS_DIR
(``records/<id>.json``, whose temporary copy adds 19 characters), nbgrader's gradebook (its
``Student.id`` is a ``String(128)``), formgrader's pages (which print it into HTML and URLs
unescaped: ``"><img src=x onerror=...>`` would run script there), the CSV and the instructor's
terminal. So an id is at most :data:`MAX_ID_BYTES` bytes of UTF-8, made of letters and digits of
any script and ``_ . - @ +``, and starts with a letter, a digit or ``_`` (not ``-``, which reads
as an option, nor ``.``, a hidden file). Any other folder is refused with one line naming it
(:func:`refusal`); the batch grades everyone else.

>>> refusal("alice"), refusal("jean-luc.o+tag@uni.edu"), refusal("Zoë_2")
(None, None, None)
>>> refusal('"><img src=x onerror=alert(1)>')
'it holds \\'"\\', which a student id cannot (letters, digits and _ . - @ + only)'
>>> refusal("x" * 237)
'it is 237 bytes long, over the 128 a student id may have'
"""

from __future__ import annotations

import unicodedata

#: The longest id in bytes of UTF-8 (nbgrader's gradebook column; every derived file name fits 255).
MAX_ID_BYTES = 128
#: Besides letters and digits (of any script).
PUNCTUATION = "_.-@+"


def _ok(ch: str) -> bool:
    return ch in PUNCTUATION or (ch.isalnum() and unicodedata.category(ch)[0] in "LN")


def refusal(name: str) -> str | None:
    """Why ``name`` cannot be a student id, or None when it can."""
    size = len(name.encode("utf-8", "surrogateescape"))
    if size > MAX_ID_BYTES:
        return f"it is {size} bytes long, over the {MAX_ID_BYTES} a student id may have"
    bad = next((ch for ch in name if not _ok(ch)), None)
    if bad is not None:
        shown = ascii(bad) if not bad.isprintable() or bad.isspace() else repr(bad)
        return f"it holds {shown}, which a student id cannot (letters, digits and {' '.join(PUNCTUATION)} only)"
    if not name or not (name[0].isalnum() or name[0] == "_"):
        return "it does not start with a letter, a digit or _"
    return None


def shown(name: str, limit: int = 80) -> str:
    """A refused folder's name as a report line may print it (escaped, cut).

    >>> shown("a\\tb"), shown("x" * 100)[-5:]
    ("'a\\\\tb'", 'xx...')
    """
    text = ascii(name) if any(not c.isprintable() for c in name) else repr(name)
    return text if len(text) <= limit else text[:limit - 3] + "..."

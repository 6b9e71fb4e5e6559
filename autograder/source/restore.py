"""Put the instructor's cells back into a submitted notebook, and read submissions safely.

Everything that decides a grade comes from the instructor source, never from a
submission: :func:`restore_cells` replaces every locked cell (tests included) by
grade_id, wherever the learner edited, moved or deleted it, and clears every output.

Reading a hand-in (:func:`read_handed_in`) trusts nothing about it: the grader may run as
root, so a file is opened without following links (``O_PATH | O_NOFOLLOW``, folder by
folder), checked on its descriptor (a regular file owned by its folder's owner, one hard link
unless that owner is a learner's own uid (:func:`links_are_harmless`), under a size cap) and only
then read, so that a link to ``/etc/shadow`` is refused rather than graded. No message ever quotes a submission's bytes: they would end up in
grades.json, the CSV, the Gradescope JSON and the feedback page.
"""

from __future__ import annotations

import copy
import errno
import io
import json
import os
import stat
import tokenize
import warnings
from pathlib import Path

import nbformat
import nbformat.reader

from .assignment import NotebookSpec
from ..contract.cells import grade_id as _grade_id
from ..contract.cells import has_nbgrader, released_test_source
from ..contract.jsonshape import TooLarge, shape

#: The largest notebook file read (the released notebook is ~50 KB).
MAX_NOTEBOOK_BYTES = 20 * 2**20
#: Cells in a submitted notebook (the released one has ~60; restore and feedback are linear in this).
MAX_CELLS = 2_000
#: Characters of source in all cells together (the released notebook has ~26,000).
MAX_SOURCE_CHARS = 2_000_000
#: The JSON of a submitted notebook, read from its bytes before anything is built (autograder.contract.jsonshape):
#: its nesting (nbformat's own is ~6 levels, a kernel message's content at most 100 more), its objects and
#: arrays (a cell and each of its outputs are a few: the lesson's notebook, outputs and all, has 262), and its
#: values (3,738 there; an output's data may be a long list of numbers). 19 MiB of empty objects, 6.6 million of them, took a
#: grading worker to 3.94 GB, and 620,000 attachments 67 s of its CPU; at these bounds a notebook costs the
#: grader at most ~0.3 GB and a few seconds (benchmarks/results/hand-in-json.md).
MAX_JSON_DEPTH = 128
MAX_JSON_CONTAINERS = 100_000
MAX_JSON_VALUES = 1_000_000


class Refused(ValueError):
    """A handed-in file the grader will not read; the message says why, never what it holds."""


def refuse_other_coding(name: str, data: bytes) -> None:
    """:class:`Refused` when the Python file ``name`` declares a coding other than UTF-8 (PEP 263).

    The grader reads a side file as UTF-8 (a lab edit is compared as that text), while Python runs it
    in the coding its first two lines declare: under ``utf-7`` a comment can hold a line of code
    (``+AAo-`` is a newline), so the program that ran would not be the one that was checked.
    :func:`tokenize.detect_encoding` is the reading Python itself does.

    >>> refuse_other_coding("lab.py", b"# -*- coding: utf-8 -*-\\nx = 1\\n")
    >>> refuse_other_coding("lab.py", b"# -*- coding: utf-7 -*-\\nx = 1  # +AAo-x = 2\\n")
    Traceback (most recent call last):
    ...
    autograder.source.restore.Refused: lab.py declares the coding 'utf-7' on its first lines; only UTF-8 is read: remove that coding line
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        raise Refused(f"{name} declares a coding Python does not know on its first lines; only UTF-8 is read: "
                      f"remove that coding line") from None
    if encoding not in ("utf-8", "utf-8-sig"):
        raise Refused(f"{name} declares the coding {encoding!r} on its first lines; only UTF-8 is read: "
                      f"remove that coding line")


def read_handed_in(folder: Path, name: str, max_bytes: int) -> bytes | None:
    """The bytes of ``folder/name`` (a hand-in), None when it is absent; :class:`Refused` otherwise.

    ``folder`` is ``SUBMITTED_DIR/<student>/<assignment>``: the last two components must be real
    folders (not links), and the file a regular file with a single link, owned by the folder's
    owner, of at most ``max_bytes``.
    """
    folder = Path(folder)
    dir_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    fds = []
    try:
        try:
            fds.append(os.open(folder.parent.parent, dir_flags))
            for part in (folder.parent.name, folder.name):
                fds.append(os.open(part, dir_flags | os.O_NOFOLLOW, dir_fd=fds[-1]))
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise Refused("the submission folder is a link or not a folder; hand in real files") from None
            raise Refused(f"the submission folder cannot be opened ({os.strerror(e.errno)})") from None
        owner = os.fstat(fds[-1]).st_uid
        try:  # O_PATH: nothing is opened for reading yet (a FIFO or a device has no say)
            fds.append(os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fds[-1]))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise Refused(f"{name} cannot be opened ({os.strerror(e.errno)})") from None
        st = os.fstat(fds[-1])
        if stat.S_ISLNK(st.st_mode):
            raise Refused(f"{name} is a link; hand in the file itself")
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"{name} is not a regular file")
        if st.st_uid != owner:
            raise Refused(f"{name} is owned by uid {st.st_uid}, not by the owner of its folder (uid {owner}); "
                          f"hand in your own copy")
        if st.st_nlink != 1 and not links_are_harmless(st.st_uid):
            raise Refused(f"{name} has {st.st_nlink} hard links (it is another file too); hand in a plain copy")
        if st.st_size > max_bytes:
            raise Refused(f"{name} is {st.st_size / 2**20:.1f} MiB, over the {max_bytes / 2**20:.0f} MiB limit")
        try:
            fd = os.open(f"/proc/self/fd/{fds[-1]}", os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError as e:
            raise Refused(f"{name} cannot be read ({os.strerror(e.errno)})") from None
        fds.append(fd)
        again = os.fstat(fd)
        if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino):  # pragma: no cover - defence in depth
            raise Refused(f"{name} changed while it was read")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise Refused(f"{name} is over the {max_bytes / 2**20:.0f} MiB limit")
        return b"".join(chunks)
    finally:
        for fd in reversed(fds):
            os.close(fd)


def links_are_harmless(owner_uid: int) -> bool:
    """May a hand-in with more than one hard link be read, given that it is owned by its folder's owner?

    A hard link is refused for what it could smuggle in: a file the learner could not read
    themselves (``/etc/shadow``, the instructor's source), read for them by a grader that runs as
    root. Ownership settles that where each learner owns their folder (a JupyterHub exchange, one
    uid per learner): a file owned by that learner is theirs whatever other names it has, and a
    learner who links someone else's file into their own folder holds a file owned by the other
    uid, refused by the owner check before this one. So the *victim* of a link (Alice, whose
    notebook Mallory linked into her own folder) is graded on her own bytes, and the *linker*
    (Mallory) is refused.

    Where the folder's owner is root or the grader's own uid (every hand-in collected by one
    account, the tests' class), ownership tells nothing: a secret of that account linked in looks
    like a hand-in, so a file with several links stays refused there, as before.

    >>> links_are_harmless(1001) == (os.geteuid() != 1001)
    True
    >>> links_are_harmless(0)
    False
    """
    return owner_uid not in (0, os.geteuid())


def restore_cells(submitted: nbformat.NotebookNode, spec: NotebookSpec) -> tuple[nbformat.NotebookNode, list[str]]:
    """The notebook to execute: the learner's answers with every locked cell put back from the source.

    - test cells and read-only cells are replaced, by grade_id, with the instructor's cell
      (hidden tests included), and re-inserted where the source has them if deleted;
    - answer cells keep the learner's text but take their nbgrader metadata (points) from the source;
    - any other cell claiming nbgrader metadata (a copied or invented grade_id, or metadata of any
      shape nbgrader does not write: ``null``, a list, a string, a list as grade_id...) loses it, so a
      locked cell whose metadata was broken is re-inserted from the source like a deleted one;
    - every output is cleared, so nothing from the submitted file can pass as an answer.

    After this, every nbgrader metadata in the notebook is the instructor's.

    Returns the notebook and a list of notes on what was restored.
    """
    source_cells = {_grade_id(c): c for c in spec.nb.cells if _grade_id(c)}
    out, notes, taken = [], [], set()
    for position, cell in enumerate(submitted.cells):
        cell = copy.deepcopy(cell)
        gid = _grade_id(cell)
        if gid is None and has_nbgrader(cell):
            cell.metadata.pop("nbgrader", None)
            notes.append(f"cell {position + 1} had nbgrader metadata of an unknown shape; it was treated as a plain cell")
        if gid is not None and (gid in taken or gid not in source_cells):
            cell.metadata.pop("nbgrader", None)  # a duplicate or an invented grade cell
            if gid in taken:
                notes.append(f"a second cell claiming {gid!r} was demoted to a plain cell")
            gid = None
        if gid in spec.locked_ids:
            original = source_cells[gid]
            # as released (hidden tests left out) or as the instructor wrote it: anything else is an edit
            if cell.get("source") not in (released_test_source(original), original.source) \
                    or cell.cell_type != original.cell_type:
                notes.append(f"{gid} was edited; restored from the instructor source")
            cell = _fresh(original)
        elif gid in spec.solution_ids:
            cell.metadata["nbgrader"] = copy.deepcopy(source_cells[gid].metadata["nbgrader"])
            if cell.cell_type != source_cells[gid].cell_type:
                cell = _fresh(source_cells[gid], source=cell.get("source", ""))
        if gid:
            taken.add(gid)
        out.append(cell)

    # Re-insert deleted locked cells after the nearest preceding source cell that is present and the
    # learner's own cells after it (they may define what the test needs, e.g. an answer cell whose
    # metadata was broken), that is, before the next cell that carries a grade_id.
    order = [_grade_id(c) for c in spec.nb.cells if _grade_id(c)]
    for pos, gid in enumerate(order):
        if gid in taken or gid not in spec.locked_ids:
            continue
        anchor = next((order[j] for j in range(pos - 1, -1, -1) if order[j] in taken), None)
        if anchor is None:
            at = 0
        else:
            at = next(i for i, c in enumerate(out) if _grade_id(c) == anchor) + 1
            while at < len(out) and _grade_id(out[at]) is None:
                at += 1
        out.insert(at, _fresh(source_cells[gid]))
        taken.add(gid)
        notes.append(f"{gid} was deleted; re-inserted from the instructor source")

    for i, cell in enumerate(out):
        cell["id"] = f"cell-{i}"  # unique ids: a copied cell would otherwise repeat one
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb = nbformat.v4.new_notebook(cells=out, metadata=copy.deepcopy(spec.nb.metadata))
    return nb, notes


def _fresh(cell, source: str | None = None) -> nbformat.NotebookNode:
    new = copy.deepcopy(cell)
    if source is not None:
        new.source = source
    if new.cell_type == "code":
        new.outputs = []
        new.execution_count = None
    return new


def read_submission(data: bytes, max_cells: int = MAX_CELLS,
                    max_source_chars: int = MAX_SOURCE_CHARS) -> nbformat.NotebookNode:
    """Parse and validate a submitted notebook's bytes; raises :class:`Refused` with a reason if it is not one.

    The size of the work is bounded before anything is built: the JSON's depth and counts (from the bytes:
    :data:`MAX_JSON_DEPTH`, :data:`MAX_JSON_CONTAINERS`, :data:`MAX_JSON_VALUES`), then before nbformat
    sees it, the cell count and the total source.

    >>> read_submission(b'{"cells": [], "metadata": {"x": [' + b",".join([b"{}"] * 100_001) + b']}}')
    Traceback (most recent call last):
    ...
    autograder.source.restore.Refused: the notebook holds more than 100,000 objects and arrays (a notebook needs a few per cell and output): delete scratch cells, clear its outputs and extra metadata, save, and hand it in again
    """
    try:
        shape(data, max_depth=MAX_JSON_DEPTH, max_containers=MAX_JSON_CONTAINERS, max_values=MAX_JSON_VALUES)
    except TooLarge as e:
        raise Refused(f"the notebook {e} (a notebook needs a few per cell and output): delete scratch cells, clear "
                      f"its outputs and extra metadata, save, and hand it in again") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("the notebook is not UTF-8 text") from None
    try:
        raw = json.loads(text)
    except RecursionError:
        raise Refused("the notebook is not valid JSON (nested too deeply)") from None
    except ValueError as e:  # JSONDecodeError: its msg is the parser's phrase, never the file's text
        where = f" (line {e.lineno}, column {e.colno}: {e.msg})" if isinstance(e, json.JSONDecodeError) else ""
        raise Refused(f"the notebook is not valid JSON{where}") from None
    if not isinstance(raw, dict):
        raise Refused("the notebook is not a JSON object; it should be an .ipynb file")
    cells = raw.get("cells")
    if raw.get("nbformat") == 3 and cells is None and isinstance(raw.get("worksheets"), list):
        # nbformat 3 (IPython 2): cells in worksheets, code in "input"; converted below, as stock nbgrader does
        cells = [c for ws in raw["worksheets"] if isinstance(ws, dict) and isinstance(ws.get("cells"), list)
                 for c in ws["cells"]]
    if not isinstance(cells, list):
        raise Refused("the notebook has no list of cells (is it nbformat 4?)")
    if len(cells) > max_cells:
        raise Refused(f"the notebook has {len(cells):,} cells, over the limit of {max_cells:,}; delete scratch cells")
    chars = sum(_source_chars(c.get("source")) + _source_chars(c.get("input")) for c in cells if isinstance(c, dict))
    if chars > max_source_chars:
        raise Refused(f"the notebook's cells hold {chars:,} characters of source, over the limit of "
                      f"{max_source_chars:,}; delete scratch cells")
    # nbformat's own texts quote the file (and it logs them): read quietly, say only where.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. MissingIDFieldWarning for nbformat 4.4 files
        try:
            nb = nbformat.reader.reads(text)
            nb = nbformat.convert(nb, 4)
        except Exception:  # noqa: BLE001 - NBFormatError, ValidationError, KeyError...
            raise Refused("the notebook does not follow the notebook format (nbformat 4)") from None
        try:
            nbformat.validate(nb)
        except nbformat.ValidationError as e:
            path = list(getattr(e, "absolute_path", None) or getattr(e, "path", None) or [])
            where = f" in cell {path[1] + 1}" if len(path) > 1 and path[0] == "cells" and type(path[1]) is int else ""
            raise Refused(f"the notebook does not follow the notebook format (nbformat 4){where}") from None
        except Exception:  # noqa: BLE001
            raise Refused("the notebook does not follow the notebook format (nbformat 4)") from None
    return nb


def _source_chars(source) -> int:
    if isinstance(source, str):
        return len(source)
    if isinstance(source, list):
        return sum(len(line) for line in source if isinstance(line, str))
    return 0


#: What reading one hand-in's notebook may cost, in a child process of its own (:func:`read_submission_limited`):
#: address space beyond the grader's own, and CPU seconds. Within the JSON bounds above it needs ~0.2 GB and
#: under a second; these are the backstop for whatever nbformat's reading and validation could still cost.
READ_MEMORY_BYTES = 1 << 30
READ_CPU_S = 30


def read_submission_limited(data: bytes, memory_bytes: int = READ_MEMORY_BYTES,
                            cpu_s: int = READ_CPU_S) -> nbformat.NotebookNode:
    """:func:`read_submission` in a forked child whose memory (``RLIMIT_AS``: the grader's size at the fork and
    ``memory_bytes``) and CPU time (``RLIMIT_CPU``) are limited; the notebook comes back pickled, or
    :class:`Refused` with the child's reason, or with the limit it ran into. A wall-clock backstop of
    twice ``cpu_s`` ends a child that waits. Costs ~10 ms for an ordinary notebook (the fork).

    >>> read_submission_limited(b'{"cells": [], "metadata": {"x": ' + b"[" * 200 + b"]" * 200 + b'}}')
    Traceback (most recent call last):
    ...
    autograder.source.restore.Refused: the notebook nests deeper than 128 levels (a notebook needs a few per cell and output): delete scratch cells, clear its outputs and extra metadata, save, and hand it in again
    >>> len(read_submission_limited(json.dumps(nbformat.v4.new_notebook()).encode()).cells)
    0

    The memory cap is on address space: a parent whose threads already reserved malloc arenas (torch, a
    Dask worker) leaves the child room inside them, so how much a child may read under ``memory_bytes``
    depends on its parent; tests/autograder/test_hand_in_json.py holds the cap in a plain Python process.
    """
    import pickle
    import resource
    import select
    import signal
    import time

    limits = f"{memory_bytes / 2**20:,.0f} MiB of memory or {cpu_s} CPU seconds"
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: never returns
        code, limited = 0, False
        try:
            os.close(read_fd)
            with open("/proc/self/status") as f:
                size = int(next(line for line in f if line.startswith("VmSize:")).split()[1]) * 1024
            used = resource.getrusage(resource.RUSAGE_SELF)
            _lower(resource.RLIMIT_AS, size + memory_bytes)
            _lower(resource.RLIMIT_CPU, int(used.ru_utime + used.ru_stime) + cpu_s)   # the fork's own count goes on
            limited = True
            try:
                result = ("read", read_submission(data))
            except Refused as e:
                result = ("refused", str(e))
            except MemoryError:
                result = ("limit", "")
            payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
            view, written = memoryview(payload), 0
            while written < len(view):
                written += os.write(write_fd, view[written:written + (1 << 20)])
        except BaseException:  # noqa: BLE001
            # Under its limits, any failure is the hand-in's (a MemoryError in pickling the result, an
            # error raised while out of memory): the parent refuses it. Only a child that failed before its
            # limits were set (no /proc here) lets the parent read as before.
            code = 4 if limited else 3
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks, deadline = [], time.monotonic() + 2 * cpu_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                chunks = []
                break
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3:
        return read_submission(data)   # no child reader here (not the hand-in's doing): bounded by the counts alone
    try:
        kind, value = pickle.loads(b"".join(chunks)) if chunks else ("limit", "")
    except Exception:  # noqa: BLE001 - a child cut short (the CPU limit's SIGXCPU, the memory cap)
        kind, value = "limit", ""
    if kind == "read":
        return value
    if kind == "refused":
        raise Refused(value)
    raise Refused(f"reading the notebook took more than the grader allows one hand-in ({limits})")


def _lower(kind: int, value: int) -> None:
    """Set the soft limit ``kind`` to ``value``, never above the hard limit (which a process may not raise)."""
    import resource

    soft, hard = resource.getrlimit(kind)
    resource.setrlimit(kind, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))

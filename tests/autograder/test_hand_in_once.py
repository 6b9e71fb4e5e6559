"""A hand-in is read once and hashed once in a batch (issue 39: "each submission's files are read 3 times
and hashed twice": for the reuse rule, in the worker that graded it, and again for ``submitted/``).

Counted from outside the grader: every ``os.read`` that returns bytes of a hand-in file (found through
``/proc/self/fd``, in the batch's process and in the worker processes it forks alike), and every
``hashlib.sha256`` made over a hand-in file's bytes, each logged to one file that all the processes append to.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections import Counter
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "files" / "autograder"))
import hostile  # noqa: E402

from autograder.batch.autograde import main as autograde  # noqa: E402

pytestmark = pytest.mark.slow


def test_each_hand_in_is_read_once_and_hashed_once(tmp_path, monkeypatch):
    submitted, results = tmp_path / "submitted", tmp_path / "results"
    folder = submitted / "alice" / hostile.ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(hostile.learner_notebook(), folder / hostile.NOTEBOOK)
    (folder / hostile.LAB.name).write_text(hostile.lab_text(16))
    watched = {str((folder / name).resolve()): (folder / name).read_bytes() for name in (hostile.NOTEBOOK, hostile.LAB.name)}
    log = tmp_path / "reads.log"
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    real_read, real_sha256, write = os.read, hashlib.sha256, os.write

    def counting_read(fd, n):
        data = real_read(fd, n)
        if data:
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                target = ""
            if target in watched:
                write(log_fd, f"read {len(data)} {Path(target).name}\n".encode())
        return data

    def counting_sha256(data=b"", **kwargs):
        for path, content in watched.items():
            if data and bytes(data) == content:
                write(log_fd, f"hash {len(content)} {Path(path).name}\n".encode())
        return real_sha256(data, **kwargs)

    monkeypatch.setattr(os, "read", counting_read)
    monkeypatch.setattr(hashlib, "sha256", counting_sha256)
    try:
        batch = autograde(submitted, out=results, workers=1, cell_timeout=20, notebook_timeout=60, progress=False,
                          assignment=hostile.assignment())
    finally:
        monkeypatch.undo()
        os.close(log_fd)
    alice = batch.students["alice"]
    assert alice.status == "graded" and alice.score == 5 + hostile.LAB_POINTS, alice.message
    # the copy formgrader lists holds the bytes that were graded
    assert (results / "submitted" / "alice" / hostile.ASSIGNMENT / hostile.NOTEBOOK).read_bytes() == watched[
        str((folder / hostile.NOTEBOOK).resolve())]

    bytes_read, hashes = Counter(), Counter()
    for line in log.read_text().splitlines():
        kind, size, name = line.split(" ", 2)
        (bytes_read if kind == "read" else hashes)[name] += int(size) if kind == "read" else 1
    sizes = {Path(path).name: len(content) for path, content in watched.items()}
    reads = {name: bytes_read[name] / size for name, size in sizes.items()}
    assert reads == {hostile.NOTEBOOK: 1, hostile.LAB.name: 1}, f"times each hand-in file was read: {reads}"
    assert dict(hashes) == {hostile.NOTEBOOK: 1, hostile.LAB.name: 1}, f"times each was hashed: {dict(hashes)}"

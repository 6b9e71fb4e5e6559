"""A fork server's "ready" line is read by one thread: two threads asking at once never hang.

The lab check runs the released and the edited lab in two sandboxes at once (``lessons/l14_04/lab.py``,
``lab_baseline``), and each asks the fork server whether it has finished importing. Both saw its stdout
readable; one read the "ready" line and the other's ``readline()`` then waited for a second line that never
comes (a fresh-clone ``make test`` hung there in ``test_formgrader.py``'s fixture).
"""
from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from autograder.sandbox.forkserver import ForkServer


class _Stdout:
    """A pipe end that says it is readable to everyone and holds one line: what the race needs, made certain
    (select sees a readable pipe; the first readline takes the line; a second would block for ever)."""

    def __init__(self):
        self.lines = [b"ready\n"]
        self.both_selected = threading.Barrier(2, timeout=1)

    def fileno(self):
        return sys.stdin.fileno()

    def readline(self):
        if not self.lines:
            raise AssertionError("a second thread read the 'ready' line again: it would block for ever")
        return self.lines.pop()


def test_two_threads_asking_at_once_both_hear_ready(monkeypatch):
    server = ForkServer.__new__(ForkServer)
    server.owner, server._ready, server._ready_lock = __import__("os").getpid(), False, threading.Lock()
    stdout = _Stdout()
    server.proc = type("P", (), {"stdout": stdout})()

    def readable(r, w, x, timeout):
        try:
            stdout.both_selected.wait()   # both threads are past select before either reads: the race, every time
        except threading.BrokenBarrierError:
            pass                          # under the lock the second thread only gets here after the first read
        return r, w, x

    monkeypatch.setattr("autograder.sandbox.forkserver.select.select", readable)
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: server.ready(), range(2)))
    assert answers == [True, True]

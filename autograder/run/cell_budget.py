"""What a notebook's cells may spend: CPU seconds per cell and per notebook (:class:`Budget`), and the
wall clock and idle allowance shared by all the notebooks of one hand-in (:class:`Clock`).

:mod:`autograder.run.execute` asks a budget, at each poll, whether the running cell is over.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


# ---- the clock -----------------------------------------------------------------------------

@dataclass
class Clock:
    """The wall clock and the idle time of one hand-in, shared by the budgets of all its notebooks, so
    that the wall-clock backstop and the idle allowance bound the hand-in as a whole (one notebook's
    worth), not each notebook anew (a hand-in whose notebooks each wait to their own backstop would
    hold a worker for their sum). A budget made without one has a clock of its own."""

    wall0: float = field(default_factory=time.monotonic)
    """When the hand-in's first notebook started."""
    idle_s: float = 0.0
    """Wall-clock seconds the hand-in's notebooks have spent waiting so far (:meth:`Budget.account`)."""
    notebooks: int = 1
    """How many notebooks share it (what the messages say)."""


class Budget:
    """A time limit in CPU seconds of the sandbox, with a wall-clock backstop ``wall_factor`` times larger,
    and (``idle_factor``, for the notebook) an idle allowance: wall-clock seconds in which the sandbox
    waited. The backstop and the allowance run on a :class:`Clock`, the hand-in's where one is given.

    Waiting is judged in windows of :meth:`idle_window_s` (5 s at the default limits). In each, the
    sandbox's processes were busy (running, or ready to run and queued for a core: their CPU time plus
    ``run_delay`` of ``/proc/PID/task/TID/schedstat``, Sandbox.runqueue_seconds) or asleep (a ``sleep``,
    a blocked read) the rest of the time; when they slept for most of the window (busy under
    :attr:`IDLE_SHARE` of it) the time they slept counts as waiting. A cell that works 40 ms in every
    240 ms (17% of a core) mostly waits, and 83% of its time counts; a kernel starved by a busy host is
    queued for a core when it is not running, so it is busy, not waiting. Where the queue time cannot be
    read, a starved kernel cannot be told from a waiting one, and only windows under
    :attr:`CPU_ONLY_IDLE_SHARE` of a core count (whole).

    CPU time is what a cell costs whatever else the machine runs (a busy grading host gives the kernel
    less of a core, not less work done per CPU second); the backstop ends what uses no CPU at all (a
    ``sleep``, a blocked read). Where the sandbox has no CPU clock (no cgroup and no throwaway uid,
    ``--insecure`` only), the limit is wall-clock time, as it was.

    >>> class Box:   # a sandbox whose processes have used 7 CPU seconds, then 12
    ...     readings = iter([7.0, 12.0])
    ...     def cpu_seconds(self): return next(self.readings)
    >>> budget = Budget(Box(), 5, wall_factor=4)
    >>> budget.over()
    'cpu'

    Waiting is not free: a notebook that sleeps holds a grading worker. With an idle allowance of 1 times
    a 5 s limit (windows of 1.25 s), 3 s of work (3 CPU seconds) then 6 s of sleep (no CPU) is over it;
    the work is not waiting:

    >>> class Sleeper:
    ...     def cpu_seconds(self): return 0.0
    >>> budget = Budget(Sleeper(), 5, wall_factor=4, idle_factor=1)
    >>> budget.account(budget.wall0 + 3, 3.0); budget.idle_used()
    0.0
    >>> budget.account(budget.wall0 + 9, 3.0); budget.idle_used(), budget.over()
    (6.0, 'idle')

    A window of 1 CPU second and 2 s queued for a core (a starved kernel) is not waiting; one of 0.5 CPU
    seconds in 3 s (a cell that works a little, then sleeps) waited 2.5 s:

    >>> class Queued:
    ...     def cpu_seconds(self): return 0.0
    ...     def runqueue_seconds(self): return 0.0
    >>> budget = Budget(Queued(), 5, wall_factor=4, idle_factor=1)
    >>> budget.account(budget.wall0 + 3, 1.0, queued=2.0); budget.idle_used()
    0.0
    >>> budget.account(budget.wall0 + 6, 1.5, queued=2.0); budget.idle_used()
    2.5

    Two notebooks on one clock share one backstop and one allowance:

    >>> clock = Clock(notebooks=2)
    >>> first = Budget(Sleeper(), 5, wall_factor=4, idle_factor=1, clock=clock)
    >>> first.account(first.wall0 + 4, 0.0)
    >>> second = Budget(Sleeper(), 5, wall_factor=4, idle_factor=1, clock=clock)
    >>> second.idle_used(), second.wall_s
    (4.0, 20)
    """

    #: Seconds a CPU reading is reused (the uid fallback walks /proc).
    READ_EVERY_S = 0.05
    #: The longest window waiting is judged over, and the shortest (the uid fallback's clock ticks are 10 ms).
    IDLE_WINDOW_S, MIN_IDLE_WINDOW_S = 5.0, 1.0
    #: A window in which the sandbox ran or was queued to run for less than this share of it mostly waited.
    IDLE_SHARE = 0.5
    #: The same where the queue time cannot be read: a window under this share of a core counts whole.
    CPU_ONLY_IDLE_SHARE = 0.02

    def __init__(self, sandbox, cpu_s: float, wall_factor: float, idle_factor: float | None = None,
                 clock: Clock | None = None):
        self.sandbox, self.cpu_s, self.wall_s = sandbox, cpu_s, cpu_s * wall_factor
        self.idle_s = None if idle_factor is None else cpu_s * idle_factor
        """Wall-clock seconds the sandbox may spend waiting (None: no idle allowance)."""
        self.clock = clock or Clock()
        self.wall0 = time.monotonic()
        self.cpu0 = sandbox.cpu_seconds()
        self.measured = self.cpu0 is not None
        if not self.measured:
            self.wall_s = cpu_s
            self.clock = Clock(self.wall0, self.clock.idle_s, self.clock.notebooks)   # its own: wall time is its limit
        self._read_at, self._cpu = self.wall0, self.cpu0
        self._window = (self.wall0, self.cpu0, self._queued())

    def idle_window_s(self) -> float:
        """A quarter of the idle allowance, within [MIN_IDLE_WINDOW_S, IDLE_WINDOW_S]: a short allowance
        (a test's) is judged in short windows."""
        return min(self.IDLE_WINDOW_S, max(self.MIN_IDLE_WINDOW_S, (self.idle_s or 0) / 4))

    def _queued(self) -> float | None:
        if self.idle_s is None:
            return None
        read = getattr(self.sandbox, "runqueue_seconds", None)
        return read() if read is not None else None

    def cpu_used(self) -> float:
        if not self.measured:
            return time.monotonic() - self.wall0
        now = time.monotonic()
        if now - self._read_at >= self.READ_EVERY_S or self._cpu == self.cpu0:
            cpu = self.sandbox.cpu_seconds()
            if cpu is not None:
                self._cpu, self._read_at = cpu, now
                self.account(now, cpu)
        return self._cpu - self.cpu0

    def account(self, now: float, cpu: float, queued: float | None = None) -> None:
        """Count the time the sandbox slept in the window since the last one as waiting (on the clock), if it
        slept for most of it. ``queued``: the sandbox's queue time now (None: read it)."""
        start, cpu_then, queued_then = self._window
        if self.idle_s is None or now - start < self.idle_window_s():
            return
        queued = self._queued() if queued is None else queued
        window, busy = now - start, cpu - cpu_then
        if queued is not None and queued_then is not None:
            busy += max(0.0, queued - queued_then)   # a thread that exited takes its queue time with it
            if busy < self.IDLE_SHARE * window:
                self.clock.idle_s += window - busy
        elif busy < self.CPU_ONLY_IDLE_SHARE * window:
            self.clock.idle_s += window
        self._window = (now, cpu, queued)

    def wall_used(self) -> float:
        return time.monotonic() - self.clock.wall0

    def idle_used(self) -> float:
        """Wall-clock seconds in which the sandbox (the hand-in, on a shared clock) waited: slept or blocked
        on a read, in windows where it did so most of the time."""
        return self.clock.idle_s

    def over(self) -> str | None:
        """"cpu" once the CPU seconds are used, "wall" once the backstop has passed, "idle" once the idle
        allowance is spent, else None."""
        if self.cpu_used() >= self.cpu_s:
            return "cpu"
        if self.wall_used() >= self.wall_s:
            return "wall"
        if self.idle_s is not None and self.idle_used() >= self.idle_s:
            return "idle"
        return None

    def wall_left(self) -> float:
        """Wall-clock seconds before the backstop or the idle allowance (for start-up timeouts)."""
        left = self.wall_s - self.wall_used()
        if self.idle_s is not None:
            left = min(left, self.idle_s - self.idle_used())
        return max(0.0, left)


# ---- one run of a notebook -----------------------------------------------------------------

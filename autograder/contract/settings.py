"""How submissions are run: the one owner of every grading default (the CLI and the verbs read theirs here).

>>> Settings().cell_timeout, Settings().notebook_timeout, Settings().limits.memory_text()
(60, 300, '2.15 GB (2.00 GiB)')
"""

from __future__ import annotations

from dataclasses import dataclass, field

from course_lib.units import MiB

from ..sandbox import Limits


@dataclass(frozen=True)
class Settings:
    """How submissions are run. Part of every result's fingerprint."""

    cell_timeout: float = 60
    """CPU seconds one cell may use, all of the sandbox's processes together (the reference notebook's
    slowest cell takes under 2 s); a busy machine does not change it (autograder.run.cell_budget.Budget)."""
    notebook_timeout: float = 300
    """CPU seconds each notebook may use."""
    wall_factor: float = 4
    """The wall-clock backstop of every time limit, as a multiple of it (a cell that sleeps uses no CPU)."""
    idle_factor: float = 1
    """Wall-clock time a hand-in's notebooks together may spend waiting (sleeping, blocked on a read), as a
    multiple of the notebook time limit: waiting holds a grading worker, so it is bounded too (300 s by
    default), and a notebook stopped for it says so in its record. A side check's program gets
    ``1 + idle_factor`` times its limit of wall-clock time. Waiting is time asleep in windows where the
    sandbox slept most of the time, working a little or not at all (autograder.run.cell_budget.Budget): a kernel
    queued for a core of a busy host is not waiting. The wall-clock backstop (``wall_factor``) is one for
    the hand-in's notebooks together too (autograder.run.cell_budget.Clock)."""
    limits: Limits = field(default_factory=Limits)
    """OS-enforced limits: memory, processes, file size, CPU (their defaults are Limits')."""
    max_output_bytes: int = 1 * MiB
    """Text and images a notebook may print in total; the rest is dropped with a note."""
    side_check_timeout: float = 60
    """Seconds a side check's program (e.g. the learner's lab script) may run."""
    max_restarts: int = 3
    """Fresh kernels a notebook may get after a cell killed or hung its kernel (each replays the cells before)."""
    insecure: bool = False
    """Grade even below the isolation minimum (``--insecure``; never in a Gradescope bundle)."""
    python: str | None = None
    """The course's Python, which runs the notebooks in the sandbox (``--python PATH``); None: the grader's."""

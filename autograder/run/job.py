"""What a worker is given: the :class:`Batch`, built once per batch, and one :class:`Job` per hand-in that carries it.

``course-grade autograde`` builds one :class:`Batch` when the batch starts (the snapshot of the instructor's
assignment, the settings with their limits and the course's Python, the side checks' preparations, the
fingerprint of everything besides the hand-ins) and hands the same object to every :class:`Job`: a local
worker process and a Dask task read it there, and nothing re-derives it. On a Dask worker and on Gradescope
the assignment is the copy installed there (:func:`dataclasses.replace`), the rest is as built.

Both are frozen and picklable (they cross to worker processes and to Dask workers):

>>> import pickle
>>> from pathlib import Path
>>> from autograder.contract.settings import Settings
>>> from autograder.source.assignment import Assignment
>>> batch = Batch(Assignment("ps1", (Path("problem1.ipynb"),)), Settings(), {}, "f" * 64, "/tmp/results")
>>> job = Job("amy", "/tmp/submitted/amy/ps1", batch, HandIn(), fingerprint="0" * 64)
>>> pickle.loads(pickle.dumps(job)) == job, job.assignment.name, job.settings.cell_timeout == Settings().cell_timeout
(True, 'ps1', True)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..contract.settings import Settings
from ..source.assignment import Assignment
from .handin import HandIn


@dataclass(frozen=True)
class Batch:
    """What every hand-in of one batch is graded against, built once (``autograde``'s start_batch step)."""

    assignment: Assignment
    """The instructor's assignment as this batch snapshot it (``RESULTS_DIR/.instructor/``); its parsed
    source is :func:`autograder.source.assignment.load_source` of it (read once per process)."""
    settings: Settings
    """Timeouts, the sandbox's limits, the course's Python, ``--insecure``."""
    prepared: dict
    """The side checks' preparations, by side check name (:func:`autograder.run.sidecheck.prepare`)."""
    fingerprint: str
    """Everything besides the hand-ins that a grade depends on (``autograde.batch_fingerprint``)."""
    results_dir: str
    """Where each job writes its student's files (record last)."""


@dataclass(frozen=True)
class Job:
    """One hand-in to grade, read once (:class:`~autograder.run.handin.HandIn`), with the batch it belongs to."""

    student_id: str
    folder: str
    """SUBMITTED_DIR/<student_id>/<assignment>/ (on another machine: where the hand-in was laid out)."""
    batch: Batch
    hand_in: HandIn
    """The files as read once by the batch (staged in ``RESULTS_DIR/.hand-ins/``, or in it): graded, hashed and
    copied to ``submitted/`` from these bytes."""
    fingerprint: str
    """The batch's fingerprint and this hand-in's hash together: a record with the same is not graded again."""

    @property
    def assignment(self) -> Assignment:
        return self.batch.assignment

    @property
    def settings(self) -> Settings:
        return self.batch.settings

    @property
    def prepared(self) -> dict:
        return self.batch.prepared

    @property
    def results_dir(self) -> str:
        return self.batch.results_dir

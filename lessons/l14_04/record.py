"""The predictions' record, a side check with no points: the notebooks run beside the learner's own record.

The reveal cells write ``l14-04-predictions.json`` beside the notebooks at each prediction's first reveal
(:mod:`course_lib.lessons.l14_04.predictions`); it is released empty (``{}``) and handed in with the
notebooks. :meth:`PredictionRecord.beside` puts the learner's copy where the notebooks run, so the hidden
tests of the predictions (:func:`lessons.l14_04.collect.committed`) grade each prediction as it was
committed, not as it was edited after its answer was shown. It asks no question of its own.

>>> PredictionRecord().beside(b"{}\\n", b'{"log_predict": {}}')
b'{"log_predict": {}}'
>>> PredictionRecord().beside(b"{}\\n", None), PredictionRecord().beside(b"{}\\n", b"x" * 2_000_000)
(b'{}\\n', b'{}\\n')
"""

from __future__ import annotations

from dataclasses import dataclass

from autograder.contract.lesson import SideCheck

#: The largest record read (three predictions are a few hundred bytes).
MAX_RECORD_BYTES = 100_000


@dataclass(frozen=True)
class PredictionRecord(SideCheck):
    name: str = "prediction_record"
    file: str = "l14-04-predictions.json"

    def questions(self) -> dict[str, float]:
        return {}

    def beside(self, released: bytes, handed_in: bytes | None) -> bytes | None:
        """The learner's record (a small file), else the released empty one."""
        if handed_in is None or len(handed_in) > MAX_RECORD_BYTES:
            return released
        return handed_in

    def score(self, handed_in, released, prepared, run) -> dict:
        return {}

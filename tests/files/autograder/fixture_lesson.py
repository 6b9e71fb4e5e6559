"""The hardening fixture as a lesson: ``fixture/l14-04-model-memory.ipynb``, tiny stand-in checks, and L14.4's lab-edit side check.

Each check compares the plain values that the fixture's hidden block recorded with
hand-worked answers (written out below, not computed by the code under test). Self-contained
(it reaches nothing beside it), so that a Dask worker given this one file grades with it too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from autograder.contract.lesson import Lesson
from lessons.l14_04.lab import LabEdit

HERE = Path(__file__).resolve().parent


class Result(NamedTuple):
    passed: bool
    message: str


class Check:
    def __init__(self, expected: list[int], hint: str):
        self.expected = expected
        self.hint = hint

    def score(self, values: dict[str, Any]) -> Result:
        got = values.get("got")
        if type(got) is not list or any(type(v) is not int for v in got):
            return Result(False, f"expected a list of integers, got {got!r}")
        if got != self.expected:
            return Result(False, f"got {got}, expected {self.expected}: {self.hint}")
        return Result(True, "correct")


CHECKS = {
    # 2 x 80 x 8 x 128 x 2 = 327,680 and 2 x 28 x 4 x 128 x 1 = 28,672
    "test_kv_per_token": Check([327_680, 28_672], "count both K and V, and use KV heads"),
    # 7e9 x 16 / 8 = 14e9 bytes; 8.03e9 x 4 / 8 = 4.015e9 bytes
    "test_weights_bytes": Check([14_000_000_000, 4_015_000_000], "divide bits by 8 to get bytes"),
    # (80 - 16 - 4 - 8) GB / 3 GB = 17.3 -> 17 sequences
    "test_max_sequences": Check([17], "subtract weights, workspace and reserve before dividing"),
}

LESSON = Lesson(name="l14-04-model-memory", notebooks=(HERE / "fixture" / "l14-04-model-memory.ipynb",),
                files=(HERE.parents[2] / "labs" / "notebooks" / "level-14" / "l14-04-model-memory.py",),
                checks=CHECKS, side_checks=(LabEdit(),))

"""Every worked example (``>>>``) in the grader's modules runs, as course_lib's do (test_import_light)."""

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import autograder

#: Run as root scripts by the sandbox, never imported: they have no examples to run here.
SCRIPTS = {"_zygote", "_launch", "__main__"}

MODULES = [f"autograder.{info.name}" for info in pkgutil.iter_modules(autograder.__path__)
           if info.name not in SCRIPTS
           and ">>>" in (Path(autograder.__path__[0]) / f"{info.name}.py").read_text(encoding="utf-8")]


def test_the_grader_modules_with_examples_are_found():
    for name in ("autograder.handin", "autograder.collect", "autograder.feedback", "autograder.distributed"):
        assert name in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has '>>>' in its source but doctest found no examples"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see output above)"

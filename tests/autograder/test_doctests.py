"""Every worked example (``>>>``) in the grader's modules runs, as course_lib's do (test_import_light)."""

import doctest
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

import autograder
import lessons

#: Run as root scripts by the sandbox, never imported: they have no examples to run here.
SCRIPTS = {"_zygote", "_launch", "__main__"}

MODULES = [info.name for package in (autograder, lessons)
           for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}.")
           if not info.ispkg and info.name.rpartition(".")[2] not in SCRIPTS
           and ">>>" in Path(importlib.util.find_spec(info.name).origin).read_text(encoding="utf-8")]


def test_the_grader_modules_with_examples_are_found():
    for name in ("autograder.run.handin", "lessons.l14_04.collect", "autograder.publish.feedback", "autograder.batch.distributed",
                 "autograder.sandbox.mounts", "autograder.sandbox.isolation"):
        assert name in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has '>>>' in its source but doctest found no examples"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see output above)"

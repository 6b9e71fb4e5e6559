"""The launcher hands a learner's folders to the throwaway uid without recursion and without paths.

A cell may leave a chain of folders deeper than Python's recursion limit and longer than PATH_MAX;
the next kernel start walks it (``_launch._chown_tree``). Python 3.11's ``os.walk`` recursed once per
level and raised RecursionError there, so a hand-in's kernel could not restart.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from autograder.sandbox.scratch import remove_tree

LAUNCH = Path(__file__).resolve().parents[2] / "autograder" / "sandbox" / "_launch.py"


def _launcher():
    spec = importlib.util.spec_from_file_location("_course_grade_launch_test", LAUNCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_chain_deeper_than_recursion_and_path_max_is_handed_over(tmp_path):
    depth = sys.getrecursionlimit() + 500          # 1,500 levels: os.walk on 3.11 recursed once per level
    top = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    cur = top
    for _ in range(depth):                          # 11 bytes a level: 16,500 > PATH_MAX (4,096)
        os.mkdir("d" * 10, dir_fd=cur)
        nxt = os.open("d" * 10, os.O_RDONLY | os.O_DIRECTORY, dir_fd=cur)
        if cur != top:
            os.close(cur)
        cur = nxt
    os.close(os.open("deepest", os.O_CREAT | os.O_WRONLY, dir_fd=cur))
    os.symlink("/etc/hostname", tmp_path / "link")   # a link is given away itself, never its target
    target_uid_before = os.stat("/etc/hostname").st_uid

    try:
        _launcher()._chown_tree(str(tmp_path), 54321)

        assert os.stat("deepest", dir_fd=cur, follow_symlinks=False).st_uid == 54321
        assert os.lstat(tmp_path / "link").st_uid == 54321
        assert os.stat("/etc/hostname").st_uid == target_uid_before
        assert os.stat(tmp_path / ("d" * 10)).st_uid == 54321
    finally:
        os.close(cur)
        os.close(top)
        remove_tree(tmp_path / ("d" * 10))           # pytest's own clean-up of tmp_path would recurse on it

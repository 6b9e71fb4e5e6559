"""`course-grade` with stdout closed (`>&-`: Python starts with ``sys.stdout = None``) says what it has to
say in one line on stderr and exits with its own status, never with a traceback (issue 34, as for
``course-memory``: tests/course_lib/cli/test_cli_fuzz.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_course_grade_with_stdout_closed_is_one_line(tmp_path):
    proc = subprocess.run(["/bin/sh", "-c", f'exec "{sys.executable}" -m autograder export "{tmp_path}" >&-'],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and "holds no autograde run" in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stderr)

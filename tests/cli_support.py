"""Running ``course-memory`` in the test's own process: one helper for every CLI test module."""

from __future__ import annotations

from course_lib.cli import main


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``main(argv)``; argparse's refusals exit through SystemExit, like any usage
    error, and their code is returned too."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err

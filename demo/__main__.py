"""``python -m demo [--out DIR]``: what ``make demo`` runs (see the package docstring)."""

from __future__ import annotations

import argparse
import sys

from course_lib.cli.demo import SECTIONS, run_demo
from course_lib.errors import CourseInputError

from .grading import demo_section as grading_section


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out", help="folder for plots and results (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        return run_demo(args.out, sections=(*SECTIONS, grading_section))
    except CourseInputError as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

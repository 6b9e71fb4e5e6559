"""``python -m autograder`` is ``course-grade``."""

from .cli import run_main

run_main()

"""``python -m autograder`` is ``course-grade``."""

import sys

from .cli import main

sys.exit(main())

"""``python -m course_lib``: the same as ``course-memory``."""

import sys

from .cli import main

sys.exit(main())

"""``course-memory``: every verb of the command line, and nothing else.

    main.py      budget, estimate, presets, demo; the parser and the exit codes
    requests.py  simulate, trace, offload, rollout
    measure.py   measure (predicted vs measured on this machine)
    demo.py      the library's part of ``make demo``
    args.py      what the verbs share: the one-line-error parser, model flags, JSON output
"""

from .main import build_parser, main, run_main

__all__ = ["build_parser", "main", "run_main"]

"""``make demo``: the course's main job on embedded defaults, no arguments, no network.

This folder is the one place that imports both packages: the library's sections
(:mod:`course_lib.cli.demo`: the lab, budgets, admission control, a real
measurement) and then the grader's (:mod:`autograder.demo`: release, autograde
the example class, the gradebook). It lives at the repository root and is not
installed: run it from a checkout as ``python -m demo [--out DIR]``.
"""

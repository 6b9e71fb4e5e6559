"""What every part of the grader shares: the words they speak to each other. Imports only ``sandbox/`` (for
:class:`~autograder.sandbox.Limits`) and ``errors.py``; every other folder reads it.

================  ===================================================================
``settings.py``   how submissions run: every grading default, in one frozen dataclass
``results.py``    results as dataclasses and their JSON (records, ``grades.json``)
``lesson.py``     the small interface a lesson plugs into (checks, side checks)
``answers.py``    the kernel side of an answer: plain values out of the learner's kernel
``cells.py``      what an nbgrader cell is (grade ids, points, locks)
``jsonshape.py``  a JSON text's depth and size, read from its bytes before parsing
``text.py``       learner text the grader repeats, bounded before it goes anywhere
================  ===================================================================
"""

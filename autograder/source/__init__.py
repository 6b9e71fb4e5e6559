"""Reading the instructor's source: what decides a grade, never taken from a submission.

=================  ===================================================================
``assignment.py``  the assignment as written: notebooks, files, cells, points, lesson
``hidden.py``      the hidden part of each test cell, written from a lesson's source
``restore.py``     the instructor's cells put back into a hand-in; hand-ins read safely
``kernels.py``     the kernel each notebook names, and the one it is graded in
``imports.py``     can the kernels' Python import what the notebooks import?
``course_env.py``  ``--requirements``: the course's environment, built once and kept
=================  ===================================================================
"""

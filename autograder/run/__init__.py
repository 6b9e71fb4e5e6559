"""Running one hand-in: read it, put the instructor's cells back, execute it in a sandbox, score it.

===============  ===================================================================
``handin.py``    a hand-in read and hashed once, carried to another machine unchanged
``job.py``       the Batch (built once per batch) and the Job that carries it and one hand-in
``execute.py``   a notebook's code cells run one at a time in a sandboxed kernel (the run loop)
``kernel.py``    one grading kernel: its start (fork server or fresh Python), its client, its end
``cell_budget``  what the cells may spend: CPU per cell and notebook, the hand-in's wall clock and idle time
``scoring.py``   the test cells scored in the grader's process (trusted checks, or nbgrader's way)
``sidecheck.py`` the engine's side of a lesson's side checks
``grade.py``     one submission start to finish: :func:`grade_submission` never raises
===============  ===================================================================
"""

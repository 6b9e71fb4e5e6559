"""Publishing results: the results folder and what is made from it (below ``run/``, which writes into it).

==================  ===================================================================
``layout.py``       the results folder: its paths, records, batch metadata, gradebook URL
``course.py``       an nbgrader course directory, built with nbgrader's own machinery
``gradebook.py``    the batch merged into nbgrader's gradebook, idempotently
``feedback.py``     ``course-grade feedback``: the learner's page, hidden tests stripped
``inert.py``        the executed notebook as instructors open it: nothing of it runs
``export.py``       ``course-grade export``: grades.json, grades.csv, Gradescope JSON
``report.py``       the class at a glance, one line per student
``formgrader.py``   ``course-grade formgrader``: JupyterLab on a results folder
==================  ===================================================================
"""

"""The learner's side: the release they receive, the install it needs, the workspace it opens in.

==================  ===================================================================
``release.py``      ``course-grade release``: the student version of an assignment
``learner_env.py``  the learner's install: a wheel of ``course_lib`` alone, requirements
``workspace.py``    the release in a Python of its own, opened in JupyterLab (``make lab``)
==================  ===================================================================
"""

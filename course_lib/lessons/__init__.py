"""The learner side of each lesson: one folder a lesson, shipped in the learner's wheel.

The core of ``course_lib`` (units, models, budget, runtimes, ...) names no lesson; a lesson's visible
checks, demonstration cells and log excerpts live here, in ``course_lib/lessons/<lesson>/``
(``tests/test_layering.py`` holds that). Their grader side, the trusted checks, lives in ``lessons/``
at the top of the checkout and never ships to learners.
"""

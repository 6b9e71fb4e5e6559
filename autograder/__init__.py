"""course-grade: the engine. Release, hardened parallel autograding, feedback and exports, on nbgrader.

The folders, from the ground up (each imports only the ones above it in this table; tests/test_layering.py)::

    errors.py    the one error type for bad input
    sandbox/     the trust boundary: where learner code runs (imports nothing of the engine but errors.py)
    contract/    what every part shares: settings, results, the lesson interface, cells, answers, bounded text
    source/      reading the instructor's source: the assignment, hidden tests, restoring cells, kernels
    publish/     the results folder and what is made from it: gradebook, feedback, exports, formgrader
    learner/     the learner's side: the release, its install, the workspace
    run/         one hand-in: read, restored, executed in a sandbox, scored (run/grade.py)
    batch/       many hand-ins: autograde's named steps, Dask, the Gradescope bundle (a batch of one)
    cli.py       ``course-grade`` (``python -m autograder``): the verbs' parsers, a thin layer over each main()

An instructor's round trip (each verb is a module with a ``main(**kwargs)``; the CLI is ``cli.py``)::

    course-grade release --out release                   # learner/release.py: the student folder
    # ... hand out release/<assignment>/, collect submitted/<student>/<assignment>/
    course-grade autograde submitted --out results       # batch/autograde.py (+ run/grade.py per submission)
    nbgrader formgrader  (in results/)                   # grade the written answers by hand
    course-grade feedback results                        # publish/feedback.py: HTML without hidden tests
    course-grade export results                          # publish/export.py: grades.csv, Gradescope JSON

What it grades: any nbgrader assignment (``--source DIR``: ``DIR/<assignment>/`` with its
notebooks and files), scored as stock ``nbgrader autograde`` scores it, or a lesson
(``lessons/<lesson>/`` beside this package, found through the ``course_grade.lessons`` entry
points, or ``--lesson``) that adds trusted checks and side checks (contract/lesson.py, run/sidecheck.py).
The engine names no lesson.

What stock nbgrader gets wrong and where it is fixed:

- one notebook at a time -> worker processes, kernels on ipc sockets (batch/autograde.py, run/execute.py),
  each forked from a server that imported ipykernel, numpy, matplotlib and what the lesson's
  notebooks import once per batch, into a sandbox of its own (sandbox/forkserver.py, sandbox/_zygote.py);
- learner code in the grader's trust -> a sandbox per submission: bubblewrap namespaces, a
  memory + pids cgroup, a throwaway uid, rlimits (the trust boundary: sandbox/), and no grading
  at all below that minimum unless asked (``--insecure``);
- scores decided in the learner's kernel -> plain answers recorded by the test cells
  (contract/answers.py, source/hidden.py) and scored in the grader's process by the lesson's checks (run/scoring.py);
- edited or deleted test cells -> restored from the instructor source by grade_id (source/restore.py);
- a failed run that looks like 0 or keeps an old score -> a status per submission, records that
  are rewritten whole, a gradebook merge that sets every grade (contract/results.py, publish/gradebook.py);
- hidden tests in the feedback -> stripped before rendering (publish/feedback.py).
"""

import sys

# jsonschema (which nbformat imports) imports rfc3987_syntax when it is installed, and that builds
# a Lark grammar as it is imported: 0.6 s of CPU in every process that reads a notebook, the
# grader's and a stock nbgrader kernel's whose hidden tests import the grader. Its one use is
# jsonschema's "iri" format check, which nbformat never asks for (it validates without a
# format checker), so it is kept out of this package's processes.
sys.modules.setdefault("rfc3987_syntax", None)


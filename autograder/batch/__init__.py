"""A batch: many hand-ins, one plan, graded in worker processes or on a Dask cluster.

==================  ===================================================================
``autograde.py``    ``course-grade autograde``: the batch as a short list of named steps, and the options
                    it shares with ``gradescope`` made into one Settings (``grading_settings``)
``distributed.py``  the same batch on a Dask cluster (``--scheduler``)
``dask_tls.py``     TLS for a Dask batch: which credential each party holds
``environment.py``  what every grading machine must share: the grader's code, by digest
``student_ids.py``  which folder names can be student ids
``gradescope.py``   ``course-grade gradescope``: a bundle that grades one hand-in on Gradescope's machines
==================  ===================================================================
"""

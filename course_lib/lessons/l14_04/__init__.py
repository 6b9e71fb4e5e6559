"""L14.4, Model Loading and Memory: the learner side of the lesson.

- :mod:`.practice` — the notebook's visible checks (what *Validate* runs): each returns a verdict and
  shows its message only, never a worked answer.
- :mod:`.demos` — the demonstration cells (predict-then-measure, cached-vs-fragmented, the simulation,
  loading and offload, the log's knobs).
- :mod:`.logs` — the three real start-up log excerpts the runtime lab reads.
- :mod:`.labfile` — the lab toolkit: find the lab file, edit its one knob, run it, read what it printed.
"""

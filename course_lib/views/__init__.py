"""What a learner sees: tables (``report``), figures (``plots``) and the notebook explorers (``explorer``,
``vllm_explorer``). Imports the floors below (model, serving, simulate, runtimes); nothing imports it but
the lessons and the CLI.
"""

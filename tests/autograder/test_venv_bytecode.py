"""The grader's Python carries its bytecode: what every kernel fork server imports is compiled where it is installed.

Kernels and fork servers never write bytecode (``PYTHONDONTWRITEBYTECODE=1`` in their environment,
autograder/sandbox/kernel_env.py), and the shells of the course machines set it too, so a venv installed without
``.pyc`` files (``uv pip install`` writes none unless given ``--compile-bytecode``; pip compiles) is compiled
from source again by every process that imports it: the fork server's preloads cost 1.7 s of CPU per batch
instead of 0.6, ``import nbgrader.apps`` 3.6-4.0 s instead of 2.0, and tests/autograder/test_autograde.py took
50 s of CPU instead of 26 on a fresh ``make venv`` (benchmarks/results/suite-time.md, suite-b's section).
``make venv`` passes ``--compile-bytecode``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from autograder.sandbox.forkserver import PRELOAD


def _bytecode(source: Path) -> Path:
    """Where the import system keeps ``source``'s bytecode (PEP 3147), whatever PYTHONPYCACHEPREFIX says."""
    return source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc"


def test_every_module_a_fork_server_preloads_is_compiled_where_it_is_installed():
    checked, missing = [], []
    for name in PRELOAD:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        checked.append(name)
        if not _bytecode(Path(spec.origin)).is_file():
            missing.append(spec.origin)
    assert checked, "the fork server preloads Python modules"
    assert missing == [], (f"{len(missing)} of the fork server's {len(checked)} preloads have no bytecode (e.g. "
                           f"{missing[:2]}): install them with `uv pip install --compile-bytecode` (make venv) or pip")

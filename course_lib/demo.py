"""``make demo``: the main job on embedded defaults, no arguments, no network.

Each section prints a banner and its result; later sections add admission
simulation, measurement and autograding as those parts land.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAB = REPO / "labs" / "notebooks" / "level-14" / "l14-04-model-memory.py"


def banner(title: str) -> None:
    print()
    print("=" * 78)
    print(title)
    print("=" * 78, flush=True)


def lab_source(active_sequences: int) -> str:
    """The lab's source with its one knob set, exactly as a learner's edit would."""
    text = LAB.read_text(encoding="utf-8")
    old = "active_sequences = 8 "
    if old not in text:
        raise RuntimeError(f"{LAB} no longer has the line 'active_sequences = 8'")
    return text.replace(old, f"active_sequences = {active_sequences} ", 1)


def run_lab(active_sequences: int) -> str:
    """Run the lab as a subprocess with ``active_sequences`` and return what it printed."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        lab = Path(tmp) / LAB.relative_to(REPO)
        lab.parent.mkdir(parents=True)
        lab.write_text(lab_source(active_sequences), encoding="utf-8")
        env = dict(os.environ, PYTHONPATH=str(REPO))
        proc = subprocess.run([sys.executable, str(lab)], cwd=REPO, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"the lab failed at active_sequences={active_sequences}:\n{proc.stderr}")
    return proc.stdout


def section_lab() -> None:
    for n in (8, 16):
        banner(f"The L14.4 lab at active_sequences = {n}  (python3 {LAB.relative_to(REPO)})")
        print(run_lab(n), end="")


def section_budget() -> None:
    from .budget import estimate, plan_budget
    from .presets import DEFAULT_GPU, DEFAULT_MODEL, get_model
    from .report import budget_table, estimate_table
    from .units import GB

    banner("The lesson's 24 GB example: 14 GB weights, 2 GB workspace, 2 GB reserve, 1.5 GB per request")
    lesson = plan_budget(device_bytes=24 * GB, weights_bytes=14 * GB, workspace_bytes=2 * GB,
                         reserve_bytes=2 * GB, per_sequence_kv_bytes=1_500_000_000, active_sequences=5)
    print(budget_table(lesson))

    banner(f"A real model on a real card: {DEFAULT_MODEL} (fp16) on an {DEFAULT_GPU}, 4096-token sequences")
    est = estimate(get_model(DEFAULT_MODEL), gpu=DEFAULT_GPU, context_tokens=4096, active_sequences=4)
    print(estimate_table(est))


def section_admission(out_dir: Path) -> None:
    from .cli_requests import demo_section
    demo_section(out_dir)


def section_measure(out_dir: Path) -> None:
    from .measure.cli import demo_section
    demo_section(out_dir)


def section_autograde(out_dir: Path) -> None:
    from autograder.demo import demo_section
    demo_section(out_dir)


SECTIONS = [
    lambda out: section_lab(),
    lambda out: section_budget(),
    section_admission,
    section_measure,
    section_autograde,
]


def run_demo(out_dir: str | Path = "out") -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for section in SECTIONS:
        section(out)
    print()
    print(f"demo done; files (plots, results) are under {Path(out_dir).resolve()}")
    return 0

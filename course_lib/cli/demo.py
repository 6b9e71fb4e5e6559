"""The library's part of ``make demo`` (and all of ``course-memory demo``): embedded defaults, no network.

Sections, each under a banner: the lab at 8 and 16 sequences, the lesson's budget
and a real model on a real card, admission control on the lesson's device, and a
real measurement on this machine. ``make demo`` runs these, then the grader's
sections (``demo/`` at the repository root composes both packages).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Callable

from ..serving.budget import estimate, plan_budget
from ..lessons.l14_04.labfile import REPO, REPO_LAB, edit_knob, run_lab_source
from ..output import check_output_dir
from ..views.plots import plot_simulation
from ..model.presets import DEFAULT_GPU, DEFAULT_MODEL, get_model
from ..views.report import banner, budget_table, comparison_table, estimate_table, simulation_report
from ..serving.scenario import (LAB_ACTIVE_SEQUENCES, LAB_EDITED_SEQUENCES, LESSON_KV_SOURCE, comparison_trace,
                        lesson_budget, lesson_config, lesson_trace)
from ..simulate import simulate
from ..units import GB


def section_lab(out: Path) -> None:
    source = REPO_LAB.read_text(encoding="utf-8")
    for n in (LAB_ACTIVE_SEQUENCES, LAB_EDITED_SEQUENCES):
        banner(f"The L14.4 lab at active_sequences = {n}  (python3 {REPO_LAB.relative_to(REPO)})")
        print(run_lab_source(edit_knob(source, n))["stdout"], end="")


def section_budget(out: Path) -> None:
    banner("The lesson's 24 GB example: 14 GB weights, 2 GB workspace, 2 GB reserve, 1.5 GB per request")
    lesson = plan_budget(device_bytes=24 * GB, weights_bytes=14 * GB, workspace_bytes=2 * GB,
                         reserve_bytes=2 * GB, per_sequence_kv_bytes=1_500_000_000, active_sequences=5)
    print(budget_table(lesson))

    banner(f"A real model on a real card: {DEFAULT_MODEL} (fp16) on an {DEFAULT_GPU}, 4096-token sequences")
    est = estimate(get_model(DEFAULT_MODEL), gpu=DEFAULT_GPU, context_tokens=4096, active_sequences=4)
    print(estimate_table(est))


def section_admission(out: Path) -> None:
    """Ten fit and the eleventh waits; reserve-max vs paged; plots under ``out``."""
    budget = lesson_budget()
    banner("Admission control: 11 requests of 608 + 512 tokens on the lesson's 6 GB KV budget")
    runs = [(p, simulate(lesson_trace(11), lesson_config(p))) for p in ("reserve-max", "paged")]
    print(simulation_report(runs[0][1], budget, LESSON_KV_SOURCE, max_listed=1))
    print()
    print("paged on the same requests (claims blocks as tokens arrive, preempts the youngest when out of blocks):")
    print(comparison_table(runs))
    path = plot_simulation([("reserve-max: reserve prompt + max_new_tokens", runs[0][1]),
                            ("paged: 16-token blocks on demand", runs[1][1])], out / "admission.png",
                           title="Ten requests fit the safe KV budget; the eleventh is queued, not crashed")
    print(f"plot: {path}")

    banner("Reserve-max vs paged when real outputs (~128 tokens) are far below max_new_tokens (1,024)")
    runs = [(p, simulate(comparison_trace(), lesson_config(p))) for p in ("reserve-max", "paged")]
    print(comparison_table(runs))
    rm = runs[0][1].summary
    print(f"reserve-max kept {rm.reserved_unused:.0%} of its allocated KV reserved for tokens not generated yet or "
          f"never; only {rm.kv_utilization:.0%} held tokens (the PagedAttention paper measured 20.4-38.2% for "
          f"earlier systems)")
    path = plot_simulation([("reserve-max", runs[0][1]), ("paged", runs[1][1])], out / "admission_compare.png",
                           title="400 chat-like requests: outputs ~128 tokens, max_new_tokens 1,024")
    print(f"plot: {path}")


def section_measure(out: Path) -> None:
    """A quick real measurement of course-tiny on the CPU (about 10-20 s on 2 cores)."""
    banner("Predicted vs measured on this machine: course-tiny (fp32) on the CPU, 2 sequences x 512 tokens")
    if importlib.util.find_spec("torch") is None:
        print("skipped: torch is not installed (the measurement needs it)")
        return
    from ..measure import measure_bandwidth, measure_pools  # torch, in a fresh process
    from ..measure.device import snapshot_from_dict
    from ..measure.plot import plot_pools  # matplotlib

    result = measure_pools("course-tiny", sequences=2, context_tokens=512, device="cpu", progress=True)
    print(result.table())
    print()
    print("the measuring process at its end:")
    print(snapshot_from_dict(result.snapshot).describe())
    print(measure_bandwidth("cpu").describe())
    path = plot_pools(result, out / "measure_pools.png")
    print(f"plot: {path}")
    print("(small pools: a few MB of allocator and library overhead weigh more here than at the "
          "200 MB+ scale of `course-memory measure --model course-tiny`)")


SECTIONS: tuple[Callable[[Path], None], ...] = (section_lab, section_budget, section_admission, section_measure)


def run_demo(out_dir: str | Path = "out", sections: tuple[Callable[[Path], None], ...] | None = None) -> int:
    """Run ``sections`` (default :data:`SECTIONS`) in order, writing plots and results under ``out_dir``.

    ``out_dir`` is checked first (a folder, or one that can be created, that can be written).
    """
    out = check_output_dir("out", out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for section in SECTIONS if sections is None else sections:
        section(out)
    print()
    print(f"demo done; files (plots, results) are under {out.resolve()}")
    return 0

"""How many honest slips Validate catches: one slip at a time in the reference answers, every cell run.

For each slip, the instructor notebook is turned into what a learner who made that one slip would
validate (hidden tests and solution markers removed, the reference answers kept, one answer cell
edited), then every code cell runs in order in one IPython shell with NBGRADER_EXECUTION=validate,
each cell's error recorded and the next cell run anyway, as nbgrader's Validate does. A slip is
*caught* when at least one test cell fails; the first failing test cell's message is printed.

    .venv/bin/python benchmarks/bench_validate_catches.py            # this checkout
    PYTHONPATH=/tmp/before .venv/bin/python benchmarks/bench_validate_catches.py --repo /tmp/before

``--repo`` runs another checkout's notebook and code (``git archive <commit> | tar -x -C /tmp/before``),
so the same slips can be counted before and after a change. The slips: the example class's (from
that checkout's ``lessons/l14_04/examples.py``), and the edge cases of issue 33 (a boundary, a rounding,
a partial block, a launch cut to 4k, a launch inside the estimate's margin, the A100 figure with the
graph capture subtracted).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from pathlib import Path

HIDDEN = re.compile(r"\n*[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", re.DOTALL)
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)

#: name -> (answer cell grade_id, [(old, new)]): issue 33's edge-case slips, on the reference answers.
EDGE_SLIPS = {
    "boundary: admit only below the budget (< for <=)": (
        "answer_admission_rule", [("if in_use_bytes + request_bytes <= safe_budget_bytes:",
                              "if in_use_bytes + request_bytes < safe_budget_bytes:")]),
    "rounding: requests_that_fit rounds to nearest": (
        "answer_request_budget", [("return int(budget_gb // per_request_gb)", "return round(budget_gb / per_request_gb)")]),
    "rounding: safe_requests rounds up": (
        "answer_safe_requests", [("return max(0, usable // per_request_bytes)",
                                  "return max(0, -(-usable // per_request_bytes))")]),
    "partial block: gpu_blocks rounds up": (
        "answer_log_blocks", [("return kv_cache_bytes // (kv_bytes_per_token * block_size)",
                               "return -(-kv_cache_bytes // (kv_bytes_per_token * block_size))")]),
    "plannable: allocated counted as releasable": (
        "answer_plannable", [("releasable = reserved_bytes - allocated_bytes - inactive_split_bytes",
                              "releasable = reserved_bytes - inactive_split_bytes")]),
    "decision: max_model_len cut to 4,096": (
        "answer_decision", [('"max_model_len": 8192', '"max_model_len": 4096')]),
    "decision: fp8 KV + 16 slots only (12.56x, inside the 10% margin)": (
        "answer_decision", [('"weights": "fp8"', '"weights": "checkpoint"')]),
    "single value: A100 figure with the 0.50 GiB graph capture subtracted": (
        "answer_log_kv", [("a100_activation_and_non_torch_gib = 79.25 * 0.25 - 14.2488 - 5.01",
                           "a100_activation_and_non_torch_gib = 79.25 * 0.25 - 14.2488 - 5.01 - 0.50")]),
}


def learner_cells(nb, edits: dict[str, list]) -> list[tuple[str | None, bool, str]]:
    """(grade_id, is a test cell, source) of each code cell as a learner with ``edits`` would validate it;
    None when an edit no longer applies."""
    out, ids = [], {(c.metadata.get("nbgrader") or {}).get("grade_id") for c in nb.cells}
    assert set(edits) <= ids, f"no answer cells {set(edits) - ids}"
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader") or {}
        gid = meta.get("grade_id")
        source = MARKER.sub("", HIDDEN.sub("\n", cell.source))
        for old, new in edits.get(gid, []):
            if old not in source:
                return None
            source = source.replace(old, new, 1)
        out.append((gid, bool(meta.get("grade")), source))
    return out


def run(cells) -> list[tuple[str, str]]:
    """Every cell in one fresh shell namespace; (grade_id, message) of each failing test cell."""
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.reset(new_session=False)
    failed = []
    for gid, is_test, source in cells:
        result = shell.run_cell(source, silent=True)
        error = result.error_in_exec or result.error_before_exec
        if error is not None and is_test:
            failed.append((gid, f"{type(error).__name__}: {error}"[:160]))
    return failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    args = parser.parse_args()
    repo = Path(args.repo).resolve()
    sys.path.insert(0, str(repo))
    os.environ.update(NBGRADER_EXECUTION="validate", MPLBACKEND="agg")
    os.chdir(repo / "notebooks" / "level-14")
    import nbformat
    import course_lib
    assert Path(course_lib.__file__).resolve().is_relative_to(repo), course_lib.__file__
    examples = importlib.import_module("lessons.l14_04.examples")
    nb = nbformat.read(repo / "notebooks" / "level-14" / "l14-04-model-memory.ipynb", as_version=4)
    slips = {f"example class: {e.student_id}": e.answers for e in examples.EXAMPLES
             if e.answers and not e.blank}
    slips.update({name: {gid: edits} for name, (gid, edits) in EDGE_SLIPS.items()})
    reference = run(learner_cells(nb, {}))
    print(f"reference: {len(reference)} failing test cells {reference}")
    caught, rows = 0, []
    for name, edits in slips.items():
        cells = learner_cells(nb, edits)
        if cells is None:
            rows.append((name, "n/a (the edit does not apply to this checkout)", ""))
            continue
        failed = run(cells)
        caught += bool(failed)
        rows.append((name, "caught" if failed else "passes Validate", failed[0][1] if failed else ""))
    applied = sum(1 for r in rows if not r[1].startswith("n/a"))
    for name, verdict, message in rows:
        print(f"| {name} | {verdict} | {message} |")
    print(json.dumps({"caught": caught, "slips": applied}))


if __name__ == "__main__":
    main()

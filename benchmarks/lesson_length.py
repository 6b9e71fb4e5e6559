"""How long the L14.4 notebooks take a learner, estimated from counts (issue 41, item 1).

For each notebook: the words a learner reads (markdown, as released: solutions and hidden tests left
out), the words of the visible code cells, and the words the cells print when the instructor's notebook
runs top to bottom here (stdout, stderr and text results; figures counted, not read); then an estimate
of the sitting:

    reading  = (markdown words + printed words) / 200 wpm + visible code words / 100 wpm
    working  = the minutes each graded item asks (WORK_MINUTES, per grade_id, stated below)
    running  = the seconds the cells took to run here

It is an estimate from counts, not a timed learner: nobody was timed.

The notebooks run as a learner meets them: in a folder of their own with the lab file beside them (the
release layout), the lab edited to 16 sequences before the cell that reruns it (the learner's step 3),
and the grader's "[answer recorded ...]" outputs left out (the release has no hidden tests to print them).

``--against BEFORE.json`` (this script's JSON of an earlier checkout) also gives the estimate by the
timed learner's method (issue 41: every word at 200 words/min, 2-4 min per prediction, 3-8 per code task,
1.5-3 per slip fix, plus run time): its minutes for the earlier notebooks (``LEARNER_MINUTES``) less the
words cut at 200 words/min, the tasks and slips as they were (none was removed).

    .venv/bin/python benchmarks/lesson_length.py                      # both notebooks of this checkout
    .venv/bin/python benchmarks/lesson_length.py --json out.json     # also the figures as JSON, per cell
    .venv/bin/python benchmarks/lesson_length.py --root OLD --json before.json
    .venv/bin/python benchmarks/lesson_length.py --against before.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = {"lesson": REPO / "notebooks" / "level-14" / "l14-04-model-memory.ipynb",
             "runtime": REPO / "notebooks" / "level-14" / "l14-04-runtime-lab.ipynb"}
READ_WPM, CODE_WPM = 200, 100
#: Minutes a learner who knows transformers (but not vLLM) spends on each graded item, beyond reading it:
#: a function to write 4-6, a worked figure 2-4, a letter or a choice 1, a written answer 8, the lab edit 3.
WORK_MINUTES = {
    "test_predict": 2, "test_request_budget": 4, "test_weight_bytes": 4, "test_kv_cache": 8, "test_predict_measure": 8,
    "test_measured_gap": 2, "test_plannable": 5, "test_admission_rule": 4, "test_quick_check": 2,
    "test_explain_budget": 8, "explain_written": 6, "lab_edit": 3,
    "test_gqa_dtype": 3, "test_safe_requests": 4, "test_log_kv": 5, "test_log_blocks": 6, "test_policy_predict": 4,
    "test_log_predict": 5, "test_decision": 10, "test_offload_step": 2, "test_replica_ready": 3, "test_unready": 1,
    "real_vllm_prediction": 3,
}
#: The timed learner's estimates, by its method, of the notebooks as at main a155a17 (issue 41; its walk-through was at
#: 779294c; benchmarks/results/lesson-length.md): minutes, as (low, high) where its slips' minutes gave a range.
LEARNER_MINUTES = {"lesson": (93.7, 93.7), "runtime": (73.0, 75.6)}
LAB_NAME = "l14-04-model-memory.py"
LAB_RERUN = "lab_run_16 = run_lab(lab_path)"
ANSWER_MIME = "application/vnd.course-answer+json"
SOLUTION = re.compile(r"### BEGIN SOLUTION.*?### END SOLUTION", re.S)
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)


def words(text: str) -> int:
    return len(re.findall(r"\S+", text))


def _released(cell) -> str:
    return HIDDEN.sub("", SOLUTION.sub("", cell.source))


def _cell_words(cell) -> int:
    """Words a learner reads in the cell itself: markdown (not an answer cell) or visible code."""
    if cell.cell_type == "markdown":
        return 0 if cell.metadata.get("nbgrader", {}).get("solution") else words(cell.source)
    return words(_released(cell)) if cell.cell_type == "code" else 0


def count(nb: nbformat.NotebookNode) -> dict:
    """Words of markdown and visible code, as released; graded items and their working minutes."""
    markdown = code = 0
    items = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown" and not meta.get("solution"):
            markdown += words(cell.source)
        elif cell.cell_type == "code":
            code += words(_released(cell))
        if meta.get("grade"):
            items.append(meta["grade_id"])
    if any("show_real_vllm(" in c.source for c in nb.cells if c.cell_type == "code"):
        items.append("real_vllm_prediction")
    if any("run_lab(lab_path)" in c.source for c in nb.cells if c.cell_type == "code"):
        items.append("lab_edit")
    return {"markdown_words": markdown, "code_words": code, "graded_items": items,
            "work_minutes": sum(WORK_MINUTES.get(i, 3) for i in items)}


def run(path: Path, timeout: int = 900, lab: Path | None = None) -> dict:
    """Run the instructor's notebook (solutions in place) as a learner would: in a folder of its own with the
    lab file ``lab`` beside it, edited to 16 sequences before the cell that reruns it. Count what it printed."""
    import nbclient

    nb = nbformat.read(path, as_version=4)
    env_before = os.environ.pop("NBGRADER_EXECUTION", None)
    folder = Path(tempfile.mkdtemp(prefix="lesson-length-"))
    if lab is not None and lab.is_file():
        shutil.copy(lab, folder / LAB_NAME)
    start = time.perf_counter()
    try:
        client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                         resources={"metadata": {"path": str(folder)}})
        with client.setup_kernel():
            for i, cell in enumerate(nb.cells):
                if cell.cell_type == "code" and LAB_RERUN in cell.source and (folder / LAB_NAME).is_file():
                    text = (folder / LAB_NAME).read_text()      # the learner's step 3
                    (folder / LAB_NAME).write_text(text.replace("active_sequences = 8 ", "active_sequences = 16 ", 1))
                client.execute_cell(cell, i)
    finally:
        if env_before is not None:
            os.environ["NBGRADER_EXECUTION"] = env_before
        shutil.rmtree(folder, ignore_errors=True)
    seconds = time.perf_counter() - start
    printed = lines = figures = errors = 0
    by_cell, cells = {}, []
    for i, cell in enumerate(nb.cells):
        before, text = printed, ""
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                text += out.text
            elif out.output_type in ("execute_result", "display_data"):
                data = out.get("data", {})
                if "image/png" in data:
                    figures += 1
                elif ANSWER_MIME in data:
                    continue          # the grader's record, printed only where the hidden tests run
                elif "text/plain" in data and "application/vnd.jupyter.widget-view+json" not in data:
                    text += data["text/plain"] + "\n"
            elif out.output_type == "error":
                errors += 1
        printed += words(text)
        lines += sum(1 for line in text.splitlines() if line.strip())
        if printed > before:
            by_cell[cell.get("id") or f"cell-{i}"] = printed - before
        cells.append({"id": cell.get("id") or f"cell-{i}", "type": cell.cell_type,
                      "words": _cell_words(cell), "printed_words": printed - before})
    largest = dict(sorted(by_cell.items(), key=lambda kv: -kv[1])[:6])
    return {"printed_words": printed, "printed_lines": lines, "figures": figures, "errors": errors,
            "run_seconds": round(seconds, 1), "largest_outputs": largest, "cells": cells}


def learner_estimate(key: str, now: dict, before: dict) -> dict:
    """The timed learner's minutes for the earlier notebook, less the words cut at 200 words/min."""
    def total(figures):
        return figures["markdown_words"] + figures["code_words"] + figures["printed_words"]

    cut = total(before) - total(now)
    low, high = LEARNER_MINUTES[key]
    return {"words_before": total(before), "words_now": total(now), "words_cut": cut,
            "learner_minutes": [round(low - cut / READ_WPM, 1), round(high - cut / READ_WPM, 1)]}


def estimate(counts: dict, ran: dict) -> dict:
    reading = (counts["markdown_words"] + ran["printed_words"]) / READ_WPM + counts["code_words"] / CODE_WPM
    total = reading + counts["work_minutes"] + ran["run_seconds"] / 60
    return {"reading_minutes": round(reading, 1), "work_minutes": counts["work_minutes"],
            "run_minutes": round(ran["run_seconds"] / 60, 1), "total_minutes": round(total)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--root", default=str(REPO), help="a checkout whose notebooks to count (default: this one)")
    parser.add_argument("--against", help="this script's JSON of an earlier checkout: the learner's method too")
    args = parser.parse_args(argv)
    root = Path(args.root)
    before = json.loads(Path(args.against).read_text()) if args.against else None
    out = {}
    for key, path in NOTEBOOKS.items():
        path = root / path.relative_to(REPO)
        nb = nbformat.read(path, as_version=4)
        counts = count(nb)
        ran = run(path, lab=root / "labs" / "notebooks" / "level-14" / LAB_NAME)
        out[key] = {**counts, **ran, **estimate(counts, ran)}
        print(f"{key:8} markdown {counts['markdown_words']:5,} words, code {counts['code_words']:5,}, printed "
              f"{ran['printed_words']:5,} ({ran['figures']} figures, {ran['errors']} errors), "
              f"{len(counts['graded_items'])} graded items: reading {out[key]['reading_minutes']} min + working "
              f"{out[key]['work_minutes']} min + running {out[key]['run_minutes']} min = "
              f"about {out[key]['total_minutes']} min; {ran['printed_lines']} lines printed", flush=True)
        if before is not None:
            out[key]["learner"] = learn = learner_estimate(key, out[key], before[key])
            low, high = learn["learner_minutes"]
            print(f"{'':8} by the timed learner's method: {learn['words_before']:,} -> {learn['words_now']:,} words "
                  f"({learn['words_cut']:,} cut): about {low}" + (f"-{high}" if high != low else "") + " min",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    sys.exit(0 if main() else 1)

"""The example class in ``examples/submissions/``: a reference, a blank, and one learner per misconception.

Every notebook starts from the released student notebook (so, like a real hand-in,
it has no hidden tests); answer cells are filled with the instructor's solutions,
then one misconception is applied as exact text replacements in the answers or
the lab. A replacement that no longer applies (the notebook changed) stops the
generator instead of writing a wrong example.

    python -m lessons.l14_04.examples            # rewrite examples/submissions/
    python -m lessons.l14_04.examples --check    # fail if the committed class is stale

What each learner must lose (grade_id -> a phrase of its message) is stated beside the tests
that hold the grader to it, in ``tests/files/example_class.json``, not here.
"""

from __future__ import annotations

import argparse
import copy
import filecmp
import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_lib.lessons.l14_04.labfile import edit_knob
from course_lib.serving.scenario import LAB_EDITED_SEQUENCES

from autograder.source.assignment import Assignment, lesson_assignment, load_source

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "examples" / "submissions"
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n", re.M)


@dataclass(frozen=True)
class Example:
    """One learner of the example class."""

    student_id: str
    description: str
    answers: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """grade_id of an answer cell -> (old, new) replacements in the instructor's solution."""
    lab: str = "edited"
    """"edited" (the reference edit), "released" (untouched), or replacements via lab_edits."""
    lab_edits: tuple[tuple[str, str], ...] = ()
    blank: bool = False
    """The released notebook untouched."""


EXAMPLES = (
    Example("reference", "the instructor's solutions, lab edited to 16: full autograded marks"),
    Example("blank", "the release handed back untouched: 0", blank=True, lab="released"),
    Example("forgot_k_and_v", "KV bytes per token without the factor 2 for keys and values (later tasks carry it)",
            answers={"answer_kv_cache": [('return 2 * config["num_hidden_layers"]',
                                         'return config["num_hidden_layers"]')]}),
    Example("attention_heads", "attention heads used where the cache holds KV heads (GQA ignored)",
            answers={"answer_kv_cache": [('kv_heads = config.get("num_key_value_heads", heads)',
                                         "kv_heads = heads")]}),
    Example("gb_gib_mixup", "GB (10^9) and GiB (2^30) swapped",
            answers={"answer_weight_bytes": [('weight_bytes(8_030_261_248, "fp16") / GB',
                                              'weight_bytes(8_030_261_248, "fp16") / GiB_'),
                                             ('weight_bytes(8_030_261_248, "fp16") / GiB\n',
                                              'weight_bytes(8_030_261_248, "fp16") / GB\n'),
                                             ("/ GiB_", "/ GiB")]}),
    Example("bits_for_bytes", "bits per value used as bytes per value",
            answers={"answer_weight_bytes": [("return num_params * bits // 8", "return num_params * bits")]}),
    Example("weights_only_budget", "the request budget subtracts only the weights",
            answers={"answer_request_budget": [("return device_gb - weights_gb - workspace_gb - reserve_gb",
                                                "return device_gb - weights_gb")]}),
    Example("tied_head", "the small model's output head counted as tied to the embedding",
            answers={"answer_predict_measure": [("_params = _layers * _per_layer + 2 * _vocab * _h + _h",
                                                 "_params = _layers * _per_layer + _vocab * _h + _h")]}),
    Example("formula_blamed", "the measured gap blamed on the parameter-count formula",
            answers={"answer_measured_gap": [('gap_reason = "b"', 'gap_reason = "a"')]}),
    Example("free_is_capacity", "free memory treated as capacity: neither the workspace nor the reserve kept",
            answers={"answer_safe_requests": [("usable = free_bytes - workspace_bytes - reserve_bytes",
                                               "usable = free_bytes")]}),
    Example("split_is_capacity", "torch's split blocks inside live segments planned with as if free",
            answers={"answer_plannable": [("releasable = reserved_bytes - allocated_bytes - inactive_split_bytes",
                                           "releasable = reserved_bytes - allocated_bytes")]}),
    Example("gib_for_gb_loading", "the 14 GB of weights read as 14 GiB in the readiness timeline (R8c carries it)",
            answers={"answer_replica_ready": [("replica_ready_seconds = 14 / 2 + 14 / 25 + 4 + 20 + 8",
                                               "replica_ready_seconds = 14 * GiB / GB / 2 + 14 * GiB / GB / 25 "
                                               "+ 4 + 20 + 8")]}),
    Example("ready_at_start", "a replica counted as ready when its process starts",
            answers={"answer_unready": [("replica_unready_seconds = replica_ready_seconds - 5",
                                         "replica_unready_seconds = 0")]}),
    Example("kv_cache_fixed", "the KV cache predicted fixed, like the weights (the Predict's framing question)",
            answers={"answer_predict": [('"kv_cache": "grows"', '"kv_cache": "fixed"')]}),
    Example("whole_device_log", "the log's KV cache worked from the whole device, not its utilization share",
            answers={"answer_log_kv": [("return total_gib * utilization - weights_gib",
                                        "return total_gib - weights_gib")]}),
    Example("tp_ignored", "tensor parallelism ignored: one GPU holds every KV head",
            answers={"answer_log_blocks": [("mi300x_kv_bytes_per_token_per_gpu = 2 * 32 * (8 // 8) * 128 * 2",
                                            "mi300x_kv_bytes_per_token_per_gpu = 2 * 32 * 8 * 128 * 2")]}),
    Example("defaults_decision", "vLLM's defaults kept for the 12-user decision (5 requests of 8k run at once)",
            answers={"answer_decision": [('"weights": "fp8"', '"weights": "checkpoint"'),
                                         ('"kv_cache_dtype": "fp8"', '"kv_cache_dtype": "auto"'),
                                         ('"max_num_seqs": 16', '"max_num_seqs": 256')]}),
    Example("fp8_same_pool", "an fp8 KV cache on the A100 0.10.1 launch predicted to keep the pool's GiB (V0 fallback missed)",
            answers={"answer_log_predict": [('"kv_cache_dtype=fp8": "less"', '"kv_cache_dtype=fp8": "same"')]}),
    Example("lab_doubled_context_too", "lab: doubled active_sequences AND context_tokens",
            lab="edited", lab_edits=(("context_tokens = 1024 ", "context_tokens = 2048 "),)),
    Example("lab_not_edited", "lab handed back unedited (still 8 sequences)", lab="released"),
)


def _apply(text: str, edits, where: str) -> str:
    for old, new in edits:
        if old not in text:
            raise RuntimeError(f"{where}: {old!r} not found; the notebook or lab changed, update "
                               f"lessons/l14_04/examples.py")
        text = text.replace(old, new, 1)
    return text


def this_assignment() -> Assignment:
    """This lesson's assignment, its instructor files where the course keeps them."""
    return lesson_assignment("lessons.l14_04")


def build_example(example: Example, released_nbs: dict[str, nbformat.NotebookNode], released_lab: str,
                  assignment: Assignment) -> tuple[dict[str, nbformat.NotebookNode], str]:
    """One learner's hand-in: each notebook (by file name) and the lab's text."""
    source = load_source(assignment)
    nbs = {}
    for name, released_nb in released_nbs.items():
        spec = source.notebook(name)
        nb = copy.deepcopy(released_nb)
        if not example.blank:
            for cell in nb.cells:
                gid = (cell.metadata.get("nbgrader") or {}).get("grade_id")
                meta = cell.metadata.get("nbgrader") or {}
                if gid and meta.get("solution"):
                    solution = MARKER.sub("", spec.cell(gid).source)
                    cell.source = _apply(solution, example.answers.get(gid, []), f"{example.student_id}/{gid}")
        nbs[name] = nb
    answered = {(c.metadata.get("nbgrader") or {}).get("grade_id") for nb in nbs.values() for c in nb.cells}
    unused = set(example.answers) - answered
    if unused:
        raise RuntimeError(f"{example.student_id}: no answer cells {sorted(unused)}")
    lab = released_lab if example.lab == "released" else edit_knob(released_lab, LAB_EDITED_SEQUENCES)
    lab = _apply(lab, example.lab_edits, f"{example.student_id}/lab")
    return nbs, lab


def main(out: str | Path = OUT, assignment: Assignment | None = None,
         release_folder: str | Path | None = None) -> list[str]:
    """Write ``out/<student>/<assignment>/`` for every example; returns the student ids.

    ``release_folder``: an existing ``course-grade release`` output to start from (else one is built).
    """
    from autograder.learner.release import main as release

    assignment = assignment or this_assignment()
    lab_name = assignment.file_names[0]
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="course-examples-") as tmp:
        folder = Path(release_folder) if release_folder else Path(release(out=tmp, assignment=assignment).folder)
        released_nbs = {name: nbformat.read(folder / name, as_version=4) for name in assignment.notebook_names}
        released_lab = (folder / lab_name).read_text(encoding="utf-8")
        staging = Path(tmp) / "class"
        for example in EXAMPLES:
            dest = staging / example.student_id / assignment.name
            dest.mkdir(parents=True)
            if example.blank and example.lab == "released":
                for name in (*assignment.notebook_names, lab_name):
                    shutil.copyfile(folder / name, dest / name)
                continue
            nbs, lab = build_example(example, released_nbs, released_lab, assignment)
            for name, nb in nbs.items():
                nbformat.write(nb, dest / name)
            (dest / lab_name).write_text(lab, encoding="utf-8")
        (staging / "README.md").write_text(_readme(), encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(staging, out)
    return [e.student_id for e in EXAMPLES]


def _readme() -> str:
    lines = ["# Example class for L14.4 (generated: `python -m lessons.l14_04.examples`)", "",
             "Each folder is what one learner hands in (`<student>/l14-04-model-memory/`: the lesson and the",
             "runtime-lab notebooks and the lab file): the reference solutions with one misconception each.",
             "What each must lose is stated in `tests/files/example_class.json`, which the tests hold the",
             "grader to.", "",
             "| student | what they did |", "|---|---|"]
    for e in EXAMPLES:
        lines.append(f"| `{e.student_id}` | {e.description} |")
    lines += ["", "Grade them with `course-grade autograde examples/submissions --out results`.", ""]
    return "\n".join(lines)


def _same_tree(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(_same_tree(a / d, b / d) for d in cmp.common_dirs)


def check(out: str | Path = OUT, assignment: Assignment | None = None) -> bool:
    """True when ``out`` is exactly what the generator writes now."""
    with tempfile.TemporaryDirectory() as tmp:
        main(out=Path(tmp) / "class", assignment=assignment)
        return Path(out).is_dir() and _same_tree(Path(tmp) / "class", Path(out))


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if examples/submissions is stale")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    if args.check:
        ok = check(args.out)
        print("examples are up to date" if ok else "examples are stale: run python -m lessons.l14_04.examples")
        sys.exit(0 if ok else 1)
    print(json.dumps(main(args.out)))

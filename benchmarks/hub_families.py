"""The 2026 families issue 42 names, as ``--model ORG/NAME`` builds them: formula, meta device, or a one-line refusal.

    PYTHONPATH=. .venv/bin/python benchmarks/hub_families.py

Each row is built from transformers' *default* config of the family's ``model_type`` (``AutoConfig.for_model``),
not the published checkpoint's, so the sizes are the class defaults'; results in benchmarks/results/hub-ids.md.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course_lib.errors import CourseInputError  # noqa: E402
from course_lib.model.models import from_hf_config, kv_cache_bytes_per_token  # noqa: E402

ROWS = (("deepseek-ai/DeepSeek-V4-Flash", "deepseek_v4"), ("Qwen/Qwen3.5-9B", "qwen3_5"),
        ("MiniMaxAI/MiniMax-M2.7", "minimax_m2"), ("nvidia/Kimi-K2.5-NVFP4", "kimi_k25"),
        ("LiquidAI/LFM2.5-1.2B-Instruct", "lfm2"), ("unsloth/GLM-4.7-Flash-FP8-Dynamic", "glm4_moe_lite"),
        ("a Nemotron-H", "nemotron_h"), ("a Gemma-4 12B / 26B-A4B", "gemma4"),
        ("XiaomiMiMo/MiMo-V2-Flash", "mimo_v2_flash"))


def main() -> int:
    warnings.filterwarnings("ignore")
    from transformers import AutoConfig

    print("| Hub id (family of) | model_type | built by | params | KV B/token (bf16, TP1) |")
    print("|---|---|---|---:|---:|")
    for repo, model_type in ROWS:
        try:
            spec = from_hf_config(AutoConfig.for_model(model_type).to_dict(), name=model_type)
        except CourseInputError as exc:
            print(f"| {repo} | `{model_type}` | refused in one line: {str(exc)[:100]} | - | - |")
            continue
        how = "meta device" if any("meta device" in n for n in spec.notes) else "formula"
        per_token = kv_cache_bytes_per_token(spec, "bf16")
        print(f"| {repo} | `{model_type}` | {how} | {spec.params_total:,} | {per_token:,} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The 2026 families of issue 42 from their published config.json (tests/files/hub/), at full size.

    PYTHONPATH=. .venv/bin/python benchmarks/families_2026.py

Per family: parameters as ``from_hf_config`` counts them and as transformers' ``model.parameters()`` counts
the same config built on the meta device; the KV cache one token adds (bf16, TP 1, every layer, windows
not capped); the per-sequence recurrent state (bf16 conv, fp32 SSM as vLLM's default for these); and the
vLLM 0.33 spec kinds its layers get. Results: benchmarks/results/families-2026.md.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "course_lib" / "model"))

from course_lib.model.models import from_hf_config, kv_cache_bytes_per_token  # noqa: E402

#: config file -> the vLLM 0.33 spec kinds of its layers (vllm/v1/kv_cache_interface.py and each model's file).
ROWS = {
    "DeepSeek-V4-Flash-Base": "SlidingWindowMLASpec (window) + MLAAttentionSpec (tokens_per_state 4 / 128) + "
                              "indexer MLAAttentionSpec + compressor SlidingWindowMLASpec (not grouped here)",
    "Qwen3.5-27B-text": "FullAttentionSpec + MambaSpec (gated delta net)",
    "Kimi-Linear-48B-A3B": "MLAAttentionSpec + MambaSpec (KDA)",
    "Nemotron-Nano-9B-v2": "FullAttentionSpec + MambaSpec (Mamba-2)",
    "LFM2-1.2B": "FullAttentionSpec + MambaSpec (short conv)",
    "LFM2-8B-A1B": "FullAttentionSpec + MambaSpec (short conv)",
    "MiniMax-M2.7": "FullAttentionSpec",
    "GLM-4.7-Flash": "MLAAttentionSpec",
    "MiMo-V2-Flash": "FullAttentionSpec + SlidingWindowSpec",
    "Gemma-4-31B-text": "FullAttentionSpec + SlidingWindowSpec",
}


def main() -> int:
    warnings.filterwarnings("ignore")
    from oracle import build, oracle_params

    print("| config (tests/files/hub/) | built by | params, ours | params, transformers | KV B/token (bf16) | "
          "state B/sequence | vLLM 0.33 spec kinds | s |")
    print("|---|---|---:|---:|---:|---:|---|---:|")
    for name, kinds in ROWS.items():
        cfg = json.loads((ROOT / "tests/files/hub" / f"{name}.config.json").read_text())
        start = time.perf_counter()
        spec = from_hf_config(cfg, name=name)
        theirs = oracle_params(build(cfg)[0])
        how = "meta device" if any("meta device" in n for n in spec.notes) else "formula"
        state = sum(s.conv_values * 2 + s.recurrent_values * 4 for s in spec.states)
        print(f"| {name} | {how} | {spec.params_total:,} | {theirs:,} | {kv_cache_bytes_per_token(spec, 'bf16'):,} "
              f"| {state:,} | {kinds} | {time.perf_counter() - start:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

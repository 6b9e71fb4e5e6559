"""CPU cost of reading real-sized model folders, and of refusing inputs at the bounds (issue 34).

    .venv/bin/python benchmarks/bench_refusals.py [--rounds 3]

Each case runs ``python -m course_lib ...`` as a fresh process and reads that process's own CPU seconds
(user + system, from ``os.wait4``): start-up included, waiting excluded. The folders are made here: a
DeepSeek-V3-sized and a Kimi-K2-sized checkpoint (their tensor names, shapes and dtypes by layer plan:
fp8 blocks with their scales, 256 or 384 experts, 163 or 61 shards; the shards are sparse files, so the
headers are real and the data takes no disk), and the costly refusals of tests/course_lib/cli/test_cli_fuzz.py
(12 shards of ~10 MiB headers, a 10^6-layer config for ``measure``). Results: benchmarks/results/refusals.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "course_lib" / "cli"))
sys.path.insert(0, str(REPO / "tests"))


def deepseek_like_folder(out: Path, experts: int, layers: int, shards: int) -> tuple[int, int, int]:
    """A DeepSeek-V3-style folder (MLA, fp8 weights with 128x128 block scales, MoE after 3 dense layers);
    (tensors, header bytes, index bytes)."""
    out.mkdir(parents=True)
    hidden, inter, moe = 7168, 18432, 2048
    tensors: list[tuple[str, list[int], str]] = []

    def fp8(name: str, shape: list[int]) -> None:
        tensors.append((name + ".weight", shape, "F8_E4M3"))
        tensors.append((name + ".weight_scale_inv", [(shape[0] + 127) // 128, (shape[1] + 127) // 128], "F32"))

    tensors += [("model.embed_tokens.weight", [129280, hidden], "BF16"), ("lm_head.weight", [129280, hidden], "BF16"),
                ("model.norm.weight", [hidden], "BF16")]
    for layer in range(layers):
        p = f"model.layers.{layer}."
        for name, shape in (("self_attn.q_a_proj", [1536, hidden]), ("self_attn.q_b_proj", [24576, 1536]),
                            ("self_attn.kv_a_proj_with_mqa", [576, hidden]), ("self_attn.kv_b_proj", [32768, 512]),
                            ("self_attn.o_proj", [hidden, 16384])):
            fp8(p + name, shape)
        tensors += [(p + "input_layernorm.weight", [hidden], "BF16"), (p + "post_attention_layernorm.weight", [hidden], "BF16"),
                    (p + "self_attn.q_a_layernorm.weight", [1536], "BF16"), (p + "self_attn.kv_a_layernorm.weight", [512], "BF16")]
        if layer < 3:
            for name, shape in (("gate_proj", [inter, hidden]), ("up_proj", [inter, hidden]), ("down_proj", [hidden, inter])):
                fp8(p + "mlp." + name, shape)
            continue
        tensors += [(p + "mlp.gate.weight", [experts, hidden], "BF16"), (p + "mlp.gate.e_score_correction_bias", [experts], "F32")]
        for expert in [f"experts.{e}" for e in range(experts)] + ["shared_experts"]:
            for name, shape in (("gate_proj", [moe, hidden]), ("up_proj", [moe, hidden]), ("down_proj", [hidden, moe])):
                fp8(f"{p}mlp.{expert}.{name}", shape)
    bits = {"BF16": 16, "F32": 32, "F8_E4M3": 8}
    per = -(-len(tensors) // shards)
    weight_map, header_bytes, total = {}, 0, 0
    for k in range(shards):
        name = f"model-{k + 1:05d}-of-{shards:06d}.safetensors"
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for tensor, shape, dtype in tensors[k * per:(k + 1) * per]:
            count = 1
            for dim in shape:
                count *= dim
            size = count * bits[dtype] // 8
            header[tensor] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
            offset += size
            weight_map[tensor] = name
        raw = json.dumps(header, separators=(",", ":")).encode()
        header_bytes += len(raw)
        total += offset
        with open(out / name, "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw)
            f.truncate(8 + len(raw) + offset)          # sparse: the data is never read
    index = json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2).encode()
    (out / "model.safetensors.index.json").write_bytes(index)
    (out / "config.json").write_text(json.dumps({
        "model_type": "deepseek_v3", "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": 128,
        "num_key_value_heads": 128, "intermediate_size": inter, "moe_intermediate_size": moe, "vocab_size": 129280,
        "n_routed_experts": experts, "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
        "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "torch_dtype": "bfloat16", "max_position_embeddings": 163840, "moe_layer_freq": 1, "n_group": 8,
        "topk_group": 4}))
    return len(tensors), header_bytes, len(index)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from test_cli_fuzz import _layers_at_the_bound, _run_child, _shards_at_the_bound

    with tempfile.TemporaryDirectory(prefix="bench-refusals-") as tmp:
        root = Path(tmp)
        cases = []
        for label, experts, shards in (("DeepSeek-V3-sized folder (reads)", 256, 163),
                                       ("Kimi-K2-sized folder (reads)", 384, 61)):
            tensors, headers, index = deepseek_like_folder(root / label.split()[0], experts, 61, shards)
            print(f"{label}: {tensors:,} tensors, {headers / 1e6:.1f} MB of headers, {index / 1e6:.1f} MB of index")
            cases.append((label, ["estimate", "--gpu", "h100-80gb", "--config", str(root / label.split()[0])]))
        _shards_at_the_bound(root / "shards")
        cases.append(("12 shards of ~10 MiB headers, the last broken (refused)",
                      ["estimate", "--gpu", "h100-80gb", "--config", str(root / "shards")]))
        _layers_at_the_bound(root / "layers")
        cases.append(("measure, 10^6 layers (refused)", ["measure", "--config", str(root / "layers" / "config.json"),
                                                         "--quiet", "--no-load-time"]))
        cases.append(("estimate, 10^6 layers", ["estimate", "--config", str(root / "layers" / "config.json")]))
        cases.append(("presets (start-up alone)", ["presets"]))
        for label, argv in cases:
            runs = [_run_child(argv) for _ in range(args.rounds)]
            codes = sorted({rc for rc, _, _ in runs})
            cpu = [c for _, _, c in runs]
            print(f"{label}: exit {codes}, CPU s median {statistics.median(cpu):.2f} (min {min(cpu):.2f}, "
                  f"max {max(cpu):.2f}) over {args.rounds}")
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

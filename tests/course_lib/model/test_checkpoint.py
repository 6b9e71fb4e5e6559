"""Model folders: exact weight bytes from safetensors headers (never the tensors), checked against the formula.

Each test writes a small real checkpoint with the ``safetensors`` package: the
tensor names and shapes transformers builds for the config (the oracle), stored
the way each format stores them on disk (bf16; AWQ's packed int32 + fp16
scales; fp8 with fp32 128 x 128 block scales; gpt-oss's mxfp4 blocks and
scales). The folder's bytes then come from the files, and the formula plus the
quantization_config must predict them.
"""

from __future__ import annotations

import json
import math
import time

import pytest
import torch
from safetensors.torch import save_file

from course_lib import estimate
from course_lib.model.checkpoint import read_checkpoint
from course_lib.errors import CourseInputError
from course_lib.model.models import formula_weight_bytes, from_hf_config, weight_bytes

from oracle import build

TINY_LLAMA = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 384, "torch_dtype": "bfloat16",
              "tie_word_embeddings": False}


def shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    model, _ = build(cfg)
    return {name: tuple(p.shape) for name, p in model.named_parameters()}


def write_folder(folder, cfg: dict, tensors: dict[str, torch.Tensor], shards: int = 1) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    names = sorted(tensors)
    if shards == 1:
        save_file(tensors, str(folder / "model.safetensors"))
        return
    weight_map, total = {}, 0
    for k in range(shards):
        part = {n: tensors[n] for n in names[k::shards]}
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        save_file(part, str(folder / file))
        weight_map.update({n: file for n in part})
        total += sum(t.numel() * t.element_size() for t in part.values())
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}), encoding="utf-8")


def bf16_tensors(cfg: dict) -> dict[str, torch.Tensor]:
    return {n: torch.zeros(s, dtype=torch.bfloat16) for n, s in shapes(cfg).items()}


def test_bf16_folder_bytes_equal_formula(tmp_path):
    write_folder(tmp_path / "m", TINY_LLAMA, bf16_tensors(TINY_LLAMA))
    spec = from_hf_config(tmp_path / "m")
    assert spec.checkpoint.source == "safetensors headers (model.safetensors)"
    assert spec.checkpoint.params == spec.params_total
    assert spec.checkpoint.total_bytes == 2 * spec.params_total == formula_weight_bytes(spec)
    est = estimate(spec, gpu="24GB")
    assert est.budget.parts["weights"] == spec.checkpoint.total_bytes and est.weights_source == "checkpoint"
    assert "read from the checkpoint" in est.budget.pools[0].note and "the formula gives" in est.budget.pools[0].note


def test_sharded_folder_reads_the_shards_its_index_names(tmp_path):
    # The shards' headers (bounded in all, see test_checkpoint_input.py) give the bytes per dtype; the
    # index's total_size alone is used only when no shard is in the folder.
    write_folder(tmp_path / "m", TINY_LLAMA, bf16_tensors(TINY_LLAMA), shards=3)
    spec = from_hf_config(tmp_path / "m")
    assert spec.checkpoint.source == "safetensors headers (3 files)"
    assert spec.checkpoint.total_bytes == 2 * spec.params_total == spec.checkpoint.bytes_by_dtype["BF16"]
    for shard in (tmp_path / "m").glob("*.safetensors"):
        shard.unlink()
    alone = from_hf_config(tmp_path / "m").checkpoint
    assert alone.source == "model.safetensors.index.json metadata.total_size (no shard in the folder)"
    assert alone.total_bytes == 2 * spec.params_total


def test_headers_only_a_sparse_terabyte_reads_instantly(tmp_path):
    # A header naming one 2^39-byte tensor, and a sparse file of that size: reading the data would take
    # minutes and 512 GiB; reading the header takes microseconds.
    size = 2**39
    header = json.dumps({"w": {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}}).encode()
    path = tmp_path / "m" / "model.safetensors"
    path.parent.mkdir()
    with path.open("wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        f.truncate(8 + len(header) + size)
    (tmp_path / "m" / "config.json").write_text(json.dumps(TINY_LLAMA))
    start = time.perf_counter()
    assert read_checkpoint(tmp_path / "m").total_bytes == size
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("content, shown", [
    (b"\x01\x00", "shorter than its 8-byte header"),
    ((10**12).to_bytes(8, "little"), "above the bound"),
    ((5).to_bytes(8, "little") + b"{nope", "not valid JSON"),
    ((2).to_bytes(8, "little") + b"[]", "not a JSON object"),
])
def test_malformed_safetensors_refused(tmp_path, content, shown):
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    (tmp_path / "model.safetensors").write_bytes(content)
    with pytest.raises(CourseInputError, match=shown):
        from_hf_config(tmp_path)


def test_header_offsets_must_match_shapes(tmp_path):
    header = json.dumps({"w": {"dtype": "F16", "shape": [4], "data_offsets": [0, 4]}}).encode()   # 4 x 2 B = 8
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    (tmp_path / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 8)
    with pytest.raises(CourseInputError, match=r"tensor 'w' has data_offsets=\[0, 4\] \(4 bytes\) but shape \[4\] "
                                               r"of F16 needs 8 bytes"):
        from_hf_config(tmp_path)


def test_unknown_family_runs_from_the_checkpoint_marked_approximate(tmp_path):
    cfg = dict(TINY_LLAMA, model_type="brandnew")
    write_folder(tmp_path / "m", cfg, bf16_tensors(TINY_LLAMA))
    spec = from_hf_config(tmp_path / "m")
    est = estimate(spec, gpu="24GB")
    assert est.budget.parts["weights"] == spec.checkpoint.total_bytes == 2 * spec.params_total
    assert any(n.startswith("approximate") for n in spec.notes)
    # KV from the common keys: 2 x 2 layers x 2 KV heads x 64 dims x 2 B
    assert est.kv_cache_bytes_per_token == 2 * 2 * 2 * 64 * 2
    with pytest.raises(CourseInputError, match="not supported"):
        from_hf_config(cfg)                   # the same config without its checkpoint


# ------------------------------------------------------------------ quantized layouts

def _is_linear_weight(name: str) -> bool:
    return ".layers." in name and name.endswith("_proj.weight")


def awq_tensors(cfg: dict, group: int) -> dict[str, torch.Tensor]:
    """AutoAWQ's GEMM layout: qweight int32 [in, out/8], qzeros int32 [in/g, out/8], scales fp16 [in/g, out]."""
    out = {}
    for name, shape in shapes(cfg).items():
        if _is_linear_weight(name):
            o, i = shape
            base = name.removesuffix(".weight")
            out[base + ".qweight"] = torch.zeros((i, o // 8), dtype=torch.int32)
            out[base + ".qzeros"] = torch.zeros((i // group, o // 8), dtype=torch.int32)
            out[base + ".scales"] = torch.zeros((i // group, o), dtype=torch.float16)
        else:
            out[name] = torch.zeros(shape, dtype=torch.float16)
    return out


def test_awq_int4_checkpoint_matches_formula(tmp_path):
    cfg = dict(TINY_LLAMA, torch_dtype="float16",
               quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
                                    "version": "gemm"})
    write_folder(tmp_path / "m", cfg, awq_tensors(cfg, 128))
    spec = from_hf_config(tmp_path / "m")
    assert spec.quantization.name == "int4-g128"
    assert formula_weight_bytes(spec) == spec.checkpoint.total_bytes
    assert weight_bytes(spec, None) == spec.checkpoint.total_bytes


def fp8_block_tensors(cfg: dict) -> dict[str, torch.Tensor]:
    """Qwen3-FP8 / DeepSeek-V3 layout: e4m3 weight [out, in] + fp32 weight_scale_inv per 128 x 128 block."""
    out = {}
    for name, shape in shapes(cfg).items():
        if _is_linear_weight(name):
            o, i = shape
            out[name] = torch.zeros(shape, dtype=torch.float8_e4m3fn)
            out[name + "_scale_inv"] = torch.zeros((math.ceil(o / 128), math.ceil(i / 128)), dtype=torch.float32)
        else:
            out[name] = torch.zeros(shape, dtype=torch.bfloat16)
    return out


def test_fp8_block_checkpoint_matches_formula(tmp_path):
    cfg = {"model_type": "qwen3", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
           "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 128, "vocab_size": 384,
           "tie_word_embeddings": True, "torch_dtype": "bfloat16",
           "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                   "weight_block_size": [128, 128]}}
    write_folder(tmp_path / "m", cfg, fp8_block_tensors(cfg))
    spec = from_hf_config(tmp_path / "m")
    assert spec.quantization.name == "fp8-block128x128"
    assert formula_weight_bytes(spec) == spec.checkpoint.total_bytes


def mxfp4_tensors(cfg: dict) -> dict[str, torch.Tensor]:
    """gpt-oss's layout: each expert matrix as uint8 blocks [E, out, in/32, 16] and e8m0 scales [E, out, in/32]."""
    out = {}
    for name, shape in shapes(cfg).items():
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            e, i, o = shape                        # transformers keeps [E, in, out]; the checkpoint [E, out, ...]
            out[name + "_blocks"] = torch.zeros((e, o, i // 32, 16), dtype=torch.uint8)
            out[name + "_scales"] = torch.zeros((e, o, i // 32), dtype=torch.uint8)
        else:
            out[name] = torch.zeros(shape, dtype=torch.bfloat16)
    return out


def test_mxfp4_checkpoint_matches_formula(tmp_path):
    cfg = {"model_type": "gpt_oss", "hidden_size": 128, "intermediate_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 200,
           "num_local_experts": 4, "num_experts_per_tok": 2, "torch_dtype": "bfloat16",
           "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
               "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}}
    write_folder(tmp_path / "m", cfg, mxfp4_tensors(cfg))
    spec = from_hf_config(tmp_path / "m")
    assert formula_weight_bytes(spec) == spec.checkpoint.total_bytes


def test_bitsandbytes_nf4_bytes_per_weight():
    spec = from_hf_config(dict(TINY_LLAMA, quantization_config={
        "quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True}))
    # 4 bits + an 8-bit absmax per 64 weights + an fp32 constant per 256 absmaxes = 4.127 bits per weight
    assert spec.quantization.quantized.bytes_per_value * 8 == 4 + 8 / 64 + 32 / (64 * 256)
    assert spec.quantization.dtype_for("embedding").name == "bf16"

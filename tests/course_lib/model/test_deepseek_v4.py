"""DeepSeek-V4: the per-layer cache formula against the cache transformers fills on the meta device.

The formula (:mod:`course_lib.model.families.deepseek_v4`) is held to what transformers 5.24's own
``DeepseekV4CSACache`` / ``DeepseekV4HCACache`` hold after meta-device forwards of 1,024, 2,048 and
2,048 + 127 tokens (two lengths a multiple of both rates, so no window is half full, then every
compressor's buffer at its fullest), tensor by tensor. The model is the published
DeepSeek-V4-Flash-Base config (tests/files/hub/) shrunk to 4 layers (one of each kind and a second
CSA) and 8 experts to build in seconds: neither changes what a layer caches.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.model.families import deepseek_v4
from course_lib.model.models import from_hf_config, kv_cache_bytes_per_token

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

FLASH = json.loads((Path(__file__).parents[2] / "files/hub/DeepSeek-V4-Flash-Base.config.json").read_text())
SMALL = dict(FLASH, num_hidden_layers=4, compress_ratios=[0, 4, 128, 4], n_routed_experts=8, num_hash_layers=1)


@pytest.fixture(scope="module")
def model():
    from oracle import build

    model, _ = build(SMALL)
    return model.eval()


def _fill(model, tokens: int) -> list:
    from transformers import DynamicCache

    ids = torch.zeros((1, tokens), dtype=torch.long, device="meta")
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True, cache=DynamicCache(config=model.config))
    return out.past_key_values.layers


def _held(layer) -> dict[str, int]:
    """Values per kind of tensor one cache layer holds: window (keys, values once if shared), compressed, state."""
    window = layer.keys.numel() + (0 if layer.values is layer.keys else layer.values.numel())
    out = {"window": window, "compressed": 0, "overlap": 0, "buffer": 0}
    for name in getattr(layer, "compressed_kv", {}):
        out["compressed"] += layer.compressed_kv[name].numel()
        out["buffer"] += sum(t[name].numel() for t in (layer.buffer_kv, layer.buffer_gate) if t[name] is not None)
        out["overlap"] += sum(t[name].numel() for t in (getattr(layer, "overlap_kv", {}),
                                                       getattr(layer, "overlap_gate", {})) if name in t)
    return out


def test_the_formula_holds_what_transformers_caches_layer_by_layer(model):
    caches, states = deepseek_v4.cache_layout(model.config)
    short, long, full = (_fill(model, n) for n in (1024, 2048, 2048 + 127))
    window = FLASH["sliding_window"]
    layer_caches, layer_states = iter(caches), iter(states)
    for index, (a, b, c) in enumerate(zip(short, long, full)):
        held_a, held_b, held_c = _held(a), _held(b), _held(c)
        slide = next(layer_caches)
        assert slide.window == window and held_b["window"] == (window - 1) * slide.values_per_token, \
            f"layer {index}: the window holds {window - 1} tokens of {slide.values_per_token} values"
        if type(b).__name__ not in deepseek_v4.CACHE_LAYERS:
            continue
        compressed, state = next(layer_caches), next(layer_states)
        grows = (held_b["compressed"] - held_a["compressed"]) // 1024
        assert compressed.window is None and grows == compressed.values_per_token, \
            f"layer {index} ({type(b).__name__}): compressed entries grow by {grows} values a token"
        assert held_b["overlap"] == state.recurrent_values, f"layer {index}: the overlap state"
        assert held_b["buffer"] == 0 and held_c["buffer"] == state.conv_values, \
            f"layer {index}: the compressor's buffer at its fullest (rate - 1 tokens)"
    assert next(layer_caches, None) is None and next(layer_states, None) is None


def test_flash_grows_by_hand_worked_values_a_token():
    """21 CSA layers x (512 + 128) / 4 + 20 HCA layers x 512 / 128 = 3,440 values a token past the window."""
    from transformers import AutoConfig

    config = AutoConfig.for_model("deepseek_v4", **{k: v for k, v in FLASH.items()
                                                    if k not in ("model_type", "architectures")})
    caches, states = deepseek_v4.cache_layout(config)
    assert sum(c.values_per_token for c in caches if c.window is None) == 21 * 160 + 20 * 4 == 3440
    # windows: 2 sliding layers keep K and V (2 x 512), 41 compressed layers one shared K=V (512)
    assert sum(c.values_per_token for c in caches if c.window == 128) == 2 * 1024 + 41 * 512
    assert len(states) == 41


def test_the_hub_path_builds_it_with_transformers_parameters(model):
    from oracle import oracle_buffers, oracle_params

    spec = from_hf_config(SMALL, name="dsv4-small")
    assert spec.params_total == oracle_params(model)
    assert spec.buffers_total == oracle_buffers(model)      # the hash router's tid2eid, the bias of the others
    # layer 0 sliding (2 x 512 x 2 B), layers 1-3 a window each (512 x 2 B), CSA 160, HCA 4, CSA 160 (x 2 B)
    assert kv_cache_bytes_per_token(spec, "bf16") == (1024 + 3 * 512 + 160 + 4 + 160) * 2


def test_vllm_pages_each_kind_as_its_source_sizes_it():
    """vLLM 0.33, fp8_ds_mla, 256-token blocks, worked by hand from the spec classes (see vllm_kv_dsv4's table):
    584 B a token or entry, pages rounded up to 576 B; the indexer 128 fp8 + 4 scale bytes; fp32 state rings."""
    from course_lib.runtimes.vllm.kv_dsv4 import layer_specs

    dims = dict(head_dim=512, index_head_dim=128, window=128)
    assert [(s.kind, s.page_bytes) for s in layer_specs(0, **dims)] == [("dsv4_swa", 65 * 576)]   # 64 x 584
    csa = {s.kind: s.page_bytes for s in layer_specs(4, **dims)}
    assert csa == {"dsv4_swa": 37440, "dsv4_compressed": 65 * 576, "dsv4_indexer": 15 * 576,      # 64 x 132
                   "dsv4_state": 57 * 576, "dsv4_index_state": 8192 + 448}                        # 4 x 2 x 2 x 512 x 4
    hca = {s.kind: s.page_bytes for s in layer_specs(128, **dims)}
    assert hca == {"dsv4_swa": 37440, "dsv4_compressed": 3 * 576, "dsv4_state": 32832}  # 2 x 584; 8 x 1,024 x 4
    bf16 = {s.kind: s.page_bytes for s in layer_specs(4, **dims, cache_dtype="bf16")}
    assert bf16["dsv4_swa"] == 64 * 1024 and bf16["dsv4_compressed"] == 64 * 1024      # 512 x 2 B, no V


def test_vllm_estimates_it_other_runtimes_say_not_modelled_in_one_line(capsys):
    import tempfile

    from course_lib.cli import main

    folder = tempfile.TemporaryDirectory()
    path = Path(folder.name) / "config.json"
    path.write_text(json.dumps(SMALL))
    # vLLM: its KV groups (runtimes/vllm/kv_dsv4.py, held to vLLM 0.32's CPU build in test_vllm_windows_oracle.py)
    assert main(["estimate", "--config", str(path), "--gpu", "h200", "--runtime", "vllm", "--max-model-len",
                 "8192"]) == 0
    out = capsys.readouterr().out
    assert "of 256 tokens" in out and "DeepSeek-V4's sparse MLA kernel runs 256-token blocks" in out, out
    for runtime in ("trtllm", "sglang"):         # checked before any runtime's rules
        try:
            rc = main(["estimate", "--config", str(path), "--gpu", "h200", "--runtime", runtime])
        except SystemExit as exc:
            rc = exc.code
        err = capsys.readouterr().err
        assert rc == 2 and "DeepSeek-V4" in err and "is not modelled" in err and err.count("\n") == 1, err
    # without --runtime: the model's own figures, its caches and states named as what they are
    assert main(["estimate", "--config", str(path), "--gpu", "h200"]) == 0
    out = capsys.readouterr().out
    assert "4 of 7 caches of 4 layers capped by a window" in out and "(3 compressor states)" in out, out
    folder.cleanup()

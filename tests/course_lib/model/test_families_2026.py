"""The 2026 families of issue 42, from their published config.json, against transformers and by hand.

Each config in tests/files/hub/ holds the published values (as vendored in public tests and loaders; the
file names the checkpoint). To build in seconds each is shrunk here to a few layers that keep every layer
kind, and MoE ones to 8 experts: neither changes what one layer caches. For each family:

* parameters and persistent buffers equal transformers' own ``model.parameters()`` / ``state_dict`` on the
  meta device (:mod:`oracle`), for the shrunk config;
* every layer's KV values per token and every recurrent layer's state equal a figure worked by hand from
  the published dims, with vLLM 0.33's state shapes (``vllm/model_executor/layers/mamba/mamba_utils.py``:
  ``mamba2_state_shape`` conv ``(intermediate + 2 x n_groups x state) x (kernel - 1)`` and temporal
  ``heads x head_dim x state``; ``short_conv_state_shape`` ``hidden x (L_cache - 1)``;
  ``gated_delta_net_state_shape`` conv ``(2 x k_heads x d_k + v_heads x d_v) x (kernel - 1)``, temporal
  ``v_heads x d_k x d_v``; ``kda_state_shape`` conv ``3 x heads x d x (kernel - 1)``, recurrent
  ``heads x d x d``).

The hybrid page arithmetic of vLLM (a Mamba page padded to the attention page, the attention block
grown until its page holds the state) is checked by hand on Qwen3.5-27B at the end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.model.models import from_hf_config

pytest.importorskip("torch")
pytest.importorskip("transformers")

HUB = Path(__file__).parents[2] / "files" / "hub"


def published(name: str) -> dict:
    return json.loads((HUB / f"{name}.config.json").read_text())


def _shrunk(name: str) -> dict:
    cfg = published(name)
    if name == "LFM2-1.2B":                      # conv, conv, attention, conv, conv, attention
        cfg.update(num_hidden_layers=6, full_attn_idxs=[2, 5])
    elif name == "LFM2-8B-A1B":                  # two dense layers, then MoE; conv, conv, attention, conv
        cfg.update(num_hidden_layers=4, layer_types=cfg["layer_types"][:4], num_experts=8)
    elif name == "Nemotron-Nano-9B-v2":          # the published pattern's first 15 layers: 8 Mamba, 6 MLP, 1 attention
        cfg.update(num_hidden_layers=15, hybrid_override_pattern=cfg["hybrid_override_pattern"][:15])
    elif name == "Kimi-Linear-48B-A3B":          # 3 KDA layers, then MLA (1-based, as published)
        cfg.update(num_hidden_layers=4, num_experts=8,
                   linear_attn_config=dict(cfg["linear_attn_config"], kda_layers=[1, 2, 3], full_attn_layers=[4]))
    elif name == "GLM-4.7-Flash":                # one dense layer, two MoE
        cfg.update(num_hidden_layers=3, n_routed_experts=8)
    elif name == "MiMo-V2-Flash":                # full, 4 sliding, full
        cfg.update(num_hidden_layers=6, hybrid_layer_pattern=cfg["hybrid_layer_pattern"][:6],
                   moe_layer_freq=cfg["moe_layer_freq"][:6], n_routed_experts=8)
    elif name == "Gemma-4-31B-text":             # 5 sliding layers, then a global one
        cfg.update(num_hidden_layers=6, layer_types=cfg["layer_types"][:6])
    elif name == "MiniMax-M2.7":
        cfg.update(num_hidden_layers=2, num_local_experts=8)
    elif name == "Qwen3.5-27B-text":             # 3 Gated DeltaNet layers, then full attention
        cfg.update(num_hidden_layers=4, layer_types=cfg["layer_types"][:4])
    return cfg


#: name -> (per attention layer (KV values a token, window), per recurrent layer (recurrent, conv) values),
#: worked by hand from the published dims.
BY_HAND = {
    # 32 heads, 8 KV heads of 2,048 / 32 = 64: 2 x 8 x 64; short conv over 2,048 channels, L_cache 3
    "LFM2-1.2B": ([(2 * 8 * 64, None)] * 2, [(0, 2048 * 2)] * 4),
    # the same attention and short conv in the MoE model
    "LFM2-8B-A1B": ([(2 * 8 * 64, None)], [(0, 2048 * 2)] * 3),
    # 8 KV heads of 128; Mamba-2: 128 heads x 80 x state 128, conv (128 x 80 + 2 x 8 x 128) x 3
    "Nemotron-Nano-9B-v2": ([(2 * 8 * 128, None)], [(128 * 80 * 128, (10240 + 2048) * 3)] * 8),
    # MLA: kv_lora_rank 512 + rope 64; KDA: 32 heads x 128 x 128, conv 3 x 32 x 128 x 3
    "Kimi-Linear-48B-A3B": ([(512 + 64, None)], [(32 * 128 * 128, 3 * 4096 * 3)] * 3),
    # MLA: 512 + 64 on every layer
    "GLM-4.7-Flash": ([(576, None)] * 3, []),
    # full: 4 KV heads x (192 + 128); sliding: 8 KV heads x (192 + 128), window 128 (+1 as transformers keeps it)
    "MiMo-V2-Flash": ([(4 * 320, None)] + [(8 * 320, 129)] * 4 + [(4 * 320, None)], []),
    # sliding: 16 KV heads of 256, window 1,024; global: 4 KV heads of 512 (attention_k_eq_v: transformers still
    # keeps K and V as two tensors)
    "Gemma-4-31B-text": ([(2 * 16 * 256, 1024)] * 5 + [(2 * 4 * 512, None)], []),
    # 8 KV heads of 128
    "MiniMax-M2.7": ([(2 * 8 * 128, None)] * 2, []),
    # 4 KV heads of 256; GDN: 48 v-heads x 128 x 128, conv (2 x 16 x 128 + 48 x 128) x 3
    "Qwen3.5-27B-text": ([(2 * 4 * 256, None)], [(48 * 128 * 128, (4096 + 6144) * 3)] * 3),
}


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_a_2026_family_is_exact_against_transformers_and_by_hand(name):
    from oracle import build, oracle_buffers, oracle_params

    cfg = _shrunk(name)
    spec = from_hf_config(cfg, name=name)
    model, _ = build(cfg)
    assert (spec.params_total, spec.buffers_total) == (oracle_params(model), oracle_buffers(model)), \
        f"{name}: parameters and buffers as transformers builds them"
    caches, states = BY_HAND[name]
    assert [(c.values_per_token, c.window) for c in spec.layers] == caches, f"{name}: KV values a token per layer"
    assert [(s.recurrent_values, s.conv_values) for s in spec.states] == states, f"{name}: recurrent state per layer"


def test_qwen35_pages_in_vllm_by_hand():
    """Qwen3.5-27B in bf16 with its fp32 SSM state (``mamba_ssm_dtype``) on vLLM 0.33 (block 16, kernel unit 16):
    the state page is 30,720 x 2 + 786,432 x 4 = 3,207,168 B; an attention token 2 x 4 x 256 x 2 = 4,096 B;
    the block grows to 16 x cdiv(3,207,168, 16 x 4,096) = 16 x 49 = 784 tokens (``_align_hybrid_block_size``),
    and the Mamba page is padded to the attention page, 784 x 4,096 = 3,211,264 B."""
    from course_lib.runtimes.vllm.kv_groups import hybrid_block_size, kv_layout, state_bytes

    spec = from_hf_config(published("Qwen3.5-27B-text"), name="qwen3.5-27b")
    state = state_bytes(spec, conv_bytes=2, ssm_bytes=4)
    assert state == 3_207_168
    block = hybrid_block_size(16, 16, 4096, state)
    assert block == 784
    layout = kv_layout(spec, kv_bytes=2, block_size=block, max_model_len=8192, max_in_flight_tokens=8192,
                       state_layers=len(spec.states))
    assert {s.page_bytes for s in layout.specs} == {784 * 4096}          # every page, attention and Mamba alike
    # 16 attention layers, 48 GDN layers: groups of 16 layers, 1 attention and 3 Mamba groups
    assert sorted(g.kind for g in layout.groups) == ["full", "mamba", "mamba", "mamba"]
    assert layout.bytes_per_block == 16 * 784 * 4096


#: name -> vLLM 0.33's state shapes of one of its recurrent layers, from the published dims.
def _vllm_state(name: str):
    from course_lib.runtimes.vllm import mamba_pages as vm

    return {
        "Nemotron-Nano-9B-v2": lambda: vm.mamba2_state(intermediate=128 * 80, n_groups=8, heads=128, head_dim=80,
                                                       state=128, conv_kernel=4),
        "LFM2-1.2B": lambda: vm.short_conv_state(hidden=2048, l_cache=3),
        "Kimi-Linear-48B-A3B": lambda: vm.kda_state(heads=32, head_dim=128, conv_kernel=4),
        "Qwen3.5-27B-text": lambda: vm.gated_delta_net_state(k_heads=16, v_heads=48, d_k=128, d_v=128, conv_kernel=4),
    }[name]()


@pytest.mark.parametrize("name", ["Nemotron-Nano-9B-v2", "LFM2-1.2B", "Kimi-Linear-48B-A3B", "Qwen3.5-27B-text"])
def test_vllm_state_shapes_hold_what_transformers_keeps(name):
    """vLLM 0.33's MambaSpec shapes (vllm_mamba_pages) against the state transformers' cache holds per layer."""
    spec = from_hf_config(_shrunk(name), name=name)
    shapes = _vllm_state(name)
    assert {(s.recurrent_values, s.conv_values) for s in spec.states} == {(shapes.temporal_values,
                                                                          shapes.conv_values)}


def test_an_mla_hybrid_block_follows_vllm_033():
    """Kimi-Linear with a bf16 state: KDA state 1,122,304 B, MLA 1,152 B a token; vLLM (0.29-0.33) aligns an MLA
    hybrid to 128 tokens: 128 x cdiv(1,122,304, 147,456) = 1,024 (without the floor: 16 x 61 = 976). vLLM keeps
    KDA's state in fp32 (kda_state_dtype): the launch's figure, 1,920, is test_vllm_hybrid_pages.py's."""
    from course_lib.runtimes.vllm.kv_groups import hybrid_block_size
    from course_lib.runtimes.vllm.mamba_pages import hybrid_block_size_033, kda_state, page_bytes

    state = page_bytes(kda_state(heads=32, head_dim=128, conv_kernel=4), conv_bytes=2, ssm_bytes=2)
    assert state == 36_864 * 2 + 524_288 * 2 == 1_122_304
    assert hybrid_block_size_033(16, 16, 1152, state, mla=True) == 1024
    assert hybrid_block_size(16, 16, 1152, state, mla=True) == 1024 and hybrid_block_size(16, 16, 1152, state) == 976

"""course_lib.measure.tiny_model: the small real model, checked against published counts and a naive reference."""

from __future__ import annotations

import math

import pytest

from course_lib.errors import CourseInputError
from course_lib.model.models import from_hf_config
from course_lib.model.presets import get_model

torch = pytest.importorskip("torch")

from course_lib.measure.tiny_model import Architecture, KVCache, TinyDecoder, architecture  # noqa: E402

# Published parameter counts (Hugging Face model cards / safetensors metadata): the model we
# build from each config's shape must have exactly these, tensor by tensor.
PUBLISHED_PARAMS = {
    "llama-2-7b": 6_738_415_616,
    "llama-3-8b": 8_030_261_248,
    "mistral-7b": 7_241_732_096,
    "qwen2-0.5b": 494_032_768,      # q/k/v biases, tied embeddings
    "gemma-2-2b": 2_614_341_888,    # four norms per layer, tied embeddings
    "phi-3-mini": 3_821_079_552,
}

# A tiny GQA config for exact-arithmetic checks: 4 query heads share 2 KV heads.
TINY = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300}


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_built_architecture_has_the_published_parameter_count(name):
    arch = architecture(get_model(name))
    assert arch.params_total == PUBLISHED_PARAMS[name], (
        f"{name}: the tensors we would build hold {arch.params_total:,} parameters, "
        f"the checkpoint {PUBLISHED_PARAMS[name]:,}; look at Architecture.shapes()")


@pytest.mark.parametrize("name", ["gpt2", "opt-125m", "falcon-7b", "mixtral-8x7b", "deepseek-v2-lite"])
def test_families_we_cannot_build_are_refused_with_the_way_out(name):
    with pytest.raises(CourseInputError, match="course-tiny"):
        architecture(get_model(name))


def test_random_weights_are_real_tensors_of_the_right_size():
    arch = architecture(from_hf_config(TINY, name="tiny"))
    model = TinyDecoder.random(arch, "fp32")
    numel = sum(t.numel() for t in model.weights.values())
    # By hand: embed 300x64 + lm_head 300x64 + 2 layers x (q,o 2x64x64 + k,v 2x64x32 + mlp 3x64x160
    # + 2 norms x 64) + final norm 64
    by_hand = 2 * 300 * 64 + 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 160 + 2 * 64) + 64
    assert numel == by_hand == arch.params_total
    assert model.nbytes == 4 * by_hand
    assert TinyDecoder.random(arch, "bf16").nbytes == 2 * by_hand


def test_kv_cache_shape_and_bytes_by_hand():
    arch = architecture(from_hf_config(TINY, name="tiny"))
    cache = KVCache(arch, sequences=3, context_tokens=10, dtype="fp16")
    # [layers, k/v, sequences, kv_heads, tokens, head_dim] = [2, 2, 3, 2, 10, 16]
    assert tuple(cache.tensor.shape) == (2, 2, 3, 2, 10, 16)
    assert cache.nbytes == 2 * 2 * 3 * 2 * 10 * 16 * 2
    assert int(cache.tensor.abs().sum()) == 0, "zeros: every byte written, so the OS commits the pages"


def test_bad_dtypes_and_overflowing_positions_are_refused():
    arch = architecture(from_hf_config(TINY, name="tiny"))
    with pytest.raises(CourseInputError, match="fp32, fp16 or bf16"):
        TinyDecoder.random(arch, "int4")
    cache = KVCache(arch, 1, 4)
    model = TinyDecoder.random(arch)
    with pytest.raises(CourseInputError, match="context_tokens=4"):
        model.prefill(torch.zeros(1, 5, dtype=torch.long), cache)


def naive_logits(model: TinyDecoder, ids):
    """An independent reference: no cache, explicit causal softmax, GQA by repeating KV heads."""
    a, w = model.arch, model.weights
    S, n = ids.shape
    x = w["embed"][ids]
    pos = torch.arange(n, dtype=torch.float32)
    inv = 1.0 / (a.rope_theta ** (torch.arange(0, a.head_dim, 2, dtype=torch.float32) / a.head_dim))
    ang = torch.outer(pos, inv)
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)

    def rope(t):
        h = a.head_dim // 2
        return t * cos + torch.cat([-t[..., h:], t[..., :h]], -1) * sin

    def norm(t, g):
        return t / torch.sqrt((t * t).mean(-1, keepdim=True) + 1e-6) * g

    mask = torch.full((n, n), float("-inf")).triu(1)
    for layer in range(a.num_layers):
        p = f"layers.{layer}."
        h = norm(x, w[p + "attn_norm"])
        q = (h @ w[p + "wq"].T).view(S, n, a.num_heads, a.head_dim).transpose(1, 2)
        k = (h @ w[p + "wk"].T).view(S, n, a.num_kv_heads, a.head_dim).transpose(1, 2)
        v = (h @ w[p + "wv"].T).view(S, n, a.num_kv_heads, a.head_dim).transpose(1, 2)
        group = a.num_heads // a.num_kv_heads
        k, v = rope(k).repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        scores = rope(q) @ k.transpose(-1, -2) / math.sqrt(a.head_dim) + mask
        att = (scores.softmax(-1) @ v).transpose(1, 2).reshape(S, n, a.q_width)
        x = x + att @ w[p + "wo"].T
        h = norm(x, w[p + "mlp_norm"])
        g = h @ w[p + "w_gate"].T
        x = x + ((g * torch.sigmoid(g)) * (h @ w[p + "w_up"].T)) @ w[p + "w_down"].T
    return norm(x[:, -1], w["final_norm"]) @ w["lm_head"].T


def test_prefill_matches_a_naive_reference():
    arch = architecture(from_hf_config(TINY, name="tiny"))
    model = TinyDecoder.random(arch, "fp32", seed=1)
    ids = torch.randint(arch.vocab_size, (3, 12), generator=torch.Generator().manual_seed(2))
    got = model.prefill(ids, KVCache(arch, 3, 12))
    want = naive_logits(model, ids)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-4), f"max diff {(got - want).abs().max():.2e}"


def test_copied_kv_heads_give_the_same_logits():
    # The path used on GPUs where the fused kernel cannot read shared KV heads: same answer.
    arch = architecture(from_hf_config(TINY, name="tiny"))
    model = TinyDecoder.random(arch, "fp32", seed=5)
    model.native_gqa = False
    ids = torch.randint(arch.vocab_size, (2, 9), generator=torch.Generator().manual_seed(6))
    cache = KVCache(arch, 2, 10)
    got = model.prefill(ids, cache, chunk_tokens=4)
    assert torch.allclose(got, naive_logits(model, ids), atol=1e-5, rtol=1e-4)


def test_chunked_prefill_and_decode_use_the_cache_correctly():
    arch = architecture(from_hf_config(TINY, name="tiny"))
    model = TinyDecoder.random(arch, "fp32", seed=3)
    ids = torch.randint(arch.vocab_size, (2, 20), generator=torch.Generator().manual_seed(4))
    whole_cache = KVCache(arch, 2, 20)
    whole = model.prefill(ids, whole_cache)
    chunked_cache = KVCache(arch, 2, 20)
    chunked = model.prefill(ids, chunked_cache, chunk_tokens=6)       # 6 + 6 + 6 + 2 positions
    stepped_cache = KVCache(arch, 2, 20)
    model.prefill(ids[:, :17], stepped_cache)
    for pos in range(17, 20):
        stepped = model.decode(ids[:, pos:pos + 1], stepped_cache, pos)
    assert torch.allclose(whole, chunked, atol=1e-5) and torch.allclose(whole, stepped, atol=1e-5)
    assert torch.allclose(whole_cache.tensor, stepped_cache.tensor, atol=1e-5), "decode must fill the same cache"
    assert torch.allclose(whole_cache.tensor, chunked_cache.tensor, atol=1e-5)


def test_gemma_style_post_norms_and_qwen_style_biases_run():
    for extra in ({"model_type": "gemma2", "head_dim": 16, "sliding_window": 4096},
                  {"model_type": "qwen2"}):
        spec = from_hf_config({**TINY, **extra}, name=extra["model_type"])
        arch = architecture(spec)
        model = TinyDecoder.random(arch)
        assert sum(t.numel() for t in model.weights.values()) == spec.params_total
        logits = model.prefill(torch.zeros(1, 5, dtype=torch.long), KVCache(arch, 1, 5))
        assert logits.shape == (1, arch.vocab_size) and bool(torch.isfinite(logits).all())


def test_architecture_round_trips_through_json_dict():
    arch = architecture(get_model("course-tiny"))
    assert Architecture(**arch.to_dict()) == arch

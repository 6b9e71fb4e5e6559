"""Every decoder the installed transformers registers: our estimate against the model transformers builds.

The walk itself is :mod:`every_decoder` (each ``model_type`` shrunk, estimated by a formula or the
meta-device fallback, and checked against the oracle: parameters, buffers, KV per token per layer,
windows, per-sequence state). Here:

* no type may disagree with the model transformers builds (``mismatch``);
* every type ends as recorded in :data:`NOT_EXACT` (anything else is exact): a type that starts or
  stops passing fails this test until the record (and benchmarks/results/every-decoder.md) says so;
* every family with a formula is exact, formula and fallback alike, unless transformers cannot run
  its default config on the meta device.

The walk takes about a minute on 2 cores (282 types in worker processes), so its results are kept
in pytest's cache under a key made of the transformers and torch versions and the text of every
file it runs (course_lib/, oracle.py, every_decoder.py): any change to them runs it again.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path

import pytest

import every_decoder
import prefetch
from every_decoder import OUTCOMES, Result

NOT_DECODER = "not decoder-only"
NO_BUILD = "transformers cannot build its default config"
NO_RUN = "transformers cannot run it on the meta device"
REFUSED = "refused"

#: Every type whose outcome is not "exact", and why (the detail each Result carries says more).
NOT_EXACT = {
    # encoder-decoder families (their decoders appear in the causal-LM mapping for generation)
    **dict.fromkeys(["bart", "bigbird_pegasus", "blenderbot", "blenderbot-small", "florence2", "marian", "mbart",
                     "musicgen", "musicgen_melody", "mvp", "pegasus", "pix2struct", "plbart", "pp_formulanet",
                     "prophetnet", "t5gemma2", "udop", "vision-encoder-decoder", "whisper"], NOT_DECODER),
    # the default config is incomplete (None where the model needs a number), inconsistent, or needs timm
    **dict.fromkeys(["aya_vision", "chameleon", "cohere_compass", "cohere_compass_text", "dbrx", "deepseek_ocr2",
                     "diffusion_gemma", "dots1", "emu3", "evolla", "fast_vlm", "gemma3n", "gemma4_assistant",
                     "granite4_vision", "hunyuan_v1_dense", "hunyuan_v1_moe", "hunyuan_vl", "lfm2_moe", "ministral",
                     "nemotron", "perception_lm", "qwen4_exp", "qwen4_exp_text"], NO_BUILD),
    # data-dependent steps the meta device cannot take (.item(), nonzero), a forward that needs an image,
    # or a default config whose forward fails (no attention layer, mismatched sizes)
    **dict.fromkeys(["bamba", "big_bird", "biogpt", "blt", "deepseek_v2", "gemma4_unified_assistant", "glm46v",
                     "glm4v", "glm4v_moe", "glm5_next", "glmga", "granitemoehybrid", "idefics", "jetmoe",
                     "longcat_flash", "megatron-bert", "pi0", "qwen3_omni_moe_thinker", "reformer", "rembert",
                     "roformer", "step3p7", "xlm", "xlnet", "xlstm", "xmod"], NO_RUN),
    # our refusals, one line each: cache layer kinds not modelled (a reference
    # window, cpmant's prompt-prefixed keys), or no per-layer cache at all (RWKV and RecurrentGemma keep
    # their state outside transformers' Cache; GPT-1 keeps none)
    **dict.fromkeys(["cpmant", "openai-gpt", "recurrent_gemma", "rwkv", "unlimited_ocr"], REFUSED),
    # compressed attention: one entry every 4 or 128 tokens, beyond the oracle's short forwards
    "deepseek_v4": "cache checked apart",
}


def _cache_key() -> str:
    import torch
    import transformers

    digest = hashlib.sha256(f"{transformers.__version__} {torch.__version__}".encode())
    here = Path(every_decoder.__file__).resolve()
    files = sorted((here.parents[3] / "course_lib").rglob("*.py")) + [here, here.with_name("oracle.py")]
    for path in files:
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:24]


def _cached(config) -> list[dict] | None:
    """The walk's results saved in pytest's cache under today's key, or None."""
    store = getattr(config, "cache", None)                 # absent under -p no:cacheprovider
    saved = store.get("course_lib/every_decoder", {}) if store is not None else {}
    return saved.get("results") if isinstance(saved, dict) and saved.get("key") == _cache_key() else None


@prefetch.background("results", unless=lambda config: _cached(config) is not None)
def _walk(folder: Path) -> list[dict]:
    """The walk, in the session's background runner when it has started it (tests/prefetch.py)."""
    return [asdict(r) for r in every_decoder.walk()]


@pytest.fixture(scope="module")
def results(request, tmp_path_factory) -> dict[str, Result]:
    cached = _cached(request.config)
    if cached is None:
        cached = prefetch.result(request, _walk, tmp_path_factory.mktemp("walk"))
        store = getattr(request.config, "cache", None)
        if store is not None:                               # one entry, replaced when anything changes
            store.set("course_lib/every_decoder", {"key": _cache_key(), "results": cached})
    return {r["model_type"]: Result(**r) for r in cached}


def test_every_registered_decoder_is_walked(results):
    assert sorted(results) == every_decoder.decoder_types()
    assert len(results) > 250, "transformers 5.24 registers 282 causal-LM and image-text-to-text types"


def test_no_estimate_disagrees_with_the_model_transformers_builds(results):
    wrong = {t: r.detail for t, r in results.items() if r.outcome == "mismatch"}
    assert not wrong, f"our estimate differs from the built model for {len(wrong)} types: {wrong}"


def test_every_type_ends_as_recorded(results):
    changed = {t: (NOT_EXACT.get(t, "exact"), r.outcome, r.detail) for t, r in results.items()
               if r.outcome != NOT_EXACT.get(t, "exact")}
    assert not changed, ("outcomes differ from the record (recorded, now, detail); update NOT_EXACT and "
                         f"benchmarks/results/every-decoder.md: {changed}")
    assert set(NOT_EXACT) <= set(results), f"recorded types transformers no longer registers: " \
                                           f"{sorted(set(NOT_EXACT) - set(results))}"


def test_every_family_with_a_formula_agrees_with_the_fallback_and_the_built_model(results):
    from course_lib.model.families import supported

    ours = {t: r.outcome for t, r in results.items() if r.formula}
    assert set(ours) == set(supported()) & set(results)
    assert {t for t, o in ours.items() if o != "exact"} == {"deepseek_v2"}    # its default config: top-k None


def test_refusals_are_one_line(results):
    for t, r in results.items():
        assert r.outcome in OUTCOMES
        if r.outcome == REFUSED:
            assert "\n" not in r.detail and r.detail, t


def test_most_types_are_exact(results):
    exact = sum(r.outcome == "exact" for r in results.values())
    decoders = sum(r.outcome != NOT_DECODER for r in results.values())
    assert exact >= 200 and exact / decoders > 0.75, f"{exact} of {decoders} decoder-only types exact"

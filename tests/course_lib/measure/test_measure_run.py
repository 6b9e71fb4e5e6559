"""course_lib.measure.run: real measurements in a fresh process, checked against the OS, not the prediction.

Kept small for CI (tens of MB per pool, a few seconds per process). At this scale a few MB of
allocator and library overhead are a visible share, so the tolerances below are wider than the
benchmark's +-3% at 200 MB+ (benchmarks/bench_measure.py).
"""

from __future__ import annotations

import json

import pytest

from course_lib.errors import CourseInputError
from course_lib.model.models import from_hf_config
from course_lib.units import MB, MiB

pytest.importorskip("torch")

from course_lib.measure import MeasureResult, measure_pools  # noqa: E402
from course_lib.measure.run import PoolComparison, predict_pools  # noqa: E402

# ~20M parameters (80 MB fp32); 4 sequences x 1024 tokens of KV = 16.8 MB; prefill peak ~60 MB.
CI_CONFIG = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32000}
PARAMS = 2 * 32000 * 256 + 4 * (2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 1024 + 2 * 256) + 256
KV_BYTES_PER_TOKEN = 2 * 4 * 2 * 64 * 4      # k+v x layers x kv_heads x head_dim x fp32
SEQUENCES, CONTEXT = 4, 1024

TOL = {"weights": 0.03, "kv_cache": 0.03, "workspace": 0.15}   # of the hand-computed / predicted size


@pytest.fixture(scope="module")
def spec():
    return from_hf_config(CI_CONFIG, name="ci-small")


@pytest.fixture(scope="module")
def measured(spec) -> MeasureResult:
    return measure_pools(spec, SEQUENCES, CONTEXT, "cpu", progress=False)


@pytest.fixture(scope="module")
def doubled(spec) -> MeasureResult:
    """Twice the sequences, no prefill, and one extra 32 MiB buffer allocated beside the weights."""
    return measure_pools(spec, 2 * SEQUENCES, CONTEXT, "cpu", run_prefill=False, progress=False,
                         extra_bytes=32 * MiB)


def test_weights_measured_match_bytes_computed_by_hand(measured):
    hand = PARAMS * 4
    got = measured.pool("weights").measured_bytes
    assert abs(got - hand) <= TOL["weights"] * hand, (
        f"RSS grew {got:,} B when the weights were built; {PARAMS:,} fp32 params are {hand:,} B")


def test_kv_cache_measured_matches_bytes_computed_by_hand(measured):
    hand = SEQUENCES * CONTEXT * KV_BYTES_PER_TOKEN
    got = measured.pool("kv_cache").measured_bytes
    assert abs(got - hand) <= TOL["kv_cache"] * hand, f"RSS grew {got:,} B for a {hand:,} B KV cache"


def test_workspace_is_near_the_activation_peak(measured):
    ws = measured.pool("workspace")
    assert ws.measured_bytes > 0, "prefill must raise the peak RSS above the level before it"
    assert abs(ws.error_pct) <= TOL["workspace"] * 100, (
        f"prefill peak {ws.measured_bytes:,} B vs activation_peak_bytes {ws.predicted_bytes:,} B")


def test_doubling_sequences_doubles_the_measured_kv_cache(measured, doubled):
    ratio = doubled.pool("kv_cache").measured_bytes / measured.pool("kv_cache").measured_bytes
    assert 1.9 <= ratio <= 2.1, f"{2 * SEQUENCES} sequences measured {ratio:.3f}x the KV cache of {SEQUENCES}"


def test_measured_values_come_from_the_os_not_the_prediction(measured, doubled):
    # Same model, same weights prediction; the worker also allocated 32 MiB more beside the weights.
    assert doubled.pool("weights").predicted_bytes == measured.pool("weights").predicted_bytes
    grew = doubled.pool("weights").measured_bytes - measured.pool("weights").measured_bytes
    assert abs(grew - 32 * MiB) <= 2 * MiB, f"an extra 32 MiB buffer should show up in RSS; it moved {grew:,} B"
    # And the worker never sees the prediction: its raw figures hold no predicted bytes.
    assert not any("predicted" in key for key in measured.details)


def test_measurement_differs_from_a_deliberately_wrong_prediction(spec, measured):
    wrong = predict_pools(spec, SEQUENCES, CONTEXT, "fp16", "fp16", SEQUENCES * (CONTEXT - 2))
    assert measured.pool("weights").measured_bytes > 1.9 * wrong["weights"][0], "fp32 weights are twice fp16"


def test_result_table_and_json(measured):
    text = measured.table()
    for word in ("weights", "kv_cache", "workspace", "total", "predicted", "measured", "%", "MB = 10^6"):
        assert word in text
    data = json.loads(json.dumps(measured.to_dict()))
    assert data["device"] == "cpu"
    for pool in ("weights", "kv_cache", "workspace"):
        assert isinstance(data["pools"][pool]["predicted_bytes"], int)
        assert isinstance(data["pools"][pool]["measured_bytes"], int)
    assert data["runtime_bytes"] > 50 * MB, "python + torch take real RSS before any model"
    assert data["details"]["logits_finite"] is True


def test_total_is_peak_over_baseline(measured):
    parts = sum(measured.pool(p).measured_bytes for p in ("weights", "kv_cache"))
    assert measured.total.measured_bytes >= parts, "the peak includes at least weights + KV cache"


def test_error_pct_by_hand():
    assert PoolComparison("x", 97, 100).error_pct == -3.0
    assert PoolComparison("x", 110, 100).error_pct == 10.0
    assert PoolComparison("x", 5, 0).error_pct != PoolComparison("x", 5, 0).error_pct   # nan


@pytest.mark.parametrize("kwargs, message", [
    ({"sequences": 0}, "sequences=0"),
    ({"context_tokens": 2}, "context_tokens=2"),            # must exceed decode_tokens=2
    ({"dtype": "int4"}, "fp32, fp16 or bf16"),
    ({"malloc": "jemalloc"}, "mmap or default"),
    ({"prefill_chunk_tokens": 0}, "prefill_chunk_tokens=0"),
    ({"device": "tpu"}, "auto, cpu or cuda"),
])
def test_bad_input_is_refused_before_measuring(spec, kwargs, message):
    args = {"sequences": 1, "context_tokens": 64, "device": "cpu", **kwargs}
    with pytest.raises(CourseInputError, match=message):
        measure_pools(spec, progress=False, **args)


def test_sliding_window_beyond_the_cache_is_refused():
    mistral = from_hf_config({**CI_CONFIG, "model_type": "mistral", "sliding_window": 128}, name="m")
    with pytest.raises(CourseInputError, match="sliding window of 128"):
        measure_pools(mistral, 1, 256, "cpu", progress=False)


def test_too_big_for_this_machine_is_refused_like_admission_control():
    # llama-3-70b in fp32 is 282 GB of weights, plus 2.6 TB of KV cache: no machine offers that.
    with pytest.raises(CourseInputError, match="available"):
        measure_pools("llama-3-70b", 1000, 8192, "cpu", progress=False)

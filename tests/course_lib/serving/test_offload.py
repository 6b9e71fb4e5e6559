"""Offload arithmetic against hand-worked figures and published link rates."""

from __future__ import annotations

import json

import pytest

from course_lib.errors import CourseInputError
from course_lib.serving.offload import (LINKS, get_link, offload_weights, prefill_flops, recompute_seconds, swap_seconds,
                                swap_vs_recompute, transfer_seconds)

GB = 10**9


def test_link_presets_are_per_direction():
    # PCIe x16 per direction, theoretical: Gen4 31.5 GB/s, Gen5 63.0 GB/s (vendors' 64/128 count both ways).
    assert LINKS["pcie-gen4-x16"].bytes_per_s == 31_500_000_000
    assert LINKS["pcie-gen5-x16"].bytes_per_s == 63_000_000_000
    # NVLink totals V100 300, A100 600, H100 900 GB/s are both directions: half each way.
    assert [LINKS[k].bytes_per_s for k in ("nvlink-v100", "nvlink-a100", "nvlink-h100")] == [150e9, 300e9, 450e9]
    # the Gen4 figure from first principles: 16 GT/s x 16 lanes x 128/130 (encoding) / 8 bits = 31.5 GB/s
    assert 16e9 * 16 * 128 / 130 / 8 == pytest.approx(31.5e9, rel=1e-3)


def test_ten_gb_over_pcie_gen4_by_hand():
    # the lesson's point: 10e9 / 31.5e9 = 0.317 s added to every decode step at 100% efficiency
    assert transfer_seconds(10 * GB, "pcie-gen4-x16", efficiency=1.0) == pytest.approx(0.3175, abs=1e-4)
    # at the default 80%: 10e9 / 25.2e9 = 0.397 s
    assert transfer_seconds(10 * GB, "pcie-gen4-x16") == pytest.approx(0.3968, abs=1e-4)
    # Gen5 halves it: 10e9 / 63e9 = 0.159 s
    assert transfer_seconds("10GB", "pcie-gen5-x16", efficiency=1.0) == pytest.approx(0.1587, abs=1e-4)


def test_offloaded_weights_cost_every_step_and_free_capacity():
    w = offload_weights("10GB", link="pcie-gen4-x16", efficiency=1.0, hbm="a100-80gb", kv_bytes_per_token=131_072)
    assert w.added_step_s >= 0.3, "10 GB over PCIe Gen4 adds roughly 0.3 s or more to every decode step"
    # the same bytes from A100-80GB HBM (2,039 GB/s): 10 / 2039 = 4.9 ms, about 65x faster than the link
    assert w.on_device_step_s == pytest.approx(10 / 2039, rel=1e-6)
    assert w.slowdown == pytest.approx(2039 / 31.5, rel=1e-6)
    # 10e9 B / 131,072 B per token = 76,293 whole tokens of KV freed
    assert w.kv_tokens_freed == 76_293


def test_swap_and_recompute_by_hand():
    # Llama-2-7B fp16: 524,288 B/token x 2,048 tokens = 1,073,741,824 B (exactly 1 GiB) of KV
    kv = 524_288 * 2048
    # swap out and back in over PCIe Gen4 at 80%: 2 x 1,073,741,824 / 25.2e9 = 0.0852 s
    assert swap_seconds(kv) == pytest.approx(2 * 1_073_741_824 / 25.2e9)
    # recompute: 2 x 6,738,415,616 params x 2,048 tokens = 2.76e13 FLOP; at 50% of 312e12 = 0.177 s
    assert prefill_flops(6_738_415_616, 2048) == 27_600_550_363_136
    assert recompute_seconds(6_738_415_616, 2048, "a100", 0.5) == pytest.approx(27_600_550_363_136 / 156e12)
    r = swap_vs_recompute(2048, 524_288, 6_738_415_616)
    assert (r.kv_bytes, r.cheaper) == (1_073_741_824, "swap")
    assert r.ratio == pytest.approx((27_600_550_363_136 / 156e12) / (2 * 1_073_741_824 / 25.2e9))
    # on a slow link (1 GB/s) the same sequence is cheaper to recompute: 2.15 s of copies vs 0.18 s
    assert swap_vs_recompute(2048, 524_288, 6_738_415_616, link="1GB", efficiency=1.0).cheaper == "recompute"


def test_custom_link_rate():
    assert get_link("25GB").bytes_per_s == 25 * GB
    assert transfer_seconds("25GB", "25GB", efficiency=1.0) == pytest.approx(1.0)


@pytest.mark.parametrize("call, words", [
    (lambda: get_link("pcie9"), "link='pcie9'"),
    (lambda: get_link("0GB"), "link='0GB' is 0 B/s"),
    (lambda: transfer_seconds("1GB", efficiency=0), "efficiency=0"),
    (lambda: transfer_seconds("1GB", efficiency=1.5), "efficiency=1.5"),
    (lambda: recompute_seconds(1, 1, flops="abc"), "flops='abc'"),
    (lambda: recompute_seconds(1, 1, mfu=0), "mfu=0"),
    (lambda: offload_weights("1GB", hbm="hbm9"), "hbm='hbm9'"),
    (lambda: swap_vs_recompute(0, 1, 1), "tokens=0"),
])
def test_bad_input_names_the_value(call, words):
    with pytest.raises(CourseInputError, match=words.replace("(", r"\(")):
        call()


def test_recompute_runs_through_the_active_parameters_of_a_mixture_of_experts():
    # Mixtral-8x7B: 12.9B active (Mistral's figure) of 46.7B; DeepSeek-V3: 37B active (its model card)
    from course_lib.model.models import active_params
    from course_lib.model.presets import get_model
    assert abs(active_params(get_model("mixtral-8x7b")) / 12.9e9 - 1) < 0.01
    assert abs(active_params(get_model("deepseek-v3")) / 37e9 - 1) < 0.02
    assert active_params(get_model("llama-3-8b")) == 8_030_261_248


def test_offload_cli_recomputes_mixtral_through_its_active_parameters(capsys):
    from course_lib.cli import main
    assert main(["offload", "--model", "mixtral-8x7b", "--tokens", "2048", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["swap_vs_recompute"]
    # 2 x 12,879,925,248 active params x 2,048 tokens = 5.28e13 FLOP (not 2 x 46.7e9 x 2,048 = 1.91e14)
    assert data["recompute_flops"] == 2 * 12_879_925_248 * 2048


def test_swap_against_recompute_ratio_does_not_depend_on_length():
    # both costs are linear in tokens here, so the docstring's claim is that the ratio is the same at any length
    short = swap_vs_recompute(128, 131_072, 8_030_261_248)
    long = swap_vs_recompute(32768, 131_072, 8_030_261_248)
    assert short.cheaper == long.cheaper and abs(short.ratio - long.ratio) < 1e-9

"""Every release up to today's, as data: each figure here is read from that release's own source file.

The sources: the vLLM wheels of each release (``pip download vllm==0.X.0 --no-deps``), the files named in
``course_lib/runtimes/vllm/releases.py``; SGLang's and TensorRT-LLM's in their modules.
"""

from __future__ import annotations

import json

import pytest

from course_lib.errors import CourseInputError
from course_lib.model.presets import get_model
from course_lib.runtimes import VllmLaunch, estimate_vllm
from course_lib.runtimes.releases import History
from course_lib.runtimes.vllm.estimate import capture_sizes, resolve
from course_lib.runtimes.vllm.releases import HISTORY
from tests.course_lib.cli.test_cli_runtime import run


def test_every_row_cites_its_release_and_the_first_row_defines_every_rule():
    first = set(HISTORY.changes[0].sets)
    for row in HISTORY.changes:
        assert row.since in row.source or row.since.rsplit(".", 1)[0] in row.source, row.since
        assert set(row.sets) <= first
    assert [str(v) for v in HISTORY.known[:1] + HISTORY.known[-1:]] == ["0.5.0", "0.33.0"]


def test_vllm_033_is_the_default_and_says_which_rules_no_log_checks(capsys):
    rc, out, err = run(["estimate", "--model", "llama-3.1-8b", "--gpu", "b200", "--runtime", "vllm",
                        "--max-model-len", "8192", "--json"], capsys)
    assert rc == 0, err
    data = json.loads(out)
    assert data["runtime_version"] == "0.33.0" and data["checked_by_log"] is False
    # read from 0.28's arg_utils.py / 0.33's config/vllm.py, checked by no log
    assert any(r.startswith("batch_defaults (0.33.0") for r in data["unchecked_rules"])
    assert any(r.startswith("v2_runner_architectures (0.29.0") for r in data["unchecked_rules"])
    rc, text, _ = run(["estimate", "--model", "llama-3.1-8b", "--gpu", "b200", "--runtime", "vllm",
                       "--max-model-len", "8192", "--vllm-version", "0.33"], capsys)
    assert rc == 0 and "not checked by a log: batch_defaults (0.33.0" in text


def test_a_release_checked_by_logs_says_so(capsys):
    rc, out, _ = run(["estimate", "--model", "qwen2-7b", "--gpu", "a100-80gb", "--runtime", "vllm",
                      "--vllm-version", "0.10.1", "--max-model-len", "16384", "--json"], capsys)
    data = json.loads(out)
    assert rc == 0 and data["checked_by_log"] is True and data["unchecked_rules"] == []


@pytest.mark.parametrize("version", ["0.34", "0.4.2", "1.0"])
def test_an_unknown_vllm_release_is_one_line_listing_the_known_ones(version, capsys):
    rc, out, err = run(["estimate", "--model", "llama-3.1-8b", "--runtime", "vllm", "--vllm-version", version],
                       capsys)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1, err
    assert f"--vllm-version='{version}'" in err and "0.5, 0.6," in err and "0.32, 0.33" in err


def test_batch_defaults_by_release_on_a_160_gib_gpu():
    # vllm/engine/arg_utils.py get_batch_defaults: 0.27 puts a B200 in the >= 70 GiB tier (serve: 8,192 tokens);
    # 0.28 adds ">= 160GB memory ... use the largest defaults" (16,384 tokens for serve and LLM, 1,024 sequences)
    spec = get_model("llama-3.1-8b")
    old, _ = resolve(spec, "b200", VllmLaunch(version="0.27.0", max_model_len=8192))
    new, why = resolve(spec, "b200", VllmLaunch(version="0.28.0", max_model_len=8192))
    assert (old.max_num_batched_tokens, old.max_num_seqs) == (8192, 1024)
    assert (new.max_num_batched_tokens, new.max_num_seqs) == (16384, 1024)
    assert ">= 160 GiB" in why["max_num_seqs"]
    h100, _ = resolve(spec, "h100-80gb", VllmLaunch(version="0.33.0", max_model_len=8192))
    assert h100.max_num_batched_tokens == 8192


def test_capture_sizes_follow_each_release():
    # vllm/config/vllm.py _set_cudagraph_sizes: [1, 2, 4] + range(8, min(cap + 1, 256), 8) + range(256, cap + 1, 16)
    r = HISTORY.at
    assert capture_sizes(r("0.27.0"), "V1", 1024, 8192, "b200") == 3 + 31 + 17              # cap 512
    assert capture_sizes(r("0.28.0"), "V1", 1024, 8192, "b200") == 3 + 31 + 49              # cap 1,024 on sm100
    assert capture_sizes(r("0.28.0"), "V1", 1024, 8192, "h100-80gb") == 51
    # max_num_seqs 100: cap 200 -> 1, 2, 4 and 8..200 (25 sizes); 0.31 also captures 100 itself
    assert capture_sizes(r("0.30.0"), "V1", 100, 2048) == 28
    assert capture_sizes(r("0.31.0"), "V1", 100, 2048) == 29
    # 0.31: the grid stops at max_num_batched_tokens (100), which is captured: 1, 2, 4, 8..96, 100
    assert capture_sizes(r("0.31.0"), "V1", 256, 100) == 3 + 12 + 1


def test_rocm_graphs_are_estimated_in_the_budget_only_from_026():
    # gpu_worker.py determine_available_memory: 0.21-0.25 only `current_platform.is_cuda()` ("Skip on ROCm/HIP/XPU"),
    # 0.26 `is_cuda_alike()` ("ROCm is included: #44825"). A MoE model: the V1 model runner serves it in both (a dense
    # one runs the V2 runner from 0.25, whose estimate was a stub returning 0 until 0.29).
    spec = get_model("qwen3-30b-a3b")
    signs = {}
    for version in ("0.23.0", "0.26.0"):
        est = estimate_vllm(spec, gpu="mi300x", launch=VllmLaunch(version=version, max_model_len=8192))
        signs[version] = next(t.sign for t in est.terms if t.name == "cuda_graph")
    assert signs == {"0.23.0": 0, "0.26.0": -1}
    cuda = estimate_vllm(spec, gpu="h100-80gb", launch=VllmLaunch(version="0.23.0", max_model_len=8192))
    assert next(t.sign for t in cuda.terms if t.name == "cuda_graph") == -1


def test_the_v2_model_runner_by_release_and_architecture():
    # vllm/config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES: Llama in 0.23-0.24, out of the list in 0.25, but
    # 0.25.0's _is_default_v2_model_runner_model (:571-573) adds 'or not model_config.is_moe': a dense model stays
    # on V2 (review 3's M2); every architecture from 0.29
    spec = get_model("llama-3.1-8b")
    runner = {v: estimate_vllm(spec, gpu="h100-80gb", launch=VllmLaunch(version=v, max_model_len=8192))
              .launch["model_runner"] for v in ("0.22.0", "0.23.0", "0.25.0", "0.29.0")}
    assert runner == {"0.22.0": "V1", "0.23.0": "V2", "0.25.0": "V2", "0.29.0": "V2"}


def test_a_history_refuses_rules_its_first_row_does_not_define():
    from course_lib.runtimes.releases import Change
    with pytest.raises(AssertionError):
        History("x", (Change("0.1", {"a": 1}, "f (0.1)"), Change("0.2", {"b": 2}, "f (0.2)")), ("0.1", "0.2"))
    with pytest.raises(CourseInputError, match="use one of 0.1, 0.2"):
        History("x", (Change("0.1", {"a": 1}, "f (0.1)"),), ("0.1", "0.2")).at("0.3")


def test_sglang_defaults_by_release_on_an_l4():
    # L4: 22.03 GiB = 22,558.72 MiB. server_args.py: reserved = 512 + 1.5 x max(chunk, 2048) + 2 x cuda_graph_max_bs
    # + TP x PP / 8 x 1,024 MiB; from 0.5.10 + 8 MiB per prefill graph size (42 up to 2,048 tokens, 50 up to 4,096);
    # from 0.5.20 (arg_groups/memory_hook.py) a 20-35 GiB GPU takes chunk 4,096 and max_bs 48 at TP < 4.
    from course_lib.runtimes import SglangLaunch, estimate_sglang
    spec = get_model("qwen2-7b")
    share = {}
    for version in ("0.5.9", "0.5.19", "0.5.23"):
        est = estimate_sglang(spec, gpu="l4", launch=SglangLaunch(version=version, context_length=4096, dtype="int4"))
        share[version] = (est.launch["mem_fraction_static"], est.launch["chunked_prefill_size"],
                          est.launch["cuda_graph_max_bs"])
    assert share["0.5.9"] == (round((22558.72 - (512 + 3072 + 48 + 128)) / 22558.72, 3), 2048, 24) == (0.833, 2048, 24)
    assert share["0.5.19"] == (round((22558.72 - (3760 + 42 * 8)) / 22558.72, 3), 2048, 24)
    assert share["0.5.23"] == (round((22558.72 - (512 + 6144 + 96 + 128 + 50 * 8)) / 22558.72, 3), 4096, 48) \
        == (0.677, 4096, 48)


def test_sglang_and_trtllm_defaults_are_the_newest_and_unknown_ones_are_refused(capsys):
    rc, out, err = run(["estimate", "--model", "qwen2-7b", "--gpu", "h100-80gb", "--runtime", "sglang",
                        "--max-model-len", "8192", "--json"], capsys)
    assert rc == 0 and json.loads(out)["runtime_version"] == "0.5.23", err
    rc, out, err = run(["estimate", "--model", "qwen2-7b", "--runtime", "sglang", "--sglang-version", "0.5.24"], capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and "0.5.22, 0.5.23" in err, err
    rc, out, err = run(["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--runtime", "trtllm",
                        "--max-model-len", "8192", "--json"], capsys)
    data = json.loads(out)
    assert rc == 0 and data["runtime_version"] == "1.2.1" and data["checked_by_log"] is False, err
    assert any("source was not read" in n for n in data["notes"])
    rc, out, err = run(["estimate", "--model", "llama-3.1-8b", "--runtime", "trtllm", "--trtllm-version", "1.3"],
                       capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and "1.2.0, 1.2.1" in err, err


def test_each_step_of_the_estimate_reads_alone():
    # The visible A100 log (vLLM 0.10.1.1, Qwen2-7B, utilization 0.25, max_model_len 16,384): 79.25 GiB x 0.25 is
    # the budget; the log's "Available KV cache memory: 5.01 GiB", "num_gpu_blocks is: 5867"
    from course_lib.runtimes.profile import stages
    from course_lib.runtimes.vllm.estimate import context, kv_available, kv_layouts, profile_terms, refusal
    spec = get_model("qwen2-7b")
    ctx, why = context(spec, "a100-80gb", VllmLaunch(version="0.10.1", gpu_memory_utilization=0.25,
                                                     max_model_len=16384))
    assert ctx.rules.tokens_rule == "blocks" and "max_num_seqs" in why
    stage_list = stages(spec)
    terms = profile_terms(ctx, stage_list[0])
    assert [t.name for t in terms] == ["budget", "weights", "activation_peak", "non_torch", "cuda_graph"]
    assert terms[0].bytes == int(79.25 * 2**30 * 0.25)
    available = kv_available(ctx, terms)
    assert abs(available / 2**30 - 5.01) < 0.1
    layout = kv_layouts(ctx, stage_list)[0]
    assert layout.bytes_per_block == 16 * 2 * 4 * 128 * 2 * 28          # a page of 16 tokens in each of 28 layers
    assert abs(available // layout.bytes_per_block - 5867) < 5867 * 0.02
    assert refusal(ctx, stage_list, 0, available, 0) is None
    assert "max seq len (16384)" in refusal(ctx, stage_list, 0, 10 * 2**20, 0)


def test_the_v2_runner_subtracts_no_graph_estimate_in_025_to_028():
    # Review 3's M2. vllm/config/vllm.py (0.25.0:571-573, 0.28.0:712): '... or not model_config.is_moe', so every dense
    # model runs the V2 model runner, whose profile_cudagraph_memory is 'return 0' (vllm/v1/worker/gpu/model_runner.py
    # 0.25.0:680-682, 0.28.0:843-845; a measured capture from 0.29.0:896-898). Llama-3.1-8B on an RTX 4090 at 8k:
    # the reviewer's hand figure is "about 6.17 GiB" with nothing taken for graphs (5.29 GiB with the V1 runner's 0.88).
    spec = get_model("llama-3.1-8b")
    kv = {}
    for version in ("0.24.0", "0.25.0", "0.28.0", "0.29.0"):
        est = estimate_vllm(spec, gpu="rtx-4090", launch=VllmLaunch(version=version, max_model_len=8192))
        graph = next(t for t in est.terms if t.name == "cuda_graph")
        kv[version] = (graph.sign, round(est.runtime_kv_cache_bytes / 2**30, 2), est.launch["model_runner"])
    assert kv["0.25.0"][0] == kv["0.28.0"][0] == 0 and kv["0.29.0"][0] == -1, kv
    assert {v[2] for v in kv.values()} == {"V2"}, kv
    assert abs(kv["0.25.0"][1] - 6.17) < 0.03, kv
    assert kv["0.29.0"][1] < kv["0.28.0"][1] - 0.5, kv


def test_a_releases_rules_are_a_typed_frozen_dataclass():
    # Issue 40, item 4: rules are fields (a misspelled name fails where it is read), enums where a rule is one of a
    # few words, filled from the table
    import dataclasses

    from course_lib.runtimes.vllm.releases import BatchTier, GraphEstimate, InFlight, Sampler, TokensRule, VllmRules
    r = HISTORY.at("0.33.0")
    assert isinstance(r, VllmRules) and dataclasses.is_dataclass(r)
    assert r.batch_defaults is BatchTier.BY_MEMORY_160_NO_GB10 and r.tokens_rule is TokensRule.CONCURRENCY
    assert r.sampler["cuda"] is Sampler.FLASHINFER and r.sliding_in_flight is InFlight.MAX_IN_FLIGHT
    assert HISTORY.at("0.25.0").v2_graph_estimate is GraphEstimate.STUB_0
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.tokens_rule = TokensRule.BLOCKS
    with pytest.raises(AttributeError):
        r.tokens_rul      # noqa: B018
    assert set(VllmRules.rule_names()) == set(HISTORY.changes[0].sets)
    # every runtime's rules are fields, none read through a string lookup
    from course_lib.runtimes.releases import TypedRules
    from course_lib.runtimes.sglang import HISTORY as SGLANG, MemFraction
    from course_lib.runtimes.trtllm import HISTORY as TRTLLM
    assert "__getattr__" not in vars(TypedRules)
    assert SGLANG.at("0.5.5").mem_fraction is MemFraction.RESERVED and SGLANG.at("0.4.3").mem_fraction is MemFraction.BY_TP
    assert TRTLLM.at("0.19").tokens_per_block == 32 and dataclasses.is_dataclass(TRTLLM.at("0.19"))


def test_no_version_comparison_lives_outside_the_release_tables():
    # Issue 40: five comparisons lived outside the table (vllm_sched, logs, sglang, CPU_RELEASE, SCHEDULER_RELEASES)
    import re
    from pathlib import Path

    import course_lib
    root = Path(course_lib.__file__).parent
    found = []
    for path in root.rglob("*.py"):
        if path.name == "versions.py":      # the one parser itself (a development build "0.1.devN" says nothing)
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith(">>>"):
                continue
            if re.search(r"(>=|<=|<|>|==|!=)\s*(Version\(|\(\d+, \d+(, \d+)?\))", line):
                found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    assert found == [], found

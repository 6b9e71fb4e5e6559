"""DFlash as vLLM 0.20-0.22 counts it, against set_2026's two DFlash start-up logs and hand-worked figures from vLLM's
source (0.20.2: gpu_worker.py, gpu_model_runner.py ``profile_cudagraph_memory``, kv_cache_utils.py
``_get_kv_cache_groups_uniform_page_size``, spec_decode/dflash.py; 0.33.0 for today's rule)."""

from pathlib import Path

from course_lib.model.models import from_hf_config
from course_lib.model.presets import get_model
from course_lib.runtimes import VllmLaunch, estimate_vllm
from course_lib.runtimes.vllm.kv_groups import kv_layout
from course_lib.runtimes.vllm.spec import (drafter, padding_warnings, parse_speculative_config, profiled_graph_bytes,
                                           with_drafter)

REPO = Path(__file__).resolve().parents[4]
HUB = REPO / "benchmarks/runtime_logs/set_2026/hub_cache/hub"
MiB, GiB = 1 << 20, 1 << 30
A800_DFLASH = '{"method": "dflash", "model": "/data/xxx/models/Qwen3.6-35B-A3B-Dflash/", "num_speculative_tokens": 6}'
RTX4090_DFLASH = '{"method": "dflash", "model": "~/.cache/huggingface/qwen3.6-27b-dflash", "num_speculative_tokens": 5}'


def _target(repo: str):
    return from_hf_config(next((HUB / f"models--{repo.replace('/', '--')}").glob("snapshots/*/config.json")),
                          name=repo)


def test_graph_estimate_leaves_the_budget_from_020():
    # vllm/envs.py: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "0" in 0.19.1 and "1" in 0.20.0, and
    # gpu_worker.py (0.20.2) subtracts it. The A800 0.20.2 log agrees: "--gpu-memory-utilization=0.6200 is equivalent
    # to 0.5413 without CUDA graph memory profiling": (0.62 - 0.5413) x 79.25 GiB (an 80 GB A100/A800) = 6.24 GiB,
    # the "Estimated CUDA graph memory" it printed.
    assert abs((0.62 - 0.5413) * 79.25 - 6.24) < 0.01
    spec = get_model("qwen3-30b-a3b")
    signs = {v: next(t.sign for t in estimate_vllm(spec, gpu="a100-80gb", launch=VllmLaunch(
        version=v, max_model_len=8192)).terms if t.name == "cuda_graph") for v in ("0.19.1", "0.20.0", "0.20.2")}
    assert signs == {"0.19.1": 0, "0.20.0": -1, "0.20.2": -1}


def test_profiled_graph_estimate_is_max_first_plus_per_graph_times_the_rest():
    # profile_cudagraph_memory: max(first captures) + sum(max(second sample, 1 MiB) x (graphs - 1)). The A800 log's
    # counts: PIECEWISE=38, FULL=22. A first capture of 512 MiB and second samples of 0 (floored to 1 MiB) and 4 MiB:
    # 512 + 37 x 1 + 21 x 4 = 633 MiB.
    assert profiled_graph_bytes({"PIECEWISE": 512 * MiB, "FULL": 100 * MiB}, {"PIECEWISE": 0, "FULL": 4 * MiB},
                                {"PIECEWISE": 38, "FULL": 22}) == 633 * MiB
    # no FULL graphs (cudagraph_mode PIECEWISE): that mode is left out, not counted as one graph
    assert profiled_graph_bytes({"PIECEWISE": 512 * MiB}, {"PIECEWISE": 2 * MiB}, {"PIECEWISE": 3, "FULL": 0}) \
        == 516 * MiB


def test_a_local_dflash_folder_named_as_published_counts_its_weights():
    # z-lab/Qwen3.6-35B-A3B-DFlash's config: 8 layers of hidden 2048, 32 x 128 query and 4 x 128 KV heads, MLP 6144,
    # fc from 5 target layers. Per layer: q 2048x4096 + k, v 2 x 2048x512 + o 4096x2048 + MLP 3 x 2048x6144 + norms
    # 2 x 2048 + 2 x 128 = 56,627,456; x 8 + final norm 2048 + fc 5 x 2048 x 2048 + hidden_norm 2048 = 473,995,264
    target = _target("Qwen/Qwen3.6-35B-A3B-FP8")
    d = drafter(target, parse_speculative_config(A800_DFLASH, strict=False))
    assert d.params == 8 * 56_627_456 + 2048 + 5 * 2048 * 2048 + 2048 == 473_995_264
    assert len(d.layers) == 8 and "taken as the published z-lab/Qwen3.6-35B-A3B-DFlash" in d.note
    # z-lab/Qwen3.6-27B-DFlash: 5 layers of 5120 (32/8 heads of 128, MLP 17408), fc from 5 layers. Its F16 GGUF is
    # 3,310.7 MiB (a published conversion, which adds the tokenizer): ours, in bf16, within 0.5% of it
    d27 = drafter(_target("Lorbus/Qwen3.6-27B-int4-AutoRound"), parse_speculative_config(RTX4090_DFLASH, strict=False))
    assert d27.params == 5 * 319_826_176 + 5120 + 5 * 5120 * 5120 + 5120
    assert abs(2 * d27.params / MiB / 3310.7 - 1) < 0.005


def test_an_unknown_local_drafter_says_its_weights_are_not_counted():
    sd = parse_speculative_config('{"method": "dflash", "model": "/models/my-own-drafter", '
                                  '"num_speculative_tokens": 4}', strict=False)
    d = drafter(get_model("llama-3.1-8b"), sd)
    assert d.params == 0 and d.layers == ()
    assert "drafter weights not counted: its config is not known" in d.note


def test_drafter_layers_make_their_own_kv_group_and_padding_as_logged():
    # vLLM buckets layers by KV spec: Qwen3.6-35B-A3B's 30 GDN, 10 full (2 x 256) and the drafter's 8 full (4 x 128)
    # layers; group size min(30, 10, 8) = 8; 30 -> 4 groups (2 padding, 2/30 = 6.67%), 10 -> 2 groups (6 padding,
    # 60%), 8 -> 1: set_2026's A800 log prints exactly these two lines
    spec = with_drafter(_target("Qwen/Qwen3.6-35B-A3B-FP8"), parse_speculative_config(A800_DFLASH, strict=False))
    lay = kv_layout(spec, kv_bytes=2, block_size=16, max_model_len=8192, max_in_flight_tokens=2048,
                    state_layers=len(spec.states))
    assert sorted(padding_warnings(lay)) == ["Add 2 padding layers, may waste at most 6.67% KV cache memory",
                                             "Add 6 padding layers, may waste at most 60.00% KV cache memory"]
    assert len(lay.groups) == 4 + 2 + 1
    # Qwen3.6-27B (48 GDN, 16 full) + its 5-layer drafter: groups of 5, as club-3090 PR #96's 0.20 log prints
    # ("Add 2 padding layers, ... 4.17%", "Add 4 padding layers, ... 25.00%")
    spec27 = with_drafter(_target("Lorbus/Qwen3.6-27B-int4-AutoRound"),
                          parse_speculative_config(RTX4090_DFLASH, strict=False))
    lay27 = kv_layout(spec27, kv_bytes=2, block_size=16, max_model_len=8192, max_in_flight_tokens=2048,
                      tensor_parallel=2, state_layers=len(spec27.states))
    assert sorted(padding_warnings(lay27)) == ["Add 2 padding layers, may waste at most 4.17% KV cache memory",
                                               "Add 4 padding layers, may waste at most 25.00% KV cache memory"]


def test_from_log_says_when_the_drafter_is_not_counted(capsys, tmp_path, monkeypatch):
    from cli_support import run_cli
    monkeypatch.setenv("HF_HOME", str(HUB.parent))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    log = (REPO / "benchmarks/runtime_logs/set_2026/logs"
           / "vllm-qwen36-35b-a3b-fp8-dflash-a800-u062-v0202.txt").read_text()
    unknown = tmp_path / "unknown.txt"
    unknown.write_text(log.replace("/data/xxx/models/Qwen3.6-35B-A3B-Dflash/", "/data/xxx/models/my-drafter/"))
    rc, out, _ = run_cli(capsys, "from-log", "--gpu", "a100-80gb", "--model", "Qwen/Qwen3.6-35B-A3B-FP8", str(unknown))
    assert rc == 0 and "speculative decoding: dflash drafter weights not counted: its config is not known" in out


def test_graph_term_names_the_counts_vllm_profiles():
    # the A800 log: "Profiling CUDA graph memory: PIECEWISE=38 (largest=336), FULL=22 (largest=168)"; the estimate is
    # taken from the budget in 0.20.2, and the drafter's 8 layers join the 40 target layers in our per-layer rule
    spec = _target("Qwen/Qwen3.6-35B-A3B-FP8")
    sd = parse_speculative_config(A800_DFLASH, strict=False)
    est = estimate_vllm(spec, gpu="a100-80gb", launch=VllmLaunch(version="0.20.2", max_model_len=8192, max_num_seqs=24,
                                                                 gpu_memory_utilization=0.62, speculative_config=sd))
    graph = next(t for t in est.terms if t.name == "cuda_graph")
    assert graph.sign == -1 and "x 48 layers" in graph.note
    assert "'PIECEWISE=38 (largest=336), FULL=22 (largest=168)'" in graph.note

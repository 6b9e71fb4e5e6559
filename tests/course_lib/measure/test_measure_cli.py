"""`course-memory measure`: the JSON shape of the issue, the text table, the plot, usage errors, light imports."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import HANG_S

from course_lib.cli import main

pytest.importorskip("torch")

from course_lib.measure.loadtime import PHASES  # noqa: E402

SMALL = {"model_type": "llama", "hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 8000}


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory, python_exe, python_env, repo_root):
    """One real `measure --json --plot` run, shared by the checks below."""
    tmp = tmp_path_factory.mktemp("measure-cli")
    config = tmp / "small.config.json"
    config.write_text(json.dumps(SMALL), encoding="utf-8")
    plot = tmp / "plots" / "measure.png"
    argv = ["measure", "--config", str(config), "--sequences", "2", "--context-tokens", "256", "--device", "cpu",
            "--json", "--plot", str(plot)]
    proc = subprocess.run([python_exe, "-m", "course_lib", *argv], cwd=repo_root, env=python_env,
                          capture_output=True, text=True, timeout=300)
    return proc, plot


def test_json_has_the_issue_shape(cli_run):
    proc, _ = cli_run
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["device"] == "cpu"
    assert set(data["pools"]) == {"weights", "kv_cache", "workspace"}
    for name, pool in data["pools"].items():
        assert isinstance(pool["predicted_bytes"], int) and isinstance(pool["measured_bytes"], int), name
        assert pool["measured_bytes"] > 0, f"{name}: nothing measured"
    # 2 sequences x 256 tokens x (2 x 2 layers x 2 KV heads x 32 head_dim x 4 B), by hand
    assert data["pools"]["kv_cache"]["predicted_bytes"] == 2 * 256 * 2 * 2 * 2 * 32 * 4
    assert data["snapshot"]["rss_bytes"] > 0
    assert list(data["load_time"]["phases"]) == list(PHASES)
    assert data["load_time"]["phases"]["read_weights"]["seconds"] > 0
    assert data["bandwidth"]["applies"] is False and "does not apply" in data["bandwidth"]["reason"]


def test_progress_goes_to_stderr_not_into_the_json(cli_run):
    proc, _ = cli_run
    assert "measure small" in proc.stderr, "a progress indication should show on stderr"
    assert proc.stdout.lstrip().startswith("{")


def test_plot_is_a_png(cli_run):
    _, plot = cli_run
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_text_output_has_predicted_measured_and_error(capsys, monkeypatch, cli_run):
    # The real run above printed JSON; print the same figures as text (formatting only, no new process).
    from course_lib.cli import measure as measure_cli
    from course_lib.measure.report import MeasureReport
    from course_lib.measure.bandwidth import measure_bandwidth
    from course_lib.measure.run import MeasureResult, PoolComparison

    data = json.loads(cli_run[0].stdout)
    pools = tuple(PoolComparison(n, p["predicted_bytes"], p["measured_bytes"], p["predicted_how"])
                  for n, p in data["pools"].items())
    total = PoolComparison("total", data["total"]["predicted_bytes"], data["total"]["measured_bytes"])
    result = MeasureResult(data["model"], data["device"], data["device_name"], pools, total, data["runtime_bytes"],
                           data["settings"], data["snapshot"], data["details"])
    monkeypatch.setattr(measure_cli, "measure", lambda *a, **k: MeasureReport(
        result, None, measure_bandwidth("cpu")))
    assert main(["measure", "--model", "course-tiny", "--quiet"]) == 0
    out = capsys.readouterr().out
    for word in ("predicted bytes", "measured bytes", "error", "weights", "kv_cache", "workspace", "%",
                 "does not apply on the CPU", "system available"):
        assert word in out, f"{word!r} missing from:\n{out}"


@pytest.mark.parametrize("argv, message", [
    (["measure", "--model", "course-tiny", "--sequences", "0"], "--sequences=0"),
    (["measure", "--model", "gpt2"], "cannot be measured"),
    (["measure", "--model", "course-tiny", "--dtype", "int4"], "fp32, fp16 or bf16"),
    (["measure", "--model", "no-such-model"], "not a preset"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    try:
        rc = main(argv)
    except SystemExit as exc:      # a flag out of its bound is refused by the parser, as a usage error
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["measure", "--model", "course-tiny", "--device", "tpu"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["measure"])          # neither --config nor --model


@pytest.mark.parametrize("code", [
    "import course_lib.measure",
    "import course_lib.cli.measure, course_lib.measure.plot, course_lib.measure.worker",
    "import course_lib.measure as m; m.measure_bandwidth('cpu'); m.snapshot('cpu').describe()",
])
def test_measure_imports_no_torch_or_matplotlib(code, python_exe, python_env, repo_root):
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in ('torch', 'matplotlib') if m in sys.modules]))"
    proc = subprocess.run([python_exe, "-c", probe], cwd=repo_root, env=python_env, capture_output=True, text=True,
                          timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [], f"`{code}` imported torch or matplotlib"

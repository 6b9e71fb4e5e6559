"""The simulate, trace, offload and rollout verbs, end to end through course_lib.cli.main."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import run_cli as run
from course_lib.cli import main

REPO = Path(__file__).resolve().parents[3]
TEN_ELEVEN = REPO / "examples" / "traces" / "ten_eleven.jsonl"
CHAT = REPO / "examples" / "traces" / "chat_short_outputs.jsonl"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_simulate_ten_eleven_json(capsys):
    code, out, _ = run(capsys, "simulate", "--trace", TEN_ELEVEN, "--json")
    assert code == 0
    data = json.loads(out)
    assert {"requests", "steps", "summary"} <= set(data)
    # 24 - 14 - 2 - 2 = 6 GB; 10 requests of 70 blocks fit in 715, the eleventh waits 513 steps
    assert data["summary"]["kv_budget_bytes"] == 6_000_000_000
    last = data["requests"][-1]
    assert (last["id"], last["status"], last["admitted_step"], last["queued_steps"]) == ("r10", "finished", 513, 513)
    assert max(data["steps"]["kv_bytes"]) <= 6_000_000_000
    assert data["summary"]["max_active"] == 10


def _refuse_non_json(constant):
    raise AssertionError(f"{constant} is not JSON")


@pytest.mark.parametrize("argv, rules", [
    (["--policy", "paged"], {"policy": "paged"}),
    (["--policy", "reserve-max", "--max-queue-len", "3", "--max-wait-steps", "40"],
     {"policy": "reserve-max", "max_queue_len": 3, "max_wait_steps": 40}),
])
def test_simulate_json_is_the_results_to_dict(capsys, argv, rules):
    # The CLI's JSON, loaded back, is exactly SimulationResult.to_dict() of the same run, built here without
    # the CLI: the lesson's pools by hand (24 GB - 14 - 2 - 2), Llama-2-7B fp16's 524,288 B per token.
    from course_lib.serving.admission import kv_config
    from course_lib.simulate import simulate
    from course_lib.serving.trace import read_trace

    code, out, _ = run(capsys, "simulate", "--trace", CHAT, "--json", *argv)
    assert code == 0
    data = json.loads(out, parse_constant=_refuse_non_json)
    config = kv_config(device_bytes="24GB", weights_bytes="14GB", workspace_bytes="2GB", reserve_bytes="2GB",
                       kv_bytes_per_token=524_288, **rules)
    expected = simulate(read_trace(CHAT), config).to_dict()
    assert data == json.loads(json.dumps(expected))
    assert list(data) == ["requests", "steps", "summary"] and list(data["summary"]) == list(expected["summary"])
    if rules.get("max_queue_len") is not None:
        assert any(r["status"] == "rejected" for r in data["requests"]), "the test should cover rejected records"
    # the layout: one record per line, each per-step series on one line
    lines = out.splitlines()
    assert sum(line.lstrip().startswith('{"id": ') for line in lines) == 400
    assert sum(line.lstrip().startswith('"kv_bytes": [') for line in lines) == 1


def test_simulate_compare_json_holds_both_runs(capsys):
    from course_lib.serving.admission import kv_config
    from course_lib.simulate import simulate
    from course_lib.serving.trace import read_trace

    code, out, _ = run(capsys, "simulate", "--trace", TEN_ELEVEN, "--json", "--compare")
    assert code == 0
    data = json.loads(out, parse_constant=_refuse_non_json)
    assert list(data) == ["runs"] and list(data["runs"]) == ["reserve-max", "paged"]
    for policy, got in data["runs"].items():
        config = kv_config(device_bytes="24GB", weights_bytes="14GB", workspace_bytes="2GB", reserve_bytes="2GB",
                           kv_bytes_per_token=524_288, policy=policy)
        assert got == json.loads(json.dumps(simulate(read_trace(TEN_ELEVEN), config).to_dict())), policy


def test_simulate_text_names_the_queued_request(capsys):
    code, out, _ = run(capsys, "simulate", "--trace", TEN_ELEVEN)
    assert code == 0
    assert "r10: finished; queued at step 0" in out
    assert "never crossed" in out


def test_simulate_with_a_model_takes_its_weights(capsys):
    # Llama-2-7B fp16 weights: 6,738,415,616 x 2 = 13,476,831,232 B; 24e9 - that - 2e9 - 2e9 = 6,523,168,768 B
    code, out, _ = run(capsys, "simulate", "--trace", TEN_ELEVEN, "--model", "llama-2-7b", "--json")
    assert code == 0
    summary = json.loads(out)["summary"]
    assert summary["kv_budget_bytes"] == 6_523_168_768
    assert summary["kv_bytes_per_token"] == 524_288


def test_simulate_compare_and_plot(capsys, tmp_path):
    png = tmp_path / "sim.png"
    code, out, _ = run(capsys, "simulate", "--trace", CHAT, "--compare", "--plot", png)
    assert code == 0
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert "reserve-max" in out and "paged" in out and f"plot: {png}" in out


def test_trace_verb(capsys, tmp_path):
    code, out, _ = run(capsys, "trace", "--requests", 5, "--seed", 1)
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 5 and all(1 <= r["output_tokens"] <= r["max_new_tokens"] for r in rows)
    path = tmp_path / "t.jsonl"
    code, out, _ = run(capsys, "trace", "--requests", 50, "--seed", 2, "--out", path)
    assert code == 0 and len(path.read_text().splitlines()) == 50
    code, out, _ = run(capsys, "simulate", "--trace", path, "--policy", "paged", "--json")
    assert code == 0 and json.loads(out)["summary"]["completed"] == 50


def test_offload_verb(capsys):
    code, out, _ = run(capsys, "offload", "--bytes", "10GB", "--link", "pcie-gen4-x16", "--efficiency", 1.0, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["weights_offload"]["added_step_s"] == pytest.approx(10 / 31.5)   # 0.317 s per decode step
    code, out, _ = run(capsys, "offload")
    assert code == 0 and "0.397 s to EVERY decode step" in out


def test_rollout_verb(capsys, tmp_path):
    png = tmp_path / "rollout.png"
    code, out, _ = run(capsys, "rollout", "--weights", "16GB", "--replicas", 3, "--drain", 0, "--json", "--plot", png)
    assert code == 0
    data = json.loads(out)
    assert data["timeline"]["ready_s"] == pytest.approx(5 + 16 / 3 + 16 / 25.2 + 30 + 10)
    assert data["rollout"]["total_s"] == pytest.approx(3 * data["timeline"]["ready_s"])
    assert png.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize("argv, words", [
    (["simulate", "--trace", "missing.jsonl"], "is not a file"),
    (["simulate", "--trace", str(TEN_ELEVEN), "--plot", "no/such/folder/x.png"], "does not exist"),
    (["simulate", "--trace", str(TEN_ELEVEN), "--model", "llama-2-7b", "--kv-bytes-per-token", "5"], "give one"),
    (["simulate", "--trace", str(TEN_ELEVEN), "--weights", "30GB"], "leaving no KV budget"),
    (["offload", "--link", "pcie9"], "link='pcie9'"),
    (["rollout", "--max-unavailable", "9"], "--max-unavailable=9 exceeds --replicas=4"),
    (["trace", "--requests", "0"], "requests=0"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, words):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--trace", str(TEN_ELEVEN), "--policy", "lru"])
    assert exc.value.code == 2


def test_demo_section_writes_its_plot(capsys, tmp_path):
    from course_lib.cli.demo import section_admission

    section_admission(tmp_path)
    out = capsys.readouterr().out
    png = tmp_path / "admission.png"
    assert png.read_bytes()[:8] == PNG_MAGIC and f"plot: {png}" in out
    assert "queued at step 0" in out and (tmp_path / "admission_compare.png").is_file()


def test_importing_stays_light():
    code = ("import sys, course_lib, course_lib.serving.admission, course_lib.simulate, course_lib.serving.trace, "
            "course_lib.serving.offload, course_lib.serving.loading, course_lib.views.plots, course_lib.cli.requests, course_lib.views.report, course_lib.serving.scenario; "
            "heavy = [m for m in ('torch', 'matplotlib', 'numpy') if m in sys.modules]; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)

"""course-memory estimate on today's configs: a Qwen3 config.json, a model folder, a hybrid, bad input.

The figures are hand-worked or published: Qwen3-8B has 8,190,735,360 parameters (its card: 8.2B), stored
in bf16 as its config says: 16,381,470,720 bytes.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from course_lib.cli import main
from course_lib.model.model_configs import MODEL_CONFIGS


def run(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_qwen3_config_file_is_supported(tmp_path, capsys):
    folder = tmp_path / "Qwen3-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(MODEL_CONFIGS["qwen3-8b"]))
    rc, out, err = run(["estimate", "--config", str(folder / "config.json"), "--gpu", "h100-80gb"], capsys)
    assert rc == 0, err
    assert "model: Qwen3-8B (qwen3" in out and "params_total: 8,190,735,360" in out
    assert "weights dtype: bf16 (from config torch_dtype=bfloat16)" in out
    rc, out, err = run(["estimate", "--config", str(folder / "config.json"), "--json"], capsys)
    data = json.loads(out)
    assert data["weights_bytes"] == 2 * 8_190_735_360 and data["dtype"] == "bf16"


def test_dtype_flag_overrides_the_config(capsys):
    rc, out, _ = run(["estimate", "--model", "deepseek-v3", "--gpu", "b200", "--tensor-parallel", "8"], capsys)
    assert rc == 0 and "weights dtype: fp8-block128x128 (from quantization_config: fp8" in out
    assert "num_nextn_predict_layers=1" in out
    rc, out, _ = run(["estimate", "--model", "deepseek-v3", "--gpu", "b200", "--tensor-parallel", "8",
                      "--dtype", "bf16"], capsys)
    assert rc == 0 and "weights dtype: bf16 (given: --dtype overrides the config)" in out


def test_model_folder_bytes_from_safetensors(tmp_path, capsys):
    cfg = {"model_type": "brandnew", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "vocab_size": 100, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    save_file({"embed": torch.zeros((100, 64), dtype=torch.bfloat16),
               "layer": torch.zeros((2, 64, 64), dtype=torch.bfloat16)}, str(tmp_path / "model.safetensors"))
    rc, out, err = run(["estimate", "--config", str(tmp_path), "--json"], capsys)
    assert rc == 0, err
    data = json.loads(out)
    assert data["weights_bytes"] == 2 * (100 * 64 + 2 * 64 * 64) and data["weights_source"] == "checkpoint"
    assert any(n.startswith("approximate") for n in data["notes"])


def test_hybrid_json_has_the_recurrent_pool(capsys):
    rc, out, _ = run(["estimate", "--model", "qwen3-next-80b-a3b", "--gpu", "b200", "--active-sequences", "3",
                      "--json"], capsys)
    data = json.loads(out)
    assert rc == 0 and data["recurrent_bytes"] == 3 * 77_266_944 == 3 * data["per_sequence_recurrent_bytes"]
    pool = next(p for p in data["pools"] if p["name"] == "recurrent")
    assert pool["kind"] == "grows" and "grows with active sequences, not with tokens" in pool["note"]


@pytest.mark.parametrize("change, shown", [({"tie_word_embeddings": "false"}, "tie_word_embeddings='false'"),
                                           ({"num_hidden_layers": 100_000_000}, "num_hidden_layers=100000000")])
def test_bad_config_exits_2_with_one_line(tmp_path, capsys, change, shown):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(MODEL_CONFIGS["llama-3-8b"], **change)))
    rc, out, err = run(["estimate", "--config", str(path)], capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1 and shown in err


def test_params_flag_still_works_and_is_bounded(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "mamba", "hidden_size": 64, "num_hidden_layers": 2,
                                "num_attention_heads": 4}))
    rc, out, _ = run(["estimate", "--config", str(path), "--params", "1000000", "--json"], capsys)
    assert rc == 0 and json.loads(out)["params_total"] == 1_000_000
    rc, _, err = run(["estimate", "--config", str(path), "--params", str(10**14)], capsys)
    assert rc == 2 and "--params" in err

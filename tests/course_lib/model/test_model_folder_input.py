"""The folder reader and the rest of the CLI contract, finding by finding (issue 23's fuzzing pass).

Every case runs ``course-memory estimate --config FOLDER`` in process (or the command itself where
the finding is about the process: a FIFO, ``> /dev/full``) and checks the contract: exit 2, one line
on stderr naming the file, the field and what is valid, no traceback, nothing on stdout. Each case
fails on the code before the fix (a hang, a traceback, a figure the safetensors library refuses, an
internal name in the message).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time

import pytest

from conftest import HANG_S

from course_lib.model import checkpoint as ckpt
from tests.course_lib.cli.test_cli_bad_input import check_refusal, run

LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256}


def header_file(path, header: dict, data: int | None = None) -> None:
    """A safetensors file: 8-byte length, the header JSON, then ``data`` bytes (default: what it claims)."""
    raw = json.dumps(header).encode()
    if data is None:
        data = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(data))


def folder(tmp_path, name="m", config=LLAMA):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    return d


def refuse(d, capsys, phrase, *extra):
    argv = ["estimate", "--config", str(d), *extra]
    rc, out, err = run(argv, capsys)
    check_refusal(rc, out, err, argv, phrase)
    return err


# ------------------------------------------------------------------ files of every kind

def test_a_fifo_named_model_safetensors_is_refused_without_waiting(tmp_path, capsys, resource_guard):
    d = folder(tmp_path)
    os.mkfifo(d / "model.safetensors")
    with resource_guard(10, 2**30, wall=30):   # before: open() waited forever for a writer
        refuse(d, capsys, "is a FIFO (named pipe), not a regular file")


def test_a_fifo_named_model_safetensors_in_the_command(tmp_path):
    d = folder(tmp_path)
    os.mkfifo(d / "model.safetensors")
    proc = subprocess.run([sys.executable, "-m", "course_lib", "estimate", "--config", str(d)],
                          capture_output=True, text=True, timeout=HANG_S)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "FIFO" in proc.stderr


@pytest.mark.parametrize("kind, phrase", [
    ("directory", "is a directory, not a regular file"),
    ("loop", "is a symbolic link loop"),
    ("dangling", "is a symbolic link to 'nowhere.bin', which does not exist"),
    ("socket", "is a socket, not a regular file"),
])
def test_a_shard_that_is_not_a_regular_file(kind, phrase, tmp_path, capsys):
    d = folder(tmp_path)
    target = d / "model.safetensors"
    if kind == "directory":
        target.mkdir()
    elif kind == "loop":
        target.symlink_to(d / "other.safetensors")
        (d / "other.safetensors").symlink_to(target)
    elif kind == "dangling":
        target.symlink_to("nowhere.bin")
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(target))
        sock.close()
    refuse(d, capsys, phrase)


def test_a_symlink_to_a_regular_file_is_read(tmp_path, capsys):
    # The Hugging Face cache links snapshots/<rev>/model.safetensors to blobs/<sha>: that is fine.
    d = folder(tmp_path)
    header_file(d / "blob", {"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}})
    (d / "model.safetensors").symlink_to("blob")
    rc, out, err = run(["estimate", "--config", str(d), "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["checkpoint_stored_bytes"] == 8


def test_an_unreadable_shard(tmp_path, capsys, monkeypatch):
    # Root reads any file whatever its mode, so the refusal of the operating system is simulated.
    d = folder(tmp_path)
    header_file(d / "model.safetensors", {"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}})
    denied = str(d / "model.safetensors")
    real_os_open, real_open = os.open, open

    def os_open(path, *args, **kwargs):
        if os.fspath(path) == denied:
            raise PermissionError(13, "Permission denied", denied)
        return real_os_open(path, *args, **kwargs)

    def py_open(path, *args, **kwargs):
        if os.fspath(path) == denied:
            raise PermissionError(13, "Permission denied", denied)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr("builtins.open", py_open)
    monkeypatch.setattr("io.open", py_open)
    refuse(d, capsys, "cannot be read (Permission denied)")


def test_an_index_that_is_a_directory_or_names_files_outside_the_folder(tmp_path, capsys):
    d = folder(tmp_path)
    (d / "model.safetensors.index.json").mkdir()
    refuse(d, capsys, "model.safetensors.index.json")
    e = folder(tmp_path, "e")
    (e / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 8}, "weight_map": {"w": "../../etc/passwd"}}))
    refuse(e, capsys, "weight_map['w']='../../etc/passwd' is not a shard file name")


# ------------------------------------------------------------------ headers as the format defines them

@pytest.mark.parametrize("entry, phrase", [
    ({"dtype": ["F16"], "shape": [4], "data_offsets": [0, 8]}, "dtype=['F16'], not a safetensors dtype; use one of"),
    ({"dtype": "F16", "shape": [4.0], "data_offsets": [0, 8]}, "shape[0]=4.0 is not a whole number"),
    ({"dtype": "F16", "shape": [-4], "data_offsets": [0, 8]}, "shape[0]=-4 is below the bound 0"),
    ({"dtype": "F16", "shape": [4], "data_offsets": [0.0, 8.0]}, "data_offsets[0]=0.0 is not a whole number"),
    ({"dtype": "F16", "shape": [4], "data_offsets": [0, 8, 9]}, "use [begin, end], two whole numbers"),
    ({"dtype": "F16", "shape": [4]}, "has no 'data_offsets'"),
    ({"dtype": "F16", "shape": [4], "data_offsets": [8, 0]}, "begin after end"),
    ({"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}, "needs 1.5 (not a whole number of bytes) bytes"),
    ("F16", "is str, not an object of dtype, shape and data_offsets"),
])
def test_a_malformed_tensor_entry_names_the_field(entry, phrase, tmp_path, capsys):
    d = folder(tmp_path)
    raw = json.dumps({"w": entry}).encode()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(8))
    err = refuse(d, capsys, phrase)
    assert "model.safetensors" in err and "tensor 'w'" in err


def test_overlapping_offsets_are_refused_as_the_safetensors_library_refuses_them(tmp_path, capsys):
    # Before: summed into 16 bytes of weights from an 8-byte data region.
    d = folder(tmp_path)
    header_file(d / "model.safetensors", {"a": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]},
                                          "b": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]}})
    refuse(d, capsys, "tensors 'a' and 'b' overlap")


@pytest.mark.parametrize("data, phrase", [(12, "belong to no tensor"), (4, "data_offsets[1]=8 is above the bound 4")])
def test_offsets_must_tile_the_data_region(data, phrase, tmp_path, capsys):
    d = folder(tmp_path)
    header_file(d / "model.safetensors", {"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
                                          "b": {"dtype": "F16", "shape": [2], "data_offsets": [4, 8]}}, data)
    if data == 12:    # a gap at the end is refused too: the tensors must be the data
        phrase = "the tensors cover 8 bytes but 12 follow the header"
    refuse(d, capsys, phrase)


def test_odd_metadata_and_nan_are_refused(tmp_path, capsys):
    d = folder(tmp_path)
    header_file(d / "model.safetensors", {"__metadata__": {"format": 1}})
    refuse(d, capsys, "__metadata__={'format': 1} is not a map of strings to strings")
    raw = b'{"w": {"dtype": "F16", "shape": [NaN], "data_offsets": [0, 8]}}'
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(8))
    refuse(d, capsys, "NaN is not a JSON number")


def test_a_valid_header_written_by_the_safetensors_library_is_read(tmp_path):
    import torch
    from safetensors.torch import save_file

    from course_lib.model.models import from_hf_config
    d = folder(tmp_path)
    save_file({"a": torch.zeros((3, 5), dtype=torch.float16), "b": torch.zeros(7, dtype=torch.int8),
               "empty": torch.zeros((0, 4), dtype=torch.float32)}, str(d / "model.safetensors"),
              metadata={"format": "pt"})
    ck = from_hf_config(d).checkpoint
    assert (ck.total_bytes, ck.params, dict(ck.bytes_by_dtype)) == (37, 22, {"F16": 30, "I8": 7, "F32": 0})


# ------------------------------------------------------------------ bounds on what is read

def test_a_header_above_the_bound_is_refused_before_it_is_read(tmp_path, capsys):
    # Before: a 100 MiB header was within the bound and cost ~16 s and 1.2 GB to read.
    d = folder(tmp_path)
    for length in (100 * 2**20, ckpt.MAX_HEADER_BYTES + 1):
        with (d / "model.safetensors").open("wb") as f:
            f.write(struct.pack("<Q", length))
            f.truncate(8 + length)
        start = time.process_time()
        refuse(d, capsys, f"claims a {length:,}-byte header, above the bound 16,777,216")
        assert time.process_time() - start < 1


def test_the_index_is_bounded_by_bytes_read(tmp_path, capsys):
    # Before: read whole (a 1.5 GB index: 13 s, 2.1 GB, then a MemoryError traceback).
    d = folder(tmp_path)
    with (d / "model.safetensors.index.json").open("wb") as f:
        f.write(b'{"metadata": {"total_size": 8}, "weight_map": {"w": "model.safetensors"}}')
        f.truncate(ckpt.MAX_INDEX_BYTES + 10)      # sparse: the bound is checked by what is read
    refuse(d, capsys, f"is larger than {ckpt.MAX_INDEX_BYTES:,} bytes")


def test_the_headers_of_all_shards_together_are_bounded(tmp_path, capsys, monkeypatch):
    d = folder(tmp_path)
    weight_map = {}
    for k in range(3):
        name = f"model-{k + 1:05d}-of-00003.safetensors"
        header_file(d / name, {f"w{k}": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]},
                               "__metadata__": {"pad": "x" * 400}})
        weight_map[f"w{k}"] = name
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 24},
                                                                "weight_map": weight_map}))
    rc, out, err = run(["estimate", "--config", str(d), "--json"], capsys)
    assert rc == 0 and json.loads(out)["checkpoint_stored_bytes"] == 24, err
    monkeypatch.setattr(ckpt, "MAX_TOTAL_HEADER_BYTES", 1000)
    refuse(d, capsys, "the folder's headers add up to more than 1,000 bytes")
    monkeypatch.setattr(ckpt, "MAX_TOTAL_HEADER_BYTES", 10**9)
    monkeypatch.setattr(ckpt, "MAX_READ_SECONDS", -1.0)
    refuse(d, capsys, "reading the folder's index and headers took over -1 s of CPU")


def test_an_index_and_shards_that_do_not_belong_together(tmp_path, capsys):
    d = folder(tmp_path)
    header_file(d / "model-00001-of-00002.safetensors", {"a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}})
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    refuse(d, capsys, "2 shard files, but 1 are not in the folder (e.g. 'model-00002-of-00002.safetensors')")
    header_file(d / "model-00002-of-00002.safetensors", {"c": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}})
    refuse(d, capsys, "maps tensor 'b' to 'model-00002-of-00002.safetensors', whose header does not list it")


# ------------------------------------------------------------------ the served dtype is one truth

def test_a_float32_folder_is_counted_as_stored_and_pooled_as_served(tmp_path, capsys):
    # A tiny float32 llama (tied): 90,432 parameters stored in 4 B = 361,728 B; its config says float32, which
    # vLLM's dtype=auto serves in fp16, so the weights pool holds 180,864 B. Before: 361,728 in the pool while
    # the report said fp16.
    import torch
    from safetensors.torch import save_file

    from oracle import build
    cfg = dict(LLAMA, tie_word_embeddings=True, torch_dtype="float32")
    model, _ = build(cfg)
    d = folder(tmp_path, config=cfg)
    save_file({n: torch.zeros(p.shape, dtype=torch.float32) for n, p in model.named_parameters()},
              str(d / "model.safetensors"))
    rc, out, err = run(["estimate", "--config", str(d), "--json"], capsys)
    data = json.loads(out)
    assert rc == 0 and data["params_total"] == 90_432
    assert data["checkpoint_stored_bytes"] == 361_728 and data["weights_bytes"] == 180_864
    assert data["dtype"] == "fp16" and "served in fp16" in data["dtype_reason"]
    rc, out, _ = run(["estimate", "--config", str(d)], capsys)
    assert "361,728 B read from the checkpoint" in out and "stored as F32; served in fp16: 180,864 B" in out


# ------------------------------------------------------------------ configs, traces, stdout

@pytest.mark.parametrize("config, phrase", [
    ({"model_type": "mistral3", "text_config": {"model_type": ["mistral"]}},
     "config: text_config.model_type=['mistral'] is not a string"),
    ({"model_type": "gemma4_text", "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "per_layer_config": {"\u00b2": {"head_dim": 8}}},
     "per_layer_config has the entry '\u00b2'; use layer indices 0 to 1"),
    ({"model_type": "gemma4_text", "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "per_layer_config": {"1": {"head_dim": [8]}}},
     "per_layer_config['1'].head_dim=[8] is not a whole number"),
    (dict(LLAMA, quantization_config={"quant_method": "fp8", "weight_block_size": [0, 128]}),
     "quantization_config.weight_block_size[0]=0 is below the bound 1"),
    (dict(LLAMA, hidden_size=[[float("nan")]]), "hidden_size=NaN is not finite"),
])
def test_odd_nested_config_values_are_one_line_naming_the_field(config, phrase, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    err = refuse(path, capsys, phrase)
    assert "object at 0x" not in err and "quantization_config.r=" not in err


def test_gemma4_audio_channels_are_named_as_written(tmp_path, capsys):
    path = tmp_path / "config.json"
    text = {"model_type": "gemma4_text", "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 1,
            "num_attention_heads": 2, "num_key_value_heads": 1}
    path.write_text(json.dumps({"model_type": "gemma4", "text_config": text,
                                "audio_config": {"subsampling_conv_channels": [0, 32]}}))
    err = refuse(path, capsys, "subsampling_conv_channels[0]=0 is below the bound 1")
    assert "c=0" not in err


def test_a_trace_with_a_line_separator_inside_a_string_is_valid(tmp_path, capsys):
    # U+2028 is a line break to str.splitlines but an ordinary character inside a JSON string.
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"id": "a\u2028b", "arrival_step": 0, "prompt_tokens": 10, "max_new_tokens": 5,
                                 "output_tokens": 5}, ensure_ascii=False) + "\n", encoding="utf-8")
    rc, out, err = run(["simulate", "--trace", str(trace), "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["requests"][0]["id"] == "a\u2028b"


@pytest.mark.parametrize("argv", [["presets"], ["presets", "--json"], ["estimate", "--model", "gpt2"]])
def test_stdout_that_cannot_be_written_is_one_line(argv):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "course_lib", *argv], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=HANG_S)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "stdout cannot be written (No space left on device)" in proc.stderr


def test_a_closed_pipe_is_quiet():
    proc = subprocess.run(f"{sys.executable} -m course_lib presets | head -c 10 > /dev/null", shell=True,
                          stderr=subprocess.PIPE, text=True, timeout=HANG_S)
    assert proc.stderr == ""

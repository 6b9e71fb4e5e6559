"""vLLM itself as the oracle of the multimodal encoder budget: what a Qwen-VL start-up profiles the tower on.

Before its text forward, a V1 start-up runs the vision tower on dummy items "of the maximum feature size" and
logs which (``GPUModelRunner.profile_run``, vllm/v1/worker/gpu_model_runner.py, vLLM 0.32)::

    Encoder cache will be initialized with a budget of 114688 tokens, and profiled with 1 video items of the
    maximum feature size.

Those numbers come from vLLM's ``MultiModalBudget`` (vllm/multimodal/encoder_budget.py) and the model's
processing info (``get_mm_max_tokens_per_item``, vllm/model_executor/models/qwen2_vl.py, qwen3_vl.py). The
oracle builds that object itself, in the oracle venv (``make vllm-oracle``), for a tiny Qwen-VL folder: the
model's ``config.json`` (a tiny text model and tower; the token counts depend only on the tower's patch,
merge and temporal sizes), the real checkpoint's processor configs (:data:`PROCESSOR_CONFIGS`) and a
word-level tokenizer. No engine starts and no pixel is processed, so a case takes milliseconds after vLLM's
import (~10 s for the whole run).

Two pieces are not vLLM's own: transformers' Qwen-VL processors need torchvision, which the oracle venv lacks,
so (1) the child Python loads :mod:`course_lib.runtimes.vllm._oracle_shim` (the PIL twin of transformers' image
module under its name, for vLLM's import of ``smart_resize``) and (2) the HF processor vLLM asks for is the
real image processor (``Qwen2VLImageProcessorPil``) and the real video processor class (imported past its
module-level torchvision import, never called) in a namespace, built from the same folder. Their ``size`` is
what vLLM reads.

>>> sorted(PROCESSOR_CONFIGS)
['qwen2_5_vl', 'qwen2_vl', 'qwen3_vl']
>>> tiny_vl_config("qwen2_5_vl")["vision_config"]["patch_size"]
14
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

from ...errors import CourseInputError

#: The folder that holds course_lib/ (this module's depth in the package up), put first on the oracle child's
#: PYTHONPATH so that ``python -m`` finds this module in the oracle's venv.
CHECKOUT = Path(__file__).resolve().parents[__package__.count(".") + 1]

_MEAN_CLIP = [0.48145466, 0.4578275, 0.40821073]
_STD_CLIP = [0.26862954, 0.26130258, 0.27577711]

#: The processor configs the real checkpoints ship (file name -> contents), by family. Qwen2-VL-7B-Instruct and
#: Qwen2.5-VL-7B-Instruct: preprocessor_config.json only (transformers' video processor falls back to it);
#: Qwen3-VL-8B-Instruct: preprocessor_config.json and video_preprocessor_config.json.
PROCESSOR_CONFIGS: dict[str, dict[str, dict[str, Any]]] = {
    "qwen2_vl": {"preprocessor_config.json": {
        "min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
        "image_mean": _MEAN_CLIP, "image_std": _STD_CLIP, "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2VLProcessor"}},
    "qwen2_5_vl": {"preprocessor_config.json": {
        "min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
        "image_mean": _MEAN_CLIP, "image_std": _STD_CLIP, "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2_5_VLProcessor"}},
    "qwen3_vl": {
        "preprocessor_config.json": {
            "size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16, "temporal_patch_size": 2,
            "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
            "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast"},
        "video_preprocessor_config.json": {
            "size": {"longest_edge": 25165824, "shortest_edge": 4096}, "patch_size": 16, "temporal_patch_size": 2,
            "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
            "processor_class": "Qwen3VLProcessor", "video_processor_type": "Qwen3VLVideoProcessor",
            "fps": 2, "min_frames": 4, "max_frames": 768, "do_sample_frames": True}},
}

_TEXT = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=512, max_position_embeddings=262144, rms_norm_eps=1e-6,
             rope_theta=1e6, tie_word_embeddings=False, torch_dtype="bfloat16")
_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|image_pad|>", "<|video_pad|>", "<|vision_pad|>"]
_IDS = dict(vision_start_token_id=3, vision_end_token_id=4, image_token_id=5, video_token_id=6)


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []

    def add(family: str, max_model_len: int, **knobs: Any) -> None:
        tag = "-".join(f"{k}={json.dumps(v, separators=(',', ':'), sort_keys=True)}" for k, v in knobs.items())
        cases.append({"id": f"{family}-L{max_model_len}" + (f"-{tag}" if tag else ""), "family": family,
                      "max_model_len": max_model_len, **knobs})

    for family in ("qwen2_vl", "qwen2_5_vl"):
        for length in (2048, 8192, 16384, 32768, 50000, 65536, 128000):
            add(family, length)
    for length in (4096, 32768, 128000):
        add("qwen3_vl", length)
    for family in ("qwen2_5_vl", "qwen3_vl"):
        add(family, 32768, limit_mm_per_prompt={"video": 0})
        add(family, 32768, limit_mm_per_prompt={"image": 0})
        add(family, 32768, limit_mm_per_prompt={"image": 0, "video": 0})
        add(family, 65536, limit_mm_per_prompt={"image": 3, "video": 1})
        add(family, 65536, max_num_batched_tokens=65536, max_num_seqs=2)
        add(family, 131072, max_num_batched_tokens=131072, max_num_seqs=8)
        add(family, 32768, max_num_batched_tokens=16384, max_num_seqs=1)
        add(family, 32768, max_num_batched_tokens=32768, enable_chunked_prefill=False, max_num_seqs=4)
        add(family, 32768, mm_processor_kwargs={"max_pixels": 1003520})
        add(family, 8192, mm_processor_kwargs={"max_pixels": 200704}, max_num_batched_tokens=8192)
    return cases


#: The matrix the oracle answers (benchmarks/bench_vllm_mm_oracle.py records it; the suite checks ours against it).
MM_CASES: list[dict[str, Any]] = _cases()


def tiny_vl_config(family: str) -> dict[str, Any]:
    """A tiny ``config.json`` of a Qwen-VL ``family`` with the real checkpoints' patch, merge and temporal sizes."""
    if family not in PROCESSOR_CONFIGS:
        raise CourseInputError(f"family={family!r} has no tiny vision-language model here; "
                               f"use one of {', '.join(sorted(PROCESSOR_CONFIGS))}")
    if family == "qwen3_vl":
        vision = dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=128,
                      patch_size=16, spatial_merge_size=2, temporal_patch_size=2, in_channels=3,
                      num_position_embeddings=2304, deepstack_visual_indexes=[0], model_type="qwen3_vl")
        text = dict(_TEXT, head_dim=32, model_type="qwen3_vl_text",
                    rope_scaling={"rope_type": "default", "mrope_section": [4, 6, 6], "mrope_interleaved": True})
        return {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
                "text_config": text, "vision_config": vision, "tie_word_embeddings": False, **_IDS}
    vision = dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=128,
                  patch_size=14, spatial_merge_size=2, temporal_patch_size=2, in_chans=3)
    if family == "qwen2_vl":
        vision = dict(depth=1, embed_dim=64, hidden_size=128, mlp_ratio=2, num_heads=2, patch_size=14,
                      spatial_merge_size=2, temporal_patch_size=2, in_chans=3)
    else:
        vision.update(window_size=112, fullatt_block_indexes=[0], tokens_per_second=2)
    arch = {"qwen2_vl": "Qwen2VLForConditionalGeneration", "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration"}
    return {"architectures": [arch[family]], "model_type": family, **_TEXT, **_IDS, "vision_token_id": 7,
            "rope_scaling": {"type": "mrope", "mrope_section": [4, 6, 6]},
            "vision_config": dict(vision, model_type=family)}


def write_tiny_vl_folder(family: str, folder: str | Path) -> Path:   # pragma: no cover - the oracle's Python
    """config.json, the real processor configs and a word-level tokenizer (needs ``tokenizers``, transformers)."""
    from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: PLC0415
    from transformers import PreTrainedTokenizerFast  # noqa: PLC0415

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {t: i for i, t in enumerate(_SPECIAL + [chr(c) for c in range(97, 123)])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                            additional_special_tokens=_SPECIAL[1:]).save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps(tiny_vl_config(family), indent=1))
    for name, body in PROCESSOR_CONFIGS[family].items():
        (folder / name).write_text(json.dumps(body, indent=1))
    return folder


def run_budget_cases(cases: list[dict[str, Any]], *, python: str | Path, timeout: float = 600) -> list[dict]:
    """vLLM's encoder budget for each case, computed by vLLM in the oracle's ``python``.

    A case: ``{"id", "family", "max_model_len", and optionally "max_num_batched_tokens", "max_num_seqs",
    "limit_mm_per_prompt", "enable_chunked_prefill", "mm_processor_kwargs"}`` (vLLM's own engine arguments).
    Each result: the case's id and vLLM's ``budget``, ``modality`` (the one profiled), ``items`` and
    ``tokens`` per modality, or ``refused`` with vLLM's message.
    """
    root = CHECKOUT
    shim = Path(__file__).resolve().parent / "_oracle_shim"
    with tempfile.TemporaryDirectory(prefix="course-oracle-mm-") as tmp:
        spec = Path(tmp) / "cases.json"
        spec.write_text(json.dumps({"cases": cases, "workdir": tmp}))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(shim), str(root),
                                                                         os.environ.get("PYTHONPATH")])),
                   TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
        proc = subprocess.run([str(python), "-m", "course_lib.runtimes.vllm.oracle_mm", str(spec)], capture_output=True,
                              text=True, env=env, timeout=timeout, cwd=tmp, check=False)
    results = [json.loads(line.split(" ", 1)[1]) for line in proc.stdout.splitlines()
               if line.startswith("ORACLE-MM ")]
    if len(results) != len(cases):
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise RuntimeError(f"the oracle answered {len(results)} of {len(cases)} cases: {tail}")
    return results


def _video_processor_class(module_name: str, class_name: str):   # pragma: no cover - the oracle's Python
    """Import a transformers video processor whose module imports torchvision at the top (never called here)."""
    names = ("torchvision", "torchvision.transforms", "torchvision.transforms.v2",
             "torchvision.transforms.v2.functional")
    saved = {k: sys.modules.get(k) for k in names}
    for k in names:
        sys.modules[k] = types.ModuleType(k)
    sys.modules["torchvision.transforms.v2"].functional = sys.modules["torchvision.transforms.v2.functional"]
    try:
        return getattr(importlib.import_module(module_name), class_name)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def _hf_processor(folder: Path, family: str):   # pragma: no cover - the oracle's Python
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (  # noqa: PLC0415
        Qwen2VLImageProcessorPil,
    )

    video_family = "qwen3_vl" if family == "qwen3_vl" else "qwen2_vl"
    video = _video_processor_class(f"transformers.models.{video_family}.video_processing_{video_family}",
                                   {"qwen3_vl": "Qwen3VLVideoProcessor"}.get(family, "Qwen2VLVideoProcessor"))
    names = {"qwen2_vl": "Qwen2VLProcessor", "qwen2_5_vl": "Qwen2_5_VLProcessor", "qwen3_vl": "Qwen3VLProcessor"}
    processor = getattr(importlib.import_module(f"transformers.models.{family}.processing_{family}"), names[family])
    return types.SimpleNamespace(valid_processor_kwargs=processor.valid_processor_kwargs,
                                 image_processor=Qwen2VLImageProcessorPil.from_pretrained(folder),
                                 video_processor=video.from_pretrained(folder),
                                 image_token="<|image_pad|>", video_token="<|video_pad|>")


def _child(spec_path: str) -> int:   # pragma: no cover - runs in the oracle's Python
    spec = json.loads(Path(spec_path).read_text())
    workdir = Path(spec["workdir"])
    from vllm.engine.arg_utils import EngineArgs  # noqa: PLC0415
    from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: PLC0415
    from vllm.multimodal.encoder_budget import MultiModalBudget  # noqa: PLC0415
    from vllm.multimodal.processing import context  # noqa: PLC0415

    knobs = ("max_model_len", "max_num_batched_tokens", "max_num_seqs", "limit_mm_per_prompt",
             "enable_chunked_prefill", "mm_processor_kwargs")
    for case in spec["cases"]:
        family = case["family"]
        folder = workdir / family
        if not (folder / "config.json").exists():
            write_tiny_vl_folder(family, folder)
        out: dict[str, Any] = {"id": case["id"]}
        try:
            config = EngineArgs(model=str(folder), **{k: case[k] for k in knobs if case.get(k) is not None}
                                ).create_engine_config()
            processor = _hf_processor(folder, family)
            context.InputProcessingContext.get_hf_processor = lambda self, *a, _p=processor, **k: _p
            budget = MultiModalBudget(config, MULTIMODAL_REGISTRY)
            out.update(budget=budget.get_encoder_budget(), tokens=dict(budget.mm_max_toks_per_item),
                       items=dict(budget.mm_max_items_per_batch),
                       modality=budget.get_modality_with_max_tokens() if budget.mm_max_toks_per_item else None,
                       max_num_batched_tokens=config.scheduler_config.max_num_batched_tokens,
                       max_num_seqs=config.scheduler_config.max_num_seqs)
        except Exception as exc:  # noqa: BLE001 - vLLM's refusal is the result
            out["refused"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        print("ORACLE-MM " + json.dumps(out, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":   # pragma: no cover
    code = _child(sys.argv[1])
    sys.stdout.flush()
    os._exit(code)

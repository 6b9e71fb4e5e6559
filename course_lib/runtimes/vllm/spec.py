"""vLLM's speculative decoding (``--speculative-config``): the drafter's weights, KV layers and CUDA-graph sizes.

Read from vLLM 0.33.0's source (``vllm/config/speculative.py``, ``vllm/config/vllm.py``,
``vllm/config/compilation.py``, ``vllm/v1/spec_decode/eagle.py``, ``vllm/v1/worker/gpu_model_runner.py``):

* **What is loaded.** ``ngram`` / ``ngram_gpu`` / ``suffix``: no drafter (no weights, no KV). ``mtp`` (and the
  per-family names, ``deepseek_mtp``, ``qwen3_5_mtp``, ...): the target checkpoint's own multi-token-prediction
  layers (``num_nextn_predict_layers`` / ``mtp_num_hidden_layers``), which plain serving skips. ``eagle`` /
  ``eagle3`` / ``dflash``: the draft checkpoint named by ``model`` (one or a few decoder layers and an ``fc`` that
  takes the target's hidden states); ``EagleProposer.load_model`` shares the target's embedding and LM head when the
  draft has none of its own. ``draft_model``: the whole draft model.
* **KV.** The drafter's attention layers are registered in the same forward context as the target's, so the
  runner's ``get_kv_cache_spec`` returns them with the target's: they join the KV layout (a layer of the target's
  shape joins its group; another shape makes its own group, padded like any other).
* **DFlash drafters from a local folder** (vLLM 0.20.2 ``qwen3_dflash.py``, ``spec_decode/dflash.py``): a folder named
  as a published drafter is read with that drafter's config (:data:`PUBLISHED_DFLASH`); ``fc`` takes
  ``len(target_layer_ids)`` target hidden states; the draft layers (all full attention in 0.20-0.22) are a KV bucket
  of their own (:func:`padding_warnings`). An unreadable drafter in ``from-log``: "drafter weights not counted: its
  config is not known".
* **CUDA graphs.** One decode step verifies ``1 + num_speculative_tokens`` tokens per sequence
  (``VllmConfig.uniform_decode_query_len``), so the default capture ceiling is
  ``min(max_num_seqs x (1 + k) x 2, 512)`` and, with FULL decode graphs on the V1 runner,
  ``CompilationConfig.adjust_cudagraph_sizes_for_spec_decode`` rounds every size up to a multiple of ``1 + k``
  (dropping those past the ceiling). A published A800 log (set_2026, DFlash, k = 6, max_num_seqs 24) prints
  "PIECEWISE=38 (largest=336), FULL=22 (largest=168)": exactly this rule. What vLLM then takes from the budget
  (from 0.20.0) is a measured sum over those counts (:func:`profiled_graph_bytes`).

>>> sd = parse_speculative_config('{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}')
>>> sd.method, sd.num_speculative_tokens, sd.loads_drafter
('ngram', 4, False)
>>> spec_capture_sizes(24, 6, 2048)[-1], len(spec_capture_sizes(24, 6, 2048)), len(full_decode_sizes(24, 6, 2048))
(336, 38, 22)
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Mapping

from ...errors import CourseInputError
from ...model.spec import LayerCache, ModelSpec

#: ``MTPModelTypes`` of vllm/config/speculative.py (0.33.0): every name loads the target's own MTP layers.
MTP_METHODS = ("mtp", "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp",
               "glm4_moe_lite_mtp", "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp",
               "qwen3_next_mtp", "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp",
               "minimax_m3_mtp", "bailing_hybrid_mtp", "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp",
               "step5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp", "glm5_next_mtp")
#: Methods with no drafter model.
NO_DRAFTER = ("ngram", "ngram_gpu", "suffix")
#: Methods whose drafter is the checkpoint ``model`` names.
DRAFT_CHECKPOINT = ("eagle", "eagle3", "dflash", "draft_model")
METHODS = NO_DRAFTER + DRAFT_CHECKPOINT + MTP_METHODS

#: vLLM's default capture ceiling (1,024 on data-center Blackwell; not modelled here).
DEFAULT_MAX_GRAPH_SIZE = 512


@dataclass(frozen=True)
class SpeculativeDecoding:
    """One ``--speculative-config``: the method, the draft checkpoint (if any) and the draft tokens per step."""

    method: str
    num_speculative_tokens: int
    model: str | None = None
    #: False (``from-log``): a draft ``model`` that does not resolve (a local path) adds no weights or KV, with a
    #: note, instead of refusing.
    strict: bool = True

    @property
    def loads_drafter(self) -> bool:
        return self.method not in NO_DRAFTER

    @property
    def query_len(self) -> int:
        """Tokens one decode step verifies per sequence (``uniform_decode_query_len``)."""
        return 1 + self.num_speculative_tokens


def speculative_mapping(text: Any, example: str) -> dict | None:
    """``--speculative-config`` as a dict: a mapping as given, or a JSON object (None when absent); one line naming
    the text otherwise, ending with ``example`` (the runtime's own form). Shared by vLLM's and TensorRT-LLM's flag.

    >>> speculative_mapping('{"method": "ngram"}', "")
    {'method': 'ngram'}
    """
    if text is None or text == "":
        return None
    if isinstance(text, Mapping):
        cfg = dict(text)
    else:
        try:
            cfg = json.loads(text)
        except (TypeError, ValueError):
            raise CourseInputError(f"--speculative-config {str(text)[:60]!r} is not JSON; {example}") from None
    if not isinstance(cfg, dict):
        raise CourseInputError(f"--speculative-config {str(text)[:60]!r} is not a JSON object")
    return cfg


def parse_speculative_config(text: Any, strict: bool = True) -> SpeculativeDecoding | None:
    """``--speculative-config`` as vLLM takes it (a JSON object; a Python dict from a log's args line too)."""
    cfg = speculative_mapping(text, "give an object such as "
                                    "'{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'")
    if cfg is None:
        return None
    method = cfg.get("method")
    model = cfg.get("model")
    if method is None and model is not None:
        method = "draft_model"          # vLLM: a model with no method is a draft model (or EAGLE by its name)
    if method not in METHODS:
        raise CourseInputError(f"--speculative-config method={method!r:.40} is not a method vLLM 0.33 knows; use "
                               f"one of ngram, suffix, mtp, eagle, eagle3, dflash, draft_model (or a family's "
                               f"*_mtp name)")
    k = cfg.get("num_speculative_tokens")
    if method in MTP_METHODS and k is None:
        k = 1                           # vLLM: an MTP drafter defaults to its own layer count (1 for most)
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 64:
        raise CourseInputError(f"--speculative-config num_speculative_tokens={k!r:.20} is not a whole number "
                               f"from 1 to 64")
    if method in DRAFT_CHECKPOINT and not isinstance(model, str):
        raise CourseInputError(f"--speculative-config method {method} needs \"model\": the draft checkpoint "
                               f"(a Hub id or a preset name)")
    return SpeculativeDecoding(method, k, model if method in DRAFT_CHECKPOINT else None, strict)


def _grid(top: int) -> list[int]:
    return sorted({n for n in (1, 2, 4) if n <= top} | set(range(8, min(top + 1, 256), 8))
                  | set(range(256, top + 1, 16)))


def spec_capture_sizes(max_num_seqs: int, num_speculative_tokens: int, max_num_batched_tokens: int | None = None,
                       exact: bool = False, max_graph_size: int = DEFAULT_MAX_GRAPH_SIZE,
                       round_to_query: bool = True) -> list[int]:
    """The sizes vLLM's V1 runner captures with ``num_speculative_tokens`` draft tokens (FULL decode graphs on).

    ``exact`` is the 0.31+ rule (the grid stops at ``max_num_batched_tokens``, which is captured too, and the
    uniform decode sizes ``n x (1 + k)`` are appended); then every size is rounded up to a multiple of ``1 + k``
    (the V1 runner only: ``round_to_query=False`` for the V2 runner, which sizes its graphs in
    ``vllm/v1/worker/gpu/cudagraph_utils.py``).
    """
    q = 1 + num_speculative_tokens
    cap = min(max_num_seqs * q * 2, max_graph_size)
    tokens = max_num_batched_tokens or cap
    if exact:
        cap = min(cap, tokens)
        sizes = set(_grid(cap))
        if tokens <= cap:
            sizes.add(tokens)
        counts = sorted({n for n in (1, 2, 4) if n <= max_num_seqs} | set(range(8, min(max_num_seqs + 1, 256), 8))
                        | set(range(256, max_num_seqs + 1, 16)) | {max_num_seqs})
        sizes |= {n * q for n in counts if n * q <= cap and n * q <= tokens}
    else:
        sizes = set(_grid(cap))
    if not round_to_query:
        return sorted(sizes)
    rounded = sorted({math.ceil(s / q) * q for s in sizes if math.ceil(s / q) * q <= cap})
    return rounded or ([q] if q <= cap else [])


def full_decode_sizes(max_num_seqs: int, num_speculative_tokens: int, max_num_batched_tokens: int | None = None,
                      exact: bool = False) -> list[int]:
    """The FULL (uniform decode) graphs: the captured sizes up to ``max_num_seqs x (1 + k)``."""
    top = max_num_seqs * (1 + num_speculative_tokens)
    return [s for s in spec_capture_sizes(max_num_seqs, num_speculative_tokens, max_num_batched_tokens, exact)
            if s <= top]


#: vLLM's floor on the per-graph sample: "Use at least 1 MiB per graph for driver overhead".
MIN_PER_GRAPH_BYTES = 1 << 20


def profiled_graph_bytes(first_capture_bytes: Mapping[str, int], second_capture_bytes: Mapping[str, int],
                         graphs: Mapping[str, int]) -> int:
    """vLLM's "Estimated CUDA graph memory: X GiB total" from its two measured captures per mode.

    ``GPUModelRunner.profile_cudagraph_memory`` (vllm/v1/worker/gpu_model_runner.py, 0.20.2:5949-6047, 0.21.0:
    6049-6147; the same arithmetic in 0.33.0:6268-6414, which adds a multimodal encoder's graphs on top) warms up
    and captures the two *largest* sizes of each mode (PIECEWISE, FULL) into a scratch pool and reads
    ``torch.cuda.mem_get_info`` around each: the first sample is the
    mode's "first capture", the second its "per graph" (at least 1 MiB). FULL and PIECEWISE share one pool at run
    time, so the estimate is ``max(first captures) + sum over modes of per_graph x (graphs - 1)``. With
    ``num_speculative_tokens`` = k the sizes are the ones :func:`spec_capture_sizes` / :func:`full_decode_sizes`
    give (every size a multiple of 1 + k on the V1 runner). The drafter's own graphs: ``_dummy_run`` calls
    ``drafter.dummy_run`` after the target's forward, with CUDA graphs only while PIECEWISE graphs are captured
    ("Eagle currently only supports PIECEWISE cudagraphs"); its ``CUDAGraphWrapper`` instances are moved to the
    same scratch pool, so they land in the PIECEWISE samples. DFlash caps its query at ``max_num_seqs x (1 + k)``
    (``DFlashProposer.dummy_run``: ``min(num_tokens, self.max_query_tokens)``), so both profiled PIECEWISE sizes
    above that cap replay one drafter graph: the drafter enters the first capture only, not the per-graph
    extrapolation. The samples themselves are measurements (whatever else the warm-up allocates counts too), so
    only the counts and this sum can be read from the source.

    set_2026's A800 log (k = 6, max_num_seqs 24): "PIECEWISE=38 (largest=336), FULL=22 (largest=168)", then 6.24
    GiB: with the first captures at most 1 GiB, each of the 59 extrapolated graphs took >= 90 MiB.

    >>> MiB = 1 << 20
    >>> profiled_graph_bytes({"PIECEWISE": 300 * MiB, "FULL": 200 * MiB}, {"PIECEWISE": 0, "FULL": 10 * MiB},
    ...                      {"PIECEWISE": 38, "FULL": 22}) // MiB     # 300 + 37 x 1 + 21 x 10
    547
    """
    modes = [m for m, n in graphs.items() if n > 0]
    if not modes:
        return 0
    first = max(first_capture_bytes[m] for m in modes)
    return first + sum(max(second_capture_bytes.get(m, 0) if graphs[m] > 1 else 0, MIN_PER_GRAPH_BYTES)
                       * (graphs[m] - 1) for m in modes)


def padding_warnings(layout) -> list[str]:
    """vLLM's "Add N padding layers, may waste at most X% KV cache memory" lines for a :class:`.kv_groups.KVLayout`.

    ``_get_kv_cache_groups_uniform_page_size`` (vllm/v1/core/kv_cache_utils.py, 0.20.2:1052-1171; 0.33.0
    kv_cache_planning.py:416-556) buckets the layers by their whole KV spec (a DFlash drafter's layers, of another
    head shape, are a bucket of their own), takes the smallest bucket as the group size (the largest when it is under
    1.5x the smallest) and pads each bucket's last groups: ``N = group_size - len % group_size``, ``X = N / len``.
    Every group is ``group_size`` slots of one page each and one block spans every group, so a padded slot is a page
    allocated and never written: Qwen3.6-35B-A3B + its DFlash drafter (30 GDN, 10 full, 8 draft layers) is grouped
    by 8, and its 10 full layers take 2 groups of 8 slots: 16 pages where 10 are used ("may waste at most 60.00%").
    """
    buckets: dict[tuple, list[int]] = {}
    for g in layout.groups:
        real = [i for i in g.layers if i is not None]
        key = (g.kind, g.window, layout.specs[real[0]].shape if real else None)
        counts = buckets.setdefault(key, [0, 0])
        counts[0] += len(real)
        counts[1] += len(g.layers) - len(real)
    return [f"Add {pad} padding layers, may waste at most {pad / n * 100:.2f}% KV cache memory"
            for n, pad in buckets.values() if pad]


def _mtp_layers(spec: ModelSpec) -> int:
    """The MTP layers a checkpoint holds, from the note its family formula left (0 if none)."""
    for note in spec.notes:
        m = re.search(r"(?:mtp_num_hidden_layers|num_nextn_predict_layers)=(\d+)", note)
        if m:
            return int(m.group(1))
    return 0


def _layer_params(spec: ModelSpec) -> int:
    """One full-attention decoder layer of ``spec``: its attention share plus one layer of MLP / experts."""
    p = spec.params
    full = max(1, sum(1 for c in spec.layers if c.window is None) or len(spec.layers))
    attention = (p.get("attention", 0) + p.get("attention_kv", 0)) // full
    ffn = sum(p.get(g, 0) for g in ("mlp", "experts", "shared_experts", "router", "expert_bias")) // spec.num_layers
    return attention + ffn + 2 * spec.hidden_size


#: DFlash drafters published for a target, by Hub id: their ``config.json`` as quoted in public code (the drafter is
#: often served from a local folder, which a log names only by path). vLLM 0.20-0.22's ``qwen3_dflash.py`` builds
#: every draft layer as full attention (it reads no ``layer_types``; 0.33 does, ``_resolve_layer_attention``, and
#: needs the V2 runner for mixed layers), so the layers are listed as full attention here.
PUBLISHED_DFLASH: Mapping[str, Mapping[str, Any]] = {
    # config.json of snapshot 42d3b34d588423cdae7ba8f53a8cf7789346a719, as a public Rust test parsing it asserts
    # ("8 layers, hidden=2048, ... intermediate_size 6144, 32 heads, 4 KV heads, head_dim 128, layer_ids=[1, 10,
    # 19, 28, 37]"); 8 layers is also what vLLM's "Add 2/6 padding layers" for 30 GDN + 10 full layers implies
    "z-lab/Qwen3.6-35B-A3B-DFlash": {
        "model_type": "qwen3", "architectures": ["DFlashDraftModel"], "num_hidden_layers": 8, "hidden_size": 2048,
        "intermediate_size": 6144, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
        "vocab_size": 248320, "tie_word_embeddings": False, "max_position_embeddings": 262144,
        "rms_norm_eps": 1e-06, "rope_theta": 10000000, "torch_dtype": "bfloat16", "block_size": 16,
        "dflash_config": {"mask_token_id": 248070, "target_layer_ids": [1, 10, 19, 28, 37]}},
    # "5 transformer layers, hidden=5120, GQA 32/8, intermediate=17408, vocab=248320; fc [5120 x 25600]" (a public
    # engine's notes on snapshot 0919688658996800f86b895034249700e9481106, "3.3 GB"); its F16 GGUF is 3,310.7 MiB
    "z-lab/Qwen3.6-27B-DFlash": {
        "model_type": "qwen3", "architectures": ["DFlashDraftModel"], "num_hidden_layers": 5, "hidden_size": 5120,
        "intermediate_size": 17408, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "vocab_size": 248320, "tie_word_embeddings": False, "max_position_embeddings": 262144,
        "rms_norm_eps": 1e-06, "rope_theta": 10000000, "torch_dtype": "bfloat16", "block_size": 16,
        "dflash_config": {"mask_token_id": 248070, "target_layer_ids": [1, 16, 31, 46, 61]}},
}


def published_drafter(name: str) -> str | None:
    """The published drafter a Hub id or a local folder stands for: its last path component, case aside, is the
    repository's name (``/data/models/Qwen3.6-35B-A3B-Dflash/`` -> ``z-lab/Qwen3.6-35B-A3B-DFlash``); else None.

    >>> published_drafter("~/.cache/huggingface/qwen3.6-27b-dflash"), published_drafter("/models/my-drafter")
    ('z-lab/Qwen3.6-27B-DFlash', None)
    """
    last = name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].lower()
    return next((hub for hub in PUBLISHED_DFLASH if hub.rsplit("/", 1)[-1].lower() == last), None)


def resolve_draft(name: str) -> ModelSpec:
    """The draft checkpoint's spec: a local folder with a ``config.json``, a published drafter (by Hub id, or a
    folder named as it is published: :func:`published_drafter`), a Hub id (through :mod:`course_lib.model.hub`) or a
    preset name."""
    from ...model.hub import hub_spec, is_hub_id
    from pathlib import Path
    from ...model.models import from_hf_config
    from ...model.presets import get_model
    if (Path(name) / "config.json").is_file():        # a local checkpoint folder, as vLLM takes it
        return from_hf_config(str(Path(name)), name=Path(name).name)
    published = published_drafter(name)
    if published is not None:
        spec = from_hf_config(PUBLISHED_DFLASH[published], name=published)
        how = "" if published == name else f"{name!r} taken as the published {published} (its folder's name); "
        return replace(spec, notes=spec.notes + (f"{how}config as published (course_lib.runtimes.vllm.spec)",))
    if is_hub_id(name):
        return hub_spec(name)
    try:
        return get_model(name)
    except (CourseInputError, KeyError):
        pass
    raise CourseInputError(f"--speculative-config model {name[:60]!r} is neither a folder with a config.json, a Hub id "
                           f"(ORG/NAME) nor a preset; name the draft checkpoint by its Hub id")


def dflash_fc_params(draft: ModelSpec, target_hidden_size: int, name: str | None) -> int:
    """DFlash's ``fc`` (the target's hidden states of ``len(target_layer_ids)`` layers, concatenated, to the draft's
    width) and its ``hidden_norm``: vLLM 0.33 ``_get_dflash_fc_input_size`` (``target_hidden_size x
    len(aux_layers)``, else ``x num_hidden_layers``), 0.20.2 ``DFlashQwen3Model`` the same.

    >>> from course_lib.model.models import from_hf_config
    >>> d = from_hf_config(PUBLISHED_DFLASH["z-lab/Qwen3.6-35B-A3B-DFlash"])
    >>> dflash_fc_params(d, 2048, "z-lab/Qwen3.6-35B-A3B-DFlash")    # 5 x 2048 x 2048 + 2048
    20973568
    """
    published = published_drafter(name or "")
    ids = (PUBLISHED_DFLASH[published].get("dflash_config", {}).get("target_layer_ids") if published else None)
    features = len(ids) if ids else draft.num_layers
    return features * target_hidden_size * draft.hidden_size + draft.hidden_size


@dataclass(frozen=True)
class Drafter:
    """What the drafter adds: parameters (counted in the compute dtype), KV layers, and why."""

    params: int
    layers: tuple[LayerCache, ...]
    note: str


def drafter(spec: ModelSpec, sd: SpeculativeDecoding, draft: ModelSpec | None = None) -> Drafter:
    """The drafter ``sd`` loads next to ``spec`` (``draft``: the draft checkpoint's spec, else resolved by name)."""
    if not sd.loads_drafter:
        return Drafter(0, (), f"{sd.method}: no drafter model (no weights, no KV layers)")
    h = spec.hidden_size
    if sd.method in MTP_METHODS:
        n = _mtp_layers(spec) or 1
        if "mtp" in spec.not_loaded:            # DeepSeek-style: counted by the family, embedding/head shared
            params = max(0, spec.not_loaded["mtp"] - n * 2 * spec.vocab_size * h)
        else:                                   # one decoder layer + eh_proj (2h -> h) + two norms per MTP layer
            params = n * (_layer_params(spec) + 2 * h * h + 2 * h)
        full = next((c for c in spec.layers if c.window is None), spec.layers[0] if spec.layers else None)
        layers = tuple([full] * n) if full is not None else ()
        return Drafter(params, layers, f"{sd.method}: {n} MTP layer(s) of the checkpoint ({params:,} params, "
                       f"embedding and LM head shared with the target)")
    if draft is None:
        try:
            draft = resolve_draft(sd.model or "")
        except CourseInputError:
            if sd.strict:
                raise
            return Drafter(0, (), f"{sd.method} drafter weights not counted: its config is not known "
                           f"({(sd.model or '')[:60]!r} is no folder with a config.json here, no published drafter, "
                           f"Hub id in the cache nor preset); no draft KV layers; graph sizes only")
    p = dict(draft.params)
    if sd.method == "draft_model":
        params = sum(p.values())
        why = "the whole draft model"
    else:
        shared = p.get("embedding", 0) + p.get("lm_head", 0)
        fc = (dflash_fc_params(draft, h, sd.model) if sd.method == "dflash"
              else (3 if sd.method == "eagle3" else 2) * h * draft.hidden_size)
        params = sum(p.values()) - shared + fc
        why = (f"{draft.num_layers} draft layer(s) + fc ({fc:,} params); embedding and LM head shared with the "
               f"target")
    taken = next((n for n in draft.notes if "taken as the published" in n), "")
    return Drafter(params, tuple(draft.layers), f"{sd.method} drafter {sd.model}: {why} ({params:,} params)"
                   + (f"; {taken.split('; ')[0]}" if taken else ""))


def with_drafter(spec: ModelSpec, sd: SpeculativeDecoding | None, draft: ModelSpec | None = None) -> ModelSpec:
    """``spec`` with the drafter's parameters (group ``drafter``) and KV layers added.

    A draft checkpoint's parameters are counted in the target's compute dtype (EAGLE heads and DFlash drafters are
    published in bf16); MTP layers, part of the target checkpoint, in its quantized format.

    The layers count toward CUDA graphs and the KV layout as vLLM registers them (pipeline parallelism splits the
    drafter with the target's layers here, which vLLM does not do: its drafter runs on the last stage).
    """
    if sd is None or not sd.loads_drafter:
        return spec
    d = drafter(spec, sd, draft)
    params = dict(spec.params)
    params["drafter"] = params.get("drafter", 0) + d.params
    fmt = spec.quantization
    if sd.method in MTP_METHODS and fmt is not None and fmt.quantized is not None:
        # the MTP layers are the checkpoint's own, stored (and loaded by vLLM) with its quantization config
        fmt = replace(fmt, quantized_groups=fmt.quantized_groups + ("drafter",))
    return replace(spec, params=params, layers=spec.layers + d.layers, num_layers=spec.num_layers + len(d.layers),
                   notes=spec.notes + (f"speculative decoding: {d.note}",), checkpoint=None, quantization=fmt)

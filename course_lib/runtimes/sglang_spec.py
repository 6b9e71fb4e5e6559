"""SGLang's speculative decoding (``--speculative-algorithm`` and its four knobs): the drafter's weights and KV pool.

Read from SGLang's wheels 0.5.5, 0.5.10, 0.5.20 and 0.5.23 (releases between them not read; the release table in
:mod:`.sglang` says which rule each takes):

* **Flags** (``server_args.py`` ``_handle_speculative_decoding``, 0.5.5; ``arg_groups/speculative_hook.py``
  ``_handle_eagle_family`` / ``_handle_ngram``, 0.5.23): ``NEXTN`` is an alias of ``EAGLE``; the EAGLE family and
  NGRAM set ``max_running_requests`` to 48 when it is not given; ``--speculative-num-steps`` unset picks
  (steps, topk, draft tokens) by architecture (``auto_choose_speculative_params``: Llama (5, 4, 8), DeepSeek-V3 and
  the MTP families (3, 1, 4), STANDALONE (3, 1, 4)); with ``topk == 1`` the draft tokens become ``steps + 1``.
  DeepSeek-V3/GLM-4.5/Bailing targets with no ``--speculative-draft-model-path`` draft from their own checkpoint's
  MTP layers (``num_nextn_predict_layers``). NGRAM loads no model.
* **What the draft worker constructs** (``models/llama_eagle3.py``, ``models/deepseek_nextn.py``,
  ``speculative/eagle_worker_v2.py``, ``speculative/standalone_worker_v2.py``, 0.5.23): an EAGLE-3 head builds its
  own embedding (vocab x hidden), one decoder layer whose QKV takes ``2 x hidden``, an extra ``hidden_norm``, an
  ``fc`` from ``3 x`` the target's hidden size, and an LM head over ``draft_vocab_size``; an MTP draft builds an
  embedding, the MTP layer(s) (with ``eh_proj`` 2h -> h and two norms) and an LM head; EAGLE builds an embedding,
  its layers, ``fc`` (2h -> h) and an LM head. ``init_lm_head`` then swaps in the target's embedding (EAGLE-3) or
  embedding and head (EAGLE, MTP) and frees the draft's; STANDALONE shares nothing.

>>> sd = SglangSpeculative("NEXTN")
>>> sd.resolved, sd.loads_model
('EAGLE', True)
>>> spec_capture_sizes(256, 48)[-3:], len(spec_capture_sizes(256, 48))
([40, 44, 48], 23)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CourseInputError
from ..model.spec import ModelSpec

#: The algorithms modelled here (SGLang 0.5.23 also has DFLASH, DSPARK, FROZEN_KV_MTP, UNO: not modelled).
ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
#: ``max_running_requests`` when speculative decoding is on and it is not given (both releases read).
SPEC_MAX_RUNNING_REQUESTS = 48


@dataclass(frozen=True)
class SglangSpeculative:
    """One launch's speculative flags, named as SGLang names them (``--speculative-*``); None takes SGLang's default."""

    algorithm: str
    draft_model_path: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    #: False (``from-log``): a draft that does not resolve (a local path) adds nothing, with a note, instead of refusing
    strict: bool = True

    @property
    def resolved(self) -> str:
        """The algorithm after SGLang's alias (NEXTN is EAGLE)."""
        return "EAGLE" if self.algorithm == "NEXTN" else self.algorithm

    @property
    def loads_model(self) -> bool:
        return self.algorithm != "NGRAM"


def parse_sglang_speculative(algorithm: str | None, draft_model_path: str | None = None, num_steps: int | None = None,
                             eagle_topk: int | None = None, num_draft_tokens: int | None = None
                             ) -> SglangSpeculative | None:
    """The flags, checked: one line naming the bad value (exit 2 from the CLI).

    >>> parse_sglang_speculative("eagle3", "some/draft", 3, 1, 4).algorithm
    'EAGLE3'
    """
    others = {"--speculative-draft-model-path": draft_model_path, "--speculative-num-steps": num_steps,
              "--speculative-eagle-topk": eagle_topk, "--speculative-num-draft-tokens": num_draft_tokens}
    if algorithm is None:
        given = [flag for flag, value in others.items() if value is not None]
        if given:
            raise CourseInputError(f"{given[0]} needs --speculative-algorithm (one of {', '.join(ALGORITHMS)})")
        return None
    name = str(algorithm).upper()
    if name not in ALGORITHMS:
        raise CourseInputError(f"--speculative-algorithm={str(algorithm)[:40]!r} is not modelled here; use one of "
                               f"{', '.join(ALGORITHMS)}")
    if name == "NGRAM" and draft_model_path is not None:
        raise CourseInputError("--speculative-draft-model-path is not used with --speculative-algorithm NGRAM "
                               "(it drafts from the prompt, no model); leave it out")
    if num_steps is None and (eagle_topk is not None or num_draft_tokens is not None) and name != "NGRAM":
        # server_args.py: `assert speculative_eagle_topk is None and speculative_num_draft_tokens is None`
        raise CourseInputError("--speculative-eagle-topk / --speculative-num-draft-tokens need "
                               "--speculative-num-steps too (SGLang chooses all three or none)")
    return SglangSpeculative(name, draft_model_path, num_steps, eagle_topk, num_draft_tokens)


def spec_capture_sizes(cuda_graph_max_bs: int, max_running_requests: int) -> list[int]:
    """The decode batch sizes SGLang captures with speculative decoding on.

    ``_generate_cuda_graph_batch_sizes`` (server_args.py 0.5.5; ``generate_decode_cuda_graph_batch_sizes``,
    arg_groups/cuda_graph_hook.py 0.5.23): range(1, 9) + range(10, 33, 2) + range(40, 65, 4) + range(72, 257, 8) +
    range(272, max_bs + 1, 16); ``get_batch_sizes_to_capture`` (cuda_graph_runner.py) keeps those up to the request
    pool's size and adds that size.
    """
    sizes = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
             + list(range(272, cuda_graph_max_bs + 1, 16)))
    sizes = [s for s in sizes if s <= cuda_graph_max_bs]
    if max(sizes, default=0) > max_running_requests:
        sizes = [s for s in sizes if s <= max_running_requests] + [max_running_requests]
    return sorted(set(sizes))


def _mtp_layers(spec: ModelSpec) -> int:
    from .vllm.spec import _mtp_layers as read
    return read(spec)


def auto_params(spec: ModelSpec, sd: SglangSpeculative, other_default: tuple[int, int, int]) -> tuple[int, int, int]:
    """``auto_choose_speculative_params``: (steps, topk, draft tokens) by architecture.

    Presets carry no ``architectures``: a Llama (model_type ``llama``) takes Llama's (5, 4, 8), a checkpoint with MTP
    layers DeepSeek's (3, 1, 4); any other model the release's fallback (``other_default``).
    """
    archs = set(spec.architectures)
    if sd.algorithm == "STANDALONE":
        return (3, 1, 4)
    if "LlamaForCausalLM" in archs or (not archs and spec.model_type == "llama"):
        return (5, 4, 8)
    if _mtp_layers(spec) or archs & {"DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV2ForCausalLM",
                                     "GptOssForCausalLM", "Glm4MoeForCausalLM", "BailingMoeForCausalLM"}:
        return (3, 1, 4)
    return other_default


def _raw_config(name: str) -> dict[str, Any]:
    """The draft's config.json as a dict (a local folder or a Hub id), else {} (a preset)."""
    from ..model.hub import is_hub_id, resolve
    path = Path(name) / "config.json"
    try:
        if path.is_file():
            return json.loads(path.read_text())
        if is_hub_id(name):
            return json.loads(Path(resolve(name).config_path).read_text())
    except (OSError, ValueError):
        return {}
    return {}


@dataclass(frozen=True)
class SglangDrafter:
    """What SGLang's draft worker adds, per GPU.

    constructed_params_by_dtype: {"quantized"|"base": params} the draft model holds right after loading (what the
    0.5.20+ profile sees). shared_params: of those, the embedding / LM head freed when the target's are swapped in.
    kv_layers: the draft's attention layers (its KV pool). draft_cell_bytes: one token of the draft's own pool.
    steps / topk / draft_tokens: after SGLang's defaults. note: in words.
    """

    algorithm: str
    constructed_bytes: int
    shared_bytes: int
    kv_layers: int
    draft_cell_bytes: int
    steps: int
    topk: int
    draft_tokens: int
    note: str

    @property
    def kept_bytes(self) -> int:
        """What stays once the shared embedding / head are freed."""
        return self.constructed_bytes - self.shared_bytes


def sglang_drafter(spec: ModelSpec, sd: SglangSpeculative, *, fmt, kv_dtype, tp: int,
                   other_default: tuple[int, int, int] = (3, 1, 4), draft: ModelSpec | None = None) -> SglangDrafter:
    """The draft worker ``sd`` builds next to ``spec`` at tensor parallelism ``tp`` (weights in ``fmt``)."""
    from ..model.models import kv_cache_bytes_per_token, weights_format
    from .vllm.spec import resolve_draft
    if sd.num_steps is None:
        steps, topk, tokens = auto_params(spec, sd, other_default) if sd.loads_model else (0, 0, 0)
    else:
        steps, topk, tokens = sd.num_steps, sd.eagle_topk or 1, sd.num_draft_tokens
    if sd.algorithm == "NGRAM":
        tokens = sd.num_draft_tokens or 12
        return SglangDrafter("NGRAM", 0, 0, 0, 0, steps, topk, tokens,
                             "NGRAM: drafts from the prompt, no model (no weights, no KV pool)")
    if topk == 1 or tokens is None:
        tokens = steps + 1          # "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1"
    h, v = spec.hidden_size, spec.vocab_size
    base = fmt.dtype_for("embedding")
    target_cell = kv_cache_bytes_per_token(spec, kv_dtype, tp)
    n_mtp = _mtp_layers(spec)
    own = sd.draft_model_path is not None and sd.draft_model_path.split("@")[0] == spec.name.split("@")[0]
    if sd.draft_model_path is None or (own and n_mtp):   # server_args.py sets the path to the target's own
        if (sd.resolved != "EAGLE" or not n_mtp) and not sd.strict:
            return SglangDrafter(sd.algorithm, 0, 0, 0, 0, steps, topk, tokens,
                                 f"{sd.algorithm} draft not counted (no draft path and no MTP layers in {spec.name})")
        if sd.resolved != "EAGLE" or not n_mtp:
            raise CourseInputError(f"--speculative-algorithm {sd.algorithm} needs --speculative-draft-model-path "
                                   f"(only a target with MTP layers, num_nextn_predict_layers, drafts from its own "
                                   f"checkpoint; {spec.name} has none)")
        mtp = spec.not_loaded.get("mtp") or 0
        shared = 2 * v * h                   # the NextN model's own embed_tokens and lm_head
        layers = max(0, mtp - n_mtp * shared) if mtp else 0
        if not layers:
            from .vllm.spec import _layer_params
            layers = n_mtp * (_layer_params(spec) + 2 * h * h + 2 * h)
        qdt = fmt.quantized if fmt.quantized is not None else base
        constructed = qdt.bytes_for(math.ceil(layers / tp)) + base.bytes_for(math.ceil(shared / tp))
        per_layer = target_cell // max(1, spec.num_layers)
        return SglangDrafter(sd.algorithm, constructed, base.bytes_for(math.ceil(shared / tp)), n_mtp,
                             per_layer * n_mtp, steps, topk, tokens,
                             f"{sd.algorithm} from the target's own {n_mtp} MTP layer(s) ({layers:,} params, "
                             f"{fmt.quantized.name if fmt.quantized is not None else base.name}) + its own embedding "
                             f"and LM head ({shared:,} params, {base.name}; freed once the target's are shared)")
    if draft is None:
        try:
            draft = resolve_draft(sd.draft_model_path)
        except CourseInputError as exc:
            if sd.strict:
                raise
            return SglangDrafter(sd.algorithm, 0, 0, 0, 0, steps, topk, tokens,
                                 f"{sd.algorithm} draft not counted ({exc})")
    raw = _raw_config(sd.draft_model_path)
    dfmt = weights_format(draft, None)
    dbase = dfmt.dtype_for("embedding")
    p = dict(draft.params)
    hd = draft.hidden_size
    embedding, head = p.get("embedding", 0), p.get("lm_head", 0)
    body = sum(p.values()) - embedding - head
    if sd.algorithm == "EAGLE3":
        q_kv = (draft.num_attention_heads + 2 * draft.num_kv_heads) * draft.head_dim
        aux = len((raw.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") or ()) or 3
        target_h = raw.get("target_hidden_size") or h
        body += hd * q_kv + hd + aux * target_h * hd     # QKV over 2 x hidden, hidden_norm, fc
        draft_vocab = raw.get("draft_vocab_size")
        tied = draft.tie_word_embeddings
        head = 0 if tied else (draft_vocab or draft.vocab_size) * hd
        shared = embedding if target_h == hd else 0
        if not tied and draft_vocab is None:
            shared += head                               # load_lm_head_from_target: the target's head is used
        why = (f"1 layer with QKV over 2 x hidden, fc {aux} x {target_h} -> {hd}, LM head over "
               f"{draft_vocab or draft.vocab_size:,} tokens; its embedding freed for the target's")
    elif sd.algorithm == "EAGLE":
        body += 2 * h * hd                               # fc: 2h -> h
        shared = embedding + head
        why = "layers + fc (2h -> h); embedding and LM head freed for the target's"
    else:                                                # STANDALONE: a whole model, nothing shared
        shared = 0
        why = "the whole draft model (nothing shared)"
    constructed = dbase.bytes_for(math.ceil((body + embedding + head) / tp))
    shared_bytes = dbase.bytes_for(math.ceil(shared / tp))
    n = max(1, draft.num_layers)
    own_cell = kv_cache_bytes_per_token(draft, kv_dtype, tp)
    return SglangDrafter(sd.algorithm, constructed, shared_bytes, n, own_cell, steps, topk, tokens,
                         f"{sd.algorithm} draft {sd.draft_model_path}: {why} ({dbase.name})")


def joint_cell_bytes(target_cell: int, target_layers: int, draft_layers: int) -> int:
    """0.5.20+: one token of the target's pool plus the draft's, as ``DefaultPoolConfigurator`` sizes it
    (model_executor/pool_configurator.py: "assumes the draft shares the target's per-layer KV size"):
    ``cell + int(cell x draft_layers / target_layers)``.

    >>> joint_cell_bytes(131_072, 32, 1)      # Llama-3.1-8B bf16 + a 1-layer EAGLE-3 head
    135168
    """
    return target_cell + int(target_cell * draft_layers / target_layers)

"""Every decoder the installed transformers registers, shrunk, estimated, and checked against the model it builds.

For each ``model_type`` of transformers' causal-LM and image-text-to-text mappings:

1. its default config (``AutoConfig.for_model``), **shrunk** (:func:`configs`): fewer layers, the
   fewest of :data:`LAYER_STEPS` that keep every cache-layer kind of the default (a hybrid keeps its
   attention layers, Gemma keeps a global layer), or the default itself when transformers cannot run
   the shrunk one. Widths stay as they are: on the meta device they cost nothing, and a width changed
   by hand may break a family's own checks;
2. our estimate: ``course_lib.model.models.from_hf_config`` (a formula for the families we have, else the
   meta-device fallback, :mod:`course_lib.model.meta_model`);
3. the oracle (:mod:`oracle`): transformers builds the same config on the meta device, and its
   parameters, persistent buffers and the cache its text decoder fills at two other lengths are read
   with transformers' own cache API. For a family with a formula the fallback is checked too: formula
   and fallback must agree.

A type is **exact** when parameters, buffers, and per layer the KV values per token, the window and the
per-sequence state all agree. Otherwise the outcome says why, in one of :data:`OUTCOMES`.

Run as a script for the outcome table (today's figure: benchmarks/results/every-decoder.md)::

    .venv/bin/python tests/course_lib/model/every_decoder.py
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]

#: Layer counts tried in turn when shrinking (the default's own count when none keeps its cache kinds).
LAYER_STEPS = (4, 8, 12, 16, 24, 32)
#: The keys a config names its depth by.
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
#: How a type can end.
OUTCOMES = {
    "exact": "parameters, buffers, KV per token per layer, windows and per-sequence state all agree",
    "not decoder-only": "an encoder-decoder default config (is_encoder_decoder): not budgeted here",
    "transformers cannot build its default config": "the oracle itself fails: the default config is "
                                                     "incomplete or needs a library that is not installed",
    "transformers cannot run it on the meta device": "the oracle itself fails: a data-dependent step "
                                                     "(.item(), nonzero) or a forward that needs an image",
    "refused": "our estimate refuses it with one line (a cache layer kind we do not model)",
    "mismatch": "our estimate and the built model disagree (a bug)",
    "cache checked apart": "parameters and buffers agree; the cache grows in steps the oracle's two short "
                           "forwards cannot see, and is checked at long lengths in its own test",
}

#: Types whose cache the oracle's short forwards cannot measure, and where it is checked instead.
CHECKED_APART = {"deepseek_v4": "test_deepseek_v4.py: a compressed layer adds one entry every 4 or 128 tokens"}


@dataclass(frozen=True)
class Result:
    model_type: str
    outcome: str
    detail: str = ""
    layers: int = 0
    formula: bool = False
    seconds: float = 0.0


def decoder_types() -> list[str]:
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)

    return sorted(set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) | set(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES))


def _shrink(d: dict[str, Any], n_new: int) -> bool:
    """Cut every nested config to ``n_new`` layers, with its per-layer lists, strings and index maps."""
    changed = False
    for value in d.values():
        if isinstance(value, dict):
            changed |= _shrink(value, n_new)
    for key in LAYER_KEYS:
        old = d.get(key)
        if not (isinstance(old, int) and not isinstance(old, bool) and old > n_new):
            continue
        d[key] = n_new
        for k, v in list(d.items()):
            if k == "model_type":
                continue
            if isinstance(v, (list, str)) and len(v) == old:                     # one entry per layer
                d[k] = v[:n_new]
            elif isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool)
                                                   and 0 <= x < old for x in v):  # layer indices
                d[k] = [x for x in v if x < n_new]
            elif isinstance(v, dict) and v and all(str(x).isdigit() for x in v):  # layer index -> settings
                d[k] = {x: y for x, y in v.items() if int(x) < n_new}
        return True
    return changed


def _cache_kinds(config) -> frozenset[str] | None:
    from transformers.cache_utils import get_layer_types_and_kwargs

    try:
        types, _ = get_layer_types_and_kwargs(config.get_text_config(decoder=True))
    except Exception:
        return None
    return frozenset(types)


def configs(model_type: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(shrunk, default): the default config of ``model_type``, and it with the fewest layers of
    :data:`LAYER_STEPS` that keep its cache kinds (the default itself when none does)."""
    from transformers import AutoConfig

    default = AutoConfig.for_model(model_type)
    want = _cache_kinds(default)
    full = default.to_dict()
    for n in LAYER_STEPS:
        d = copy.deepcopy(full)
        if not _shrink(d, n):
            break
        kwargs = {k: v for k, v in d.items() if k != "model_type"}
        try:
            config = AutoConfig.for_model(model_type, **kwargs)
        except Exception:
            continue
        if want is None or _cache_kinds(config) == want:
            return d, full
    return full, full


def _layers(cfg: dict[str, Any]) -> int:
    for key in LAYER_KEYS:
        if isinstance(cfg.get(key), int):
            return cfg[key]
    text = cfg.get("text_config")
    return _layers(text) if isinstance(text, dict) else 0


def _cross_layers(cfg: dict[str, Any]) -> list[int]:
    """The decoder's cross-attention layers (mllama's ``cross_attention_layers``), or []."""
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    layers = text.get("cross_attention_layers") or []
    return [i for i in layers if isinstance(i, int) and 0 <= i < _layers(cfg)]


def _compare(spec, truth: dict[str, Any], cross: list[int] = ()) -> str:
    """'' when ``spec`` agrees with the oracle's figures, else what differs.

    ``cross``: cross-attention layers. transformers fills their cache only when an image is given (the
    vision tokens' K/V, a fixed size per request), so two text-only forwards leave them out; the mllama
    formula gives them per-token blocks as vLLM V0's block table does (course_lib/model/families/mllama.py).
    Those layers are set aside from the comparison when the spec has them and the built model's cache does not.
    """
    layers = list(spec.layers)
    if cross and len(layers) == len(truth["kv"]) + len(cross):
        layers = [layer for i, layer in enumerate(layers) if i not in set(cross)]
    ours = {"params": spec.params_total, "buffers": spec.buffers_total,
            "kv": [layer.values_per_token for layer in layers], "windows": [layer.window for layer in layers],
            "states": [(s.recurrent_values, s.conv_values) for s in spec.states]}
    return "; ".join(f"{k}: ours {ours[k]}, transformers {truth[k]}" for k in ours if ours[k] != truth[k])


def check(model_type: str) -> Result:
    """The outcome of one model_type (see :data:`OUTCOMES`)."""
    import oracle
    from course_lib.model import meta_model
    from course_lib.errors import CourseInputError
    from course_lib.model.families import supported
    from course_lib.model.models import from_hf_config

    start = time.perf_counter()
    done = lambda outcome, detail="": Result(model_type, outcome, " ".join(detail.split())[:300],  # noqa: E731
                                             _layers(cfg), model_type in supported(),
                                             round(time.perf_counter() - start, 2))
    cfg: dict[str, Any] = {}
    try:
        cfg, default = configs(model_type)
    except Exception as exc:
        return done("transformers cannot build its default config", f"{type(exc).__name__}: {exc}")
    if cfg.get("is_encoder_decoder"):
        return done("not decoder-only")
    try:
        try:
            truth = oracle.measure(cfg)
        except (oracle.CannotBuild, oracle.CannotRun):
            if cfg is default:
                raise
            cfg = default          # the cut lost something the family needs (a hybrid's attention layers)
            truth = oracle.measure(cfg)
    except oracle.CannotBuild as exc:
        return done("transformers cannot build its default config", str(exc))
    except oracle.CannotRun as exc:
        return done("transformers cannot run it on the meta device", str(exc))
    try:
        spec = from_hf_config(cfg, name=model_type)
    except CourseInputError as exc:
        text = str(exc)
        return done("refused" if "\n" not in text else "mismatch", text)
    except Exception as exc:         # anything but one line is a bug of ours
        return done("mismatch", f"from_hf_config raised {type(exc).__name__}: {exc}")
    if model_type in CHECKED_APART:
        differs = "; ".join(f"{k}: ours {v}, transformers {truth[k]}" for k, v in
                            (("params", spec.params_total), ("buffers", spec.buffers_total)) if v != truth[k])
        return done("mismatch", differs) if differs else done("cache checked apart", CHECKED_APART[model_type])
    differs = _compare(spec, truth, _cross_layers(cfg))
    if not differs and model_type in supported():        # the formula must agree with the fallback too
        try:
            differs = _compare(meta_model.meta_spec(cfg, model_type), truth)
        except CourseInputError as exc:
            differs = f"the fallback refuses what the formula estimates: {exc}"
        differs = f"fallback: {differs}" if differs else ""
    return done("mismatch", differs) if differs else done("exact")


def _init() -> None:
    sys.path[:0] = [str(REPO), str(HERE)]
    import warnings

    warnings.filterwarnings("ignore")


def walk(types: list[str] | None = None, workers: int | None = None) -> list[Result]:
    """Every type's :class:`Result`, in worker processes (one per CPU, at most 4)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    types = decoder_types() if types is None else types
    workers = workers or max(1, min(4, os.cpu_count() or 1))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init) as pool:
        # one type at a time: a few types take 5-15 s (inkling2_loop_text, gemma3n_text, zamba, near the end of
        # the alphabet xlstm), and a chunk of four left to one worker at the end keeps the other idle
        return sorted(pool.map(check, types, chunksize=1), key=lambda r: r.model_type)


def summary(results: list[Result]) -> str:
    """The outcome table: outcomes with counts and their types."""
    lines = ["| outcome | types | which |", "|---|---:|---|"]
    for outcome in OUTCOMES:
        names = [r.model_type + ("*" if r.formula else "") for r in results if r.outcome == outcome]
        if names:
            lines.append(f"| {outcome} | {len(names)} | {', '.join(names)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    _init()
    began = time.perf_counter()
    out = walk(sys.argv[1:] or None)
    print(summary(out))
    print(f"\n{len(out)} types in {time.perf_counter() - began:.0f} s")
    for r in out:
        if r.outcome != "exact":
            print(json.dumps(asdict(r)))

"""What every ``course-memory`` verb shares: the one-line-error parser, model flags, JSON output."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from ..bounds import MAX_PARAMS, check_int
from ..models import ModelSpec, _override_params, from_hf_config
from ..presets import get_model

PROG = "course-memory"


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit code 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Let "--per-sequence -1GB" reach the value checks (which name it) instead of
        # argparse's "expected one argument": anything like "-1", "-1GB", "-.5" is a value.
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        raise SystemExit(2)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def add_model_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    """--config PATH | --model PRESET, plus --params N for an unsupported family."""
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--config", metavar="PATH",
                   help="a Hugging Face config.json, or a model folder (config.json beside its safetensors, "
                        "whose headers give the exact weight bytes)")
    g.add_argument("--model", metavar="PRESET", help="a preset model (see `course-memory presets`)")
    p.add_argument("--params", type=int, metavar="N", help="parameter count, for a model_type course_lib does not know")


def _config_name(path: Path) -> str:
    """A model folder's name; for .../Qwen3-8B/config.json, the folder's too."""
    if path.is_dir() or path.name == "config.json":
        folder = path if path.is_dir() else path.parent
        return folder.resolve().name or path.stem
    return path.stem


def model_from_args(args: argparse.Namespace) -> ModelSpec:
    params = None if args.params is None else check_int("--params", args.params, 1, MAX_PARAMS)
    if args.config:
        return from_hf_config(args.config, name=_config_name(Path(args.config)), params_total=params)
    spec = get_model(args.model)
    if params is not None:
        spec = _override_params(spec, params)
    return spec

"""What every ``course-memory`` verb shares: the one-line-error parser, model flags, JSON output."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from ..errors import check_count
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
    g.add_argument("--config", metavar="PATH", help="a Hugging Face config.json")
    g.add_argument("--model", metavar="PRESET", help="a preset model (see `course-memory presets`)")
    p.add_argument("--params", type=int, metavar="N", help="parameter count, for a model_type course_lib does not know")


def model_from_args(args: argparse.Namespace) -> ModelSpec:
    if args.config:
        return from_hf_config(args.config, name=Path(args.config).stem, params_total=args.params)
    spec = get_model(args.model)
    if args.params is not None:
        spec = _override_params(spec, check_count("params", args.params, 1))
    return spec

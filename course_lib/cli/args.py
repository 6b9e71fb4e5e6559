"""What every ``course-memory`` verb shares: the one-line-error parser, model flags, JSON output."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

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
    """Print ``data`` as JSON, laid out as :func:`json_text` does, written piece by piece."""
    write_json(data, sys.stdout.write)
    sys.stdout.write("\n")


#: One value as compact one-line JSON, by the C encoder; NaN and Infinity are refused (they are not JSON).
_encode = json.JSONEncoder(allow_nan=False).encode


def json_text(data: Any) -> str:
    """``data`` as JSON text: objects one key per line, an array of plain values on one line, other arrays one item per line.

    The same document as ``json.dumps(data, indent=2)`` gives, laid out so
    that a simulation's per-step series (a million numbers each) take one
    call of the C encoder and one line, instead of a line and a Python call
    per number; the records of a list stay one per line, so the text still
    reads and diffs line by line.

    >>> print(json_text({"steps": {"active": [1, 2, 3]}, "requests": [{"id": "r0"}, {"id": "r1"}], "n": 2}))
    {
      "steps": {
        "active": [1, 2, 3]
      },
      "requests": [
        {"id": "r0"},
        {"id": "r1"}
      ],
      "n": 2
    }
    >>> json_text({"share": float("nan")})
    Traceback (most recent call last):
    ...
    ValueError: Out of range float values are not JSON compliant...
    """
    parts: list[str] = []
    write_json(data, parts.append)
    return "".join(parts)


def write_json(value: Any, write: Callable[[str], object], indent: str = "") -> None:
    """Write ``value`` as :func:`json_text` lays it out, in pieces, through ``write`` (e.g. a file's write)."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        for i, (key, item) in enumerate(value.items()):
            name = key if isinstance(key, str) else _encode(key)    # as json: int, float, bool, None keys become strings
            write(("{\n" if i == 0 else ",\n") + inner + _encode(name) + ": ")
            write_json(item, write, inner)
        write(f"\n{indent}}}")
    elif isinstance(value, (list, tuple)) and value and isinstance(value[0], (dict, list, tuple)):
        for i, item in enumerate(value):
            write(("[\n" if i == 0 else ",\n") + inner + _encode(item))
        write(f"\n{indent}]")
    else:
        write(_encode(value))


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

"""What every ``course-memory`` verb shares: the one-line-error parser, bounded flags, model flags, JSON output.

Every numeric flag is parsed by :func:`whole` or :func:`number`, which refuse a value outside its
bound (:mod:`course_lib.bounds`) by the flag's name, as the user typed it; sizes go through
:func:`size` (one parser, :func:`course_lib.units.parse_bytes`). So a refusal reads
``--context-tokens=0 is below the bound 1; use a whole number from 1 to 100,000,000``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from ..bounds import MAX_PARAMS, parse_int_text, parse_number_text
from ..errors import CourseInputError
from ..model.models import ModelSpec, _override_params, from_hf_config
from ..model.hub import hub_spec, is_hub_id
from ..model.presets import MODEL_CONFIGS, get_model, model_names
from ..units import SIZE_LIKE, parse_bytes

PROG = "course-memory"

#: Characters that would start a new line on a terminal or for ``str.splitlines``.
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def one_line(text: str) -> str:
    """``text`` with every line break written as an escape, so a refusal stays one line.

    >>> one_line("--gpu='24\\nGB' is not a size")
    "--gpu='24\\\\nGB' is not a size"
    """
    return "".join(repr(ch)[1:-1] if ch in _LINE_BREAKS else ch for ch in str(text))


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit code 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Let "--per-sequence -1GB" or "--gpu -inf" reach the value checks (which name them) instead of
        # argparse's "expected one argument": anything like "-1", "-1GB", "-.5", "-inf", "-nan" is a value.
        self._negative_number_matcher = re.compile(r"^-(\.?\d|inf|nan)", re.IGNORECASE)

    def error(self, message: str) -> None:  # type: ignore[override]
        # A bounded flag's refusal already starts with the flag: drop argparse's "argument --x: " before it.
        message = re.sub(r"^argument (-[-\w]+): (?=\1=)", "", message)
        sys.stderr.write(one_line(f"{self.prog}: error: {message} (see --help)") + "\n")
        raise SystemExit(2)


def _flag_type(flag: str, parse: Callable[[str], Any], label: str) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except CourseInputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = label        # argparse names the type in some messages
    return convert


def whole(flag: str, lo: int, hi: int) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number in ``[lo, hi]``, refused by ``flag``'s name."""
    return _flag_type(flag, lambda text: parse_int_text(flag, text, lo, hi), "whole number")


def number(flag: str, lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False) -> Callable[[str], float]:
    """An argparse ``type`` for a finite number in ``[lo, hi]`` (open ends on request), refused by ``flag``'s name."""
    return _flag_type(flag, lambda text: parse_number_text(flag, text, lo, hi, lo_open=lo_open, hi_open=hi_open),
                      "number")


def size(flag: str, value: str | int, presets: Mapping[str, int] | None = None, *, what: str = "size") -> int:
    """Bytes of a size flag ("24GB", "24GiB", a byte count) or of a preset name, refused by ``flag``'s name.

    >>> size("--gpu", "24GB")
    24000000000
    >>> size("--bytes", "-1GB")
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: --bytes='-1GB' is negative; use a byte count such as 1500000000, or a size such as "24GB", "24GiB", "512MiB", "1.5 GB"
    """
    if presets and isinstance(value, str) and value.strip().lower() in presets:
        return presets[value.strip().lower()]
    try:
        return parse_bytes(value, name=flag)
    except CourseInputError:
        if presets and isinstance(value, str) and not SIZE_LIKE.match(value):
            raise CourseInputError(f"{flag}={value!r} is neither a preset ({', '.join(presets)}) nor a {what} "
                                   f"such as 24GB") from None
        raise  # it looks like a size: the size error says what is wrong with it


def device_size(flag: str, value: str) -> int:
    """Bytes of a --gpu flag (a preset or a size), refused by the flag's name; 0 bytes is no device."""
    from ..model.presets import GPU_BYTES

    device = size(flag, value, GPU_BYTES)
    if device == 0:
        raise CourseInputError(f"{flag}={value!r} is 0 bytes; give the device's memory, e.g. 24GB or a preset "
                               f"such as rtx-4090")
    return device


def reserve(flag: str, value: str | int) -> None:
    """Refuse a bad reserve by ``flag``'s name: a share such as "10%" (0% to below 100%) or a size."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            share = float(value.strip()[:-1])
        except ValueError:
            raise CourseInputError(f"{flag}={value!r} is not a percentage; use e.g. 10% or a size such as 2GB") from None
        if not 0 <= share < 100:       # also refuses nan and inf
            raise CourseInputError(f"{flag}={value!r} is outside 0%..100%; use e.g. 10% or a size such as 2GB")
        return
    size(flag, value)


def dtype_name(flag: str, value: str | None, allowed: tuple[str, ...] = ()) -> None:
    """Refuse a bad dtype name by ``flag``'s name (and, given ``allowed``, one outside it)."""
    from ..dtypes import VALID, get_dtype

    if value is None:
        return
    if len(value) > 40:    # the longest real name, "int4-g128-fp32", has 14 characters
        raise CourseInputError(f"{flag}={value[:40] + '...'!r} is not a dtype name; use {VALID}")
    try:
        name = get_dtype(value).name
    except CourseInputError as exc:
        raise renamed(exc, "dtype", flag) from None
    if allowed and name not in allowed:
        names = ", ".join(allowed[:-1]) + f" or {allowed[-1]}" if len(allowed) > 1 else allowed[0]
        raise CourseInputError(f"{flag}={value!r} cannot be measured: the model computes in {names}; use one of those")


def renamed(exc: CourseInputError, name: str, flag: str) -> CourseInputError:
    """The library's refusal of ``name=...`` as a refusal of ``flag=...`` (the flag the user typed)."""
    text = str(exc)
    return CourseInputError(flag + text[len(name):] if text.startswith(f"{name}=") else text)


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
    g.add_argument("--model", metavar="PRESET|ORG/NAME[@REV]",
                   help="a preset model (see `course-memory presets`), or a Hugging Face Hub id: its config.json "
                        "and safetensors headers are read (no weights) and cached; HF_HUB_OFFLINE=1 reads the "
                        "cache only")
    p.add_argument("--params", type=whole("--params", 1, MAX_PARAMS), metavar="N",
                   help="parameter count, for a model_type course_lib does not know")


def _config_name(path: Path) -> str:
    """A model folder's name; for .../Qwen3-8B/config.json, the folder's too."""
    if path.is_dir() or path.name == "config.json":
        folder = path if path.is_dir() else path.parent
        return folder.resolve().name or path.stem
    return path.stem


def model_from_args(args: argparse.Namespace) -> ModelSpec:
    if args.config is not None:
        try:   # the text as typed: Path("") would read as the current folder
            return from_hf_config(args.config, name=_config_name(Path(args.config)), params_total=args.params)
        except CourseInputError as exc:   # the reader names config=...; the user typed --config
            raise renamed(exc, "config", "--config") from None
    if args.model is not None and is_hub_id(args.model):
        try:
            return hub_spec(str(args.model).strip(), params_total=args.params)
        except CourseInputError as exc:   # the reader names model=...; the user typed --model
            raise renamed(exc, "model", "--model") from None
    if args.model is not None and str(args.model).strip().lower() not in MODEL_CONFIGS:
        raise CourseInputError(f"--model={args.model!r} is not a preset; use one of {', '.join(model_names())}, "
                               f"a Hub id such as Qwen/Qwen3-8B, or --config PATH")
    spec = get_model(args.model)
    if args.params is not None:
        spec = _override_params(spec, args.params)
    return spec


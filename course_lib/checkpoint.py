"""The exact bytes of a model folder's weights, from its safetensors metadata (no tensor is loaded).

Two sources, in order:

1. ``model.safetensors.index.json``: ``metadata.total_size`` is the bytes of
   every tensor of every shard (what ``save_pretrained`` writes);
2. the ``*.safetensors`` files themselves: each starts with an 8-byte
   little-endian length N, then N bytes of JSON naming every tensor's dtype,
   shape and ``data_offsets``. Only those N + 8 bytes are read.

A safetensors header by hand: a file holding one fp16 tensor of shape [2, 3]
has the header ``{"w": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 12]}}``:
6 values x 2 bytes = 12 bytes of data.

>>> header = {"w": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 12]}}
>>> tensor_bytes(header), tensor_count(header)
(12, 6)
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .bounds import MAX_DEVICE_BYTES, MAX_DIMENSION, check_int
from .errors import CourseInputError

INDEX = "model.safetensors.index.json"
#: A header is JSON of names, dtypes and shapes: real ones are under a few MB even for 100k tensors.
MAX_HEADER_BYTES = 100 * 2**20
#: Bits per element of each safetensors dtype.
DTYPE_BITS = {"F64": 64, "I64": 64, "U64": 64, "F32": 32, "I32": 32, "U32": 32, "F16": 16, "BF16": 16,
              "I16": 16, "U16": 16, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "I8": 8, "U8": 8, "BOOL": 8,
              "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}


@dataclass(frozen=True)
class Checkpoint:
    """What a model folder's safetensors hold.

    total_bytes: bytes of every tensor (the weights pool's exact size on one GPU).
    source: where the figure comes from, in words.
    params: stored elements (``None`` when only the index was read); packed
        formats (int4 in uint8/int32, fp4 blocks) store several weights per element.
    bytes_by_dtype: bytes per safetensors dtype, when the headers were read.
    """

    folder: str
    total_bytes: int
    source: str
    params: int | None = None
    bytes_by_dtype: Mapping[str, int] = field(default_factory=dict)


def tensor_bytes(header: Mapping[str, Any]) -> int:
    """Bytes of the tensors a parsed header describes (from their ``data_offsets``)."""
    return sum(int(t["data_offsets"][1]) - int(t["data_offsets"][0]) for k, t in header.items() if k != "__metadata__")


def tensor_count(header: Mapping[str, Any]) -> int:
    """Elements of the tensors a parsed header describes (from their shapes)."""
    return sum(math.prod(t["shape"]) for k, t in header.items() if k != "__metadata__")


def read_header(path: Path) -> dict[str, Any]:
    """The JSON header of one safetensors file, checked; the tensors are never read."""
    where = f"safetensors file {str(path)!r}"
    with path.open("rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise CourseInputError(f"{where} is shorter than its 8-byte header length; it is not a safetensors file")
        (length,) = struct.unpack("<Q", raw)
        if length > MAX_HEADER_BYTES:
            raise CourseInputError(f"{where} claims a {length:,}-byte header, above the bound "
                                   f"{MAX_HEADER_BYTES:,}; it is not a safetensors file")
        text = f.read(length)
        size = path.stat().st_size
    if len(text) < length:
        raise CourseInputError(f"{where} ends inside its {length:,}-byte header; it is truncated")
    try:
        header = json.loads(text)
    except (ValueError, RecursionError):
        raise CourseInputError(f"{where} has a header that is not valid JSON; it is not a safetensors file") from None
    if not isinstance(header, dict):
        raise CourseInputError(f"{where} has a header that is not a JSON object")
    data = size - 8 - length
    for name, t in header.items():
        if name == "__metadata__":
            continue
        ok = (isinstance(t, dict) and t.get("dtype") in DTYPE_BITS and isinstance(t.get("shape"), list)
              and isinstance(t.get("data_offsets"), list) and len(t["data_offsets"]) == 2)
        if ok:
            try:
                dims = [check_int("shape", d, 0, MAX_DIMENSION * MAX_DIMENSION) for d in t["shape"]]
                start, end = (check_int("data_offsets", o, 0, data) for o in t["data_offsets"])
            except CourseInputError:
                ok = False
            else:
                ok = start <= end and (end - start) * 8 == math.prod(dims) * DTYPE_BITS[t["dtype"]]
        if not ok:
            raise CourseInputError(f"{where}: tensor {str(name)[:80]!r} has a malformed entry (dtype, shape or "
                                   f"data_offsets do not agree); it is not a valid safetensors file")
    return header


def read_checkpoint(folder: Path) -> Checkpoint | None:
    """The folder's weights bytes, from its index or its safetensors headers; ``None`` without either."""
    index = folder / INDEX
    if index.is_file():
        try:
            data = json.loads(index.read_text(encoding="utf-8"))
            total = data["metadata"]["total_size"]
        except (ValueError, RecursionError, KeyError, TypeError, UnicodeDecodeError):
            raise CourseInputError(f"{str(index)!r} has no metadata.total_size; it is not a safetensors index") from None
        total = check_int(f"{INDEX} metadata.total_size", total, 1, MAX_DEVICE_BYTES)
        return Checkpoint(str(folder), total, f"{INDEX} metadata.total_size")
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = params = 0
    by_dtype: dict[str, int] = {}
    for path in files:
        header = read_header(path)
        total += tensor_bytes(header)
        params += tensor_count(header)
        for name, t in header.items():
            if name != "__metadata__":
                size = t["data_offsets"][1] - t["data_offsets"][0]
                by_dtype[t["dtype"]] = by_dtype.get(t["dtype"], 0) + size
    total = check_int("safetensors total bytes", total, 0, MAX_DEVICE_BYTES)
    names = files[0].name if len(files) == 1 else f"{len(files)} files"
    return Checkpoint(str(folder), total, f"safetensors headers ({names})", params, by_dtype)

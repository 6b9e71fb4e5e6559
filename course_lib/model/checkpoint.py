"""The exact bytes of a model folder's weights, from its safetensors headers (no tensor is read).

A ``*.safetensors`` file starts with an 8-byte little-endian length N, then N
bytes of JSON naming every tensor's ``dtype``, ``shape`` and ``data_offsets``
(begin and end, in bytes, within the data that follows the header). Only
those N + 8 bytes are read. A sharded folder's
``model.safetensors.index.json`` maps every tensor to its shard: the shards
it names are the files read (``metadata.total_size`` alone when none of them
is in the folder).

Everything in a folder is untrusted input (see :mod:`course_lib.regular_files`
for the files themselves). A header is checked as the safetensors format
defines it (:func:`check_header`), and as the safetensors library reads it:
a JSON object; ``__metadata__`` a map of strings to strings (or null); every tensor a known ``dtype`` string, a ``shape`` of
whole numbers >= 0 and two whole ``data_offsets``, whose byte length is the
shape's elements x the dtype's size; the tensors tile the data region from
its first byte to its last, none overlapping. Each header, the index, the
headers together and the time spent reading them are bounded
(:data:`MAX_HEADER_BYTES`, :data:`MAX_INDEX_BYTES`, :data:`MAX_TOTAL_HEADER_BYTES`,
:data:`MAX_READ_SECONDS`: a folder whose next header would take the reading past
it is refused before that header is parsed, so a refusal costs about a second of
CPU at most). Anything else is one line naming the file, the
field and what would be valid.

A header by hand: one fp16 tensor of shape [2, 3] is 6 values x 2 bytes = 12
bytes of data.

>>> header = check_header({"w": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 12]}}, 12, "f")
>>> tensor_bytes(header), tensor_count(header)
(12, 6)
>>> check_header({"w": {"dtype": ["F16"], "shape": [2, 3], "data_offsets": [0, 12]}}, 12, "f")
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: f: tensor 'w' has dtype=['F16'], not a safetensors dtype; use one of BF16, BOOL, C64, F16, F32, F4, F64, F6_E2M3, F6_E3M2, F8_E4M3, F8_E5M2, F8_E8M0, I16, I32, I64, I8, U16, U32, U64, U8
"""

from __future__ import annotations

import json
import math
import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..bounds import MAX_DEVICE_BYTES, Bound, check_int
from ..errors import CourseInputError
from ..regular_files import open_regular, read_at_most, read_regular

INDEX = "model.safetensors.index.json"
#: One header: names, dtypes and shapes, ~150 bytes a tensor. The largest real single files hold some
#: 10^5 tensors (~15 MB); a 16 MiB header parses and is checked in well under a second.
MAX_HEADER_BYTES = Bound(16 * 2**20, "about 10^5 tensors; real headers are a few MB at most")
#: The index maps every tensor name to a shard: DeepSeek-V3's, with 91k tensors, is 8.9 MB.
MAX_INDEX_BYTES = Bound(32 * 2**20, "real indexes are under 10 MB")
#: All headers of a folder together (DeepSeek-V3's 163 shards hold ~15 MB of headers).
MAX_TOTAL_HEADER_BYTES = Bound(128 * 2**20, "real folders hold at most a few tens of MB of headers")
#: Shard files in one folder (DeepSeek-V3 and Kimi-K2 have 163 and 61).
MAX_SHARDS = Bound(10_000, "real checkpoints have at most a few hundred shards")
#: CPU seconds reading one folder's index and headers may take. Real folders take well under it: a
#: DeepSeek-V3-sized folder (163 shards, 90k tensors, 8.7 MB of index and 11.7 MB of headers) 0.3 s, a
#: Kimi-K2-sized one (135k tensors, 31 MB) 0.5 s on the course's busy 2-core machine (load 20;
#: benchmarks/bench_refusals.py, RESULTS). The clock is read after the index, every :data:`CHECK_EVERY`
#: tensors, and before each header, whose cost is foreseen from the rate so far, so a refusal at this
#: bound costs about this much (1.1 s with start-up, measured): under 2 s in all.
MAX_READ_SECONDS = 1.0
#: Tensors checked between two reads of the clock.
CHECK_EVERY = 4096
#: Largest element count of one tensor (and of a shape's dimension).
MAX_ELEMENTS = 10**15
#: Bits per element of each safetensors dtype (safetensors 0.8's ``Dtype``; C64 is complex64).
DTYPE_BITS = {"F64": 64, "I64": 64, "U64": 64, "C64": 64, "F32": 32, "I32": 32, "U32": 32, "F16": 16, "BF16": 16,
              "I16": 16, "U16": 16, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "I8": 8, "U8": 8, "BOOL": 8,
              "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}
#: The dtypes a server casts to the model's dtype at load (vLLM, transformers); the rest are kept as stored.
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")
_VALID_DTYPES = ", ".join(sorted(DTYPE_BITS))


@dataclass(frozen=True)
class Checkpoint:
    """What a model folder's safetensors hold.

    total_bytes: bytes of every tensor, as stored.
    source: where the figure comes from, in words.
    params: stored elements (``None`` when only the index was read); packed
        formats (int4 in uint8/int32, fp4 blocks) store several weights per element.
    bytes_by_dtype / elements_by_dtype: per safetensors dtype, when the headers were read.
    """

    folder: str
    total_bytes: int
    source: str
    params: int | None = None
    bytes_by_dtype: Mapping[str, int] = field(default_factory=dict)
    elements_by_dtype: Mapping[str, int] = field(default_factory=dict)

    @property
    def stored_dtypes(self) -> str:
        """The dtypes stored, largest share first ("F32", "BF16 + F8_E4M3"), or "" when unknown."""
        return " + ".join(sorted(self.bytes_by_dtype, key=lambda d: -self.bytes_by_dtype[d]))

    def served_bytes(self, bytes_per_value: Any) -> int | None:
        """Bytes once loaded when every float tensor (F64/F32/F16/BF16) is cast to a dtype of
        ``bytes_per_value`` bytes and the rest (integers, fp8, packed) is kept; ``None`` without headers.

        >>> Checkpoint("m", 361_728, "h", 90_432, {"F32": 361_728}, {"F32": 90_432}).served_bytes(2)
        180864
        """
        if not self.elements_by_dtype:
            return None
        kept = sum(b for d, b in self.bytes_by_dtype.items() if d not in FLOAT_DTYPES)
        cast = sum(n for d, n in self.elements_by_dtype.items() if d in FLOAT_DTYPES)
        return kept + math.ceil(cast * bytes_per_value)


def tensor_bytes(header: Mapping[str, Any]) -> int:
    """Bytes of the tensors a checked header describes (from their ``data_offsets``)."""
    return sum(t["data_offsets"][1] - t["data_offsets"][0] for k, t in header.items() if k != "__metadata__")


def tensor_count(header: Mapping[str, Any]) -> int:
    """Elements of the tensors a checked header describes (from their shapes)."""
    return sum(math.prod(t["shape"]) for k, t in header.items() if k != "__metadata__")


# ------------------------------------------------------------------ strict JSON

def _no_constant(text: str) -> Any:
    raise CourseInputError(f"{text} is not a JSON number")


def load_json(data: bytes, where: str, what: str) -> Any:
    """Strict JSON: UTF-8, no NaN/Infinity, bounded nesting; else one line. A key given twice keeps its
    last value, as the safetensors library (serde_json into a map) reads it."""
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except CourseInputError as exc:
        raise CourseInputError(f"{where}: {exc}; it is not a valid {what}") from None
    except RecursionError:
        raise CourseInputError(f"{where} nests JSON too deeply; it is not a valid {what}") from None
    except (ValueError, UnicodeDecodeError) as exc:     # bad JSON, bad UTF-8, an int of > 4,300 digits
        text = " ".join(str(exc).split())[:120]
        raise CourseInputError(f"{where} is not valid JSON ({text}); it is not a valid {what}") from None


# ------------------------------------------------------------------ headers

def _whole(name: str, value: Any, hi: int) -> int:
    """A JSON integer in [0, hi] (a float such as 12.0 is refused: the format stores integers)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise CourseInputError(f"{name}={value!r:.60} is not a whole number; use a whole number from 0 to {hi:,}")
    return check_int(name, value, 0, hi)


def _check_entry(name: str, t: Any, data_bytes: int, where: str) -> tuple[int, int]:
    """(begin, end) of one checked tensor entry."""
    here = f"{where}: tensor {name[:80]!r}"
    if not isinstance(t, dict):
        raise CourseInputError(f"{here} is {type(t).__name__}, not an object of dtype, shape and data_offsets")
    for key in ("dtype", "shape", "data_offsets"):
        if key not in t:
            raise CourseInputError(f"{here} has no {key!r}; every tensor needs dtype, shape and data_offsets")
    dtype, shape, offsets = t["dtype"], t["shape"], t["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise CourseInputError(f"{here} has dtype={dtype!r:.60}, not a safetensors dtype; use one of {_VALID_DTYPES}")
    if not isinstance(shape, list) or len(shape) > 64:
        raise CourseInputError(f"{here} has shape={shape!r:.60}, not a list of at most 64 whole numbers >= 0")
    dims = shape
    if not all(type(d) is int and 0 <= d <= MAX_ELEMENTS for d in shape):   # else: which one, and why
        try:
            dims = [_whole(f"shape[{i}]", d, MAX_ELEMENTS) for i, d in enumerate(shape)]
        except CourseInputError as exc:
            raise CourseInputError(f"{here}: {exc}") from None
    elements = math.prod(dims)
    if elements > MAX_ELEMENTS:
        raise CourseInputError(f"{here} has shape {dims} of {elements:.3g} elements, above the bound 10^15")
    if not (isinstance(offsets, list) and len(offsets) == 2):
        raise CourseInputError(f"{here} has data_offsets={offsets!r:.60}; use [begin, end], two whole numbers")
    begin, end = offsets
    if not (type(begin) is int and type(end) is int and 0 <= begin <= data_bytes and 0 <= end <= data_bytes):
        try:
            begin, end = (_whole(f"data_offsets[{i}]", o, data_bytes) for i, o in enumerate(offsets))
        except CourseInputError as exc:
            raise CourseInputError(f"{here}: {exc} (the data after the header is {data_bytes:,} bytes)") from None
    if begin > end:
        raise CourseInputError(f"{here} has data_offsets=[{begin}, {end}]: begin after end; use begin <= end")
    bits = elements * DTYPE_BITS[dtype]
    if bits % 8 or (end - begin) != bits // 8:
        need = f"{bits // 8:,}" if bits % 8 == 0 else f"{bits / 8:g} (not a whole number of bytes)"
        raise CourseInputError(f"{here} has data_offsets=[{begin}, {end}] ({end - begin:,} bytes) but shape "
                               f"{dims} of {dtype} needs {need} bytes")
    return begin, end


def check_header(header: Any, data_bytes: int, where: str, budget: "_Budget | None" = None) -> dict[str, Any]:
    """``header`` checked as the safetensors format defines it, for ``data_bytes`` of data after it
    (and within ``budget``'s CPU time, when one is given)."""
    if not isinstance(header, dict):
        raise CourseInputError(f"{where} has a header that is {type(header).__name__}, not a JSON object; "
                               f"it is not a safetensors file")
    spans: list[tuple[int, int, str]] = []
    for name, t in header.items():
        if name == "__metadata__":
            if t is not None and (not isinstance(t, dict) or not all(isinstance(v, str) for v in t.values())):
                raise CourseInputError(f"{where}: __metadata__={t!r:.60} is not a map of strings to strings")
            continue
        begin, end = _check_entry(name, t, data_bytes, where)
        spans.append((begin, end, name))
        if budget is not None and len(spans) % CHECK_EVERY == 0:
            budget.check_time(where)
    at, last = 0, None
    for begin, end, name in sorted(spans):
        if begin < at:
            raise CourseInputError(f"{where}: tensors {last[:60]!r} and {name[:60]!r} overlap (bytes {begin:,} to "
                                   f"{at:,}); each byte of the data belongs to one tensor")
        if begin > at:
            raise CourseInputError(f"{where}: bytes {at:,} to {begin:,} of the data belong to no tensor; the "
                                   f"tensors must cover the data without gaps")
        at, last = end, name
    if at != data_bytes:
        raise CourseInputError(f"{where}: the tensors cover {at:,} bytes but {data_bytes:,} follow the header; "
                               f"the data must be exactly the tensors")
    return header


def read_header(path: Path, budget: "_Budget | None" = None) -> dict[str, Any]:
    """The checked header of one safetensors file; the tensors are never read."""
    where = f"safetensors file {str(path)!r}"
    fd = open_regular(path, "safetensors file")
    try:
        size = os.fstat(fd).st_size
        raw = read_at_most(fd, 8, "safetensors file", str(path))
        if len(raw) < 8:
            raise CourseInputError(f"{where} is shorter than its 8-byte header length; it is not a safetensors file")
        (length,) = struct.unpack("<Q", raw)
        if length > MAX_HEADER_BYTES:
            raise CourseInputError(f"{where} claims a {length:,}-byte header, above the bound {MAX_HEADER_BYTES:,} "
                                   f"({MAX_HEADER_BYTES.why}); it is not a real safetensors file")
        if length > size - 8:
            raise CourseInputError(f"{where} claims a {length:,}-byte header but holds {max(0, size - 8):,} bytes "
                                   f"after its length; it is truncated")
        if budget is not None:
            budget.spend_bytes(length, where)
        text = read_at_most(fd, length, "safetensors file", str(path))
    finally:
        os.close(fd)
    if len(text) < length:
        raise CourseInputError(f"{where} ends inside its {length:,}-byte header; it is truncated")
    header = check_header(load_json(text, where, "safetensors header"), size - 8 - length, where, budget)
    if budget is not None:
        budget.check_time(where)
    return header


class _Budget:
    """What reading one folder may cost: header bytes in all, and CPU time.

    Before each header is read, the CPU time it will take is foreseen from the rate so far (seconds
    per header byte): a folder that would run past :data:`MAX_READ_SECONDS` is refused before that
    parse, not after it.
    """

    def __init__(self) -> None:
        self.bytes = 0          # header bytes read so far
        self.start = time.process_time()
        self.headers_start: float | None = None     # when the first header was read (after the index)

    def spend_bytes(self, count: int, where: str) -> None:
        """Account for the next header's ``count`` bytes, before they are read and parsed."""
        if self.bytes + count > MAX_TOTAL_HEADER_BYTES:
            why = getattr(MAX_TOTAL_HEADER_BYTES, "why", "")
            raise CourseInputError(f"{where}: the folder's headers add up to more than {MAX_TOTAL_HEADER_BYTES:,} "
                                   f"bytes{f' ({why})' if why else ''}; it is not a real checkpoint")
        now = time.process_time()
        if self.headers_start is None:
            self.headers_start = now
        rate = (now - self.headers_start) / self.bytes if self.bytes else 0.0    # CPU seconds per header byte
        foreseen = now - self.start + count * rate
        self.bytes += count
        self._refuse_past(foreseen, where, "would take")

    def check_time(self, where: str) -> None:
        self._refuse_past(time.process_time() - self.start, where, "took")

    def _refuse_past(self, seconds: float, where: str, verb: str) -> None:
        if seconds > MAX_READ_SECONDS:
            raise CourseInputError(f"{where}: reading the folder's index and headers {verb} over "
                                   f"{MAX_READ_SECONDS:g} s of CPU (real folders take well under it); it is not "
                                   f"a real checkpoint")


# ------------------------------------------------------------------ the folder

def _shard_name(value: Any, key: str, where: str) -> str:
    ok = (isinstance(value, str) and value.endswith(".safetensors") and "/" not in value and "\\" not in value
          and "\x00" not in value and value not in (".safetensors",) and len(value) <= 255)
    if not ok:
        raise CourseInputError(f"{where}: weight_map[{key[:60]!r}]={value!r:.80} is not a shard file name; use "
                               f"the name of a .safetensors file in the same folder, e.g. "
                               f"model-00001-of-00002.safetensors")
    return value


def _read_index(path: Path, budget: "_Budget | None" = None) -> tuple[dict[str, list[str]], int | None]:
    """(tensor names per shard file, metadata.total_size or None) of a checked index."""
    where = f"{INDEX} {str(path)!r}"
    index = load_json(read_regular(path, MAX_INDEX_BYTES, INDEX), where, "safetensors index")
    if budget is not None:
        budget.check_time(where)
    if not isinstance(index, dict):
        raise CourseInputError(f"{where} holds a {type(index).__name__}, not a JSON object with weight_map")
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CourseInputError(f"{where}: weight_map={weight_map!r:.60} is not a non-empty object of tensor name -> "
                               f"shard file")
    shards: dict[str, list[str]] = {}
    for count, (name, value) in enumerate(weight_map.items(), 1):
        shards.setdefault(_shard_name(value, name, where), []).append(name)
        if budget is not None and count % CHECK_EVERY == 0:
            budget.check_time(where)
    if len(shards) > MAX_SHARDS:
        raise CourseInputError(f"{where} names {len(shards):,} shard files, above the bound {MAX_SHARDS:,} "
                               f"({MAX_SHARDS.why})")
    metadata = index.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise CourseInputError(f"{where}: metadata={metadata!r:.60} is not a JSON object")
    total = (metadata or {}).get("total_size")
    if total is not None:
        try:
            total = check_int("metadata.total_size", total, 0, MAX_DEVICE_BYTES)
        except CourseInputError as exc:
            raise CourseInputError(f"{where}: {exc}") from None
    return shards, total


def _listed_files(folder: Path) -> list[Path]:
    """The ``*.safetensors`` entries of a folder without an index (each checked when it is read)."""
    try:
        with os.scandir(folder) as entries:
            names = []
            for entry in entries:
                if entry.name.endswith(".safetensors"):
                    names.append(entry.name)
                    if len(names) > MAX_SHARDS:
                        raise CourseInputError(f"model folder {str(folder)!r} holds more than {MAX_SHARDS:,} "
                                               f".safetensors files ({MAX_SHARDS.why})")
    except OSError as exc:
        raise CourseInputError(f"model folder {str(folder)!r} cannot be listed ({exc.strerror or exc})") from None
    return [folder / name for name in sorted(names)]


def _present(path: Path) -> bool:
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return True        # there, but odd: reading it says how
    return True


def read_checkpoint(folder: Path) -> Checkpoint | None:
    """The folder's weights bytes, from its safetensors headers (or its index alone); ``None`` without either."""
    index_path = folder / INDEX
    expected: dict[str, list[str]] | None = None
    index_total = None
    budget = _Budget()
    if _present(index_path):
        expected, index_total = _read_index(index_path, budget)
        files = [folder / name for name in sorted(expected)]
        present = [p for p in files if _present(p)]
        if not present:
            if index_total is None:
                raise CourseInputError(f"{INDEX} {str(index_path)!r} has no metadata.total_size and none of its "
                                       f"{len(files):,} shard files is in the folder; add the shards or total_size")
            return Checkpoint(str(folder), index_total, f"{INDEX} metadata.total_size (no shard in the folder)")
        if len(present) < len(files):
            missing = next(p.name for p in files if p not in present)
            raise CourseInputError(f"{INDEX} {str(index_path)!r} names {len(files):,} shard files, but "
                                   f"{len(files) - len(present):,} are not in the folder (e.g. {missing!r}); "
                                   f"add them, or remove the index and the partial shards")
    else:
        files = _listed_files(folder)
        if not files:
            return None
    total = params = 0
    by_dtype: dict[str, int] = {}
    elements: dict[str, int] = {}
    for path in files:
        header = read_header(path, budget)
        if expected is not None:
            lost = next((n for n in expected[path.name] if n not in header or n == "__metadata__"), None)
            if lost is not None:
                raise CourseInputError(f"{INDEX} maps tensor {lost[:80]!r} to {path.name!r}, whose header does not "
                                       f"list it; the index and the shards do not belong together")
        for name, t in header.items():
            if name == "__metadata__":
                continue
            size = t["data_offsets"][1] - t["data_offsets"][0]
            count = math.prod(t["shape"])
            total += size
            params += count
            by_dtype[t["dtype"]] = by_dtype.get(t["dtype"], 0) + size
            elements[t["dtype"]] = elements.get(t["dtype"], 0) + count
    total = check_int("safetensors total bytes", total, 0, MAX_DEVICE_BYTES)
    names = files[0].name if len(files) == 1 else f"{len(files)} files"
    source = f"safetensors headers ({names})"
    if index_total is not None and index_total != total:
        source += f"; the index's metadata.total_size says {index_total:,}"
    return Checkpoint(str(folder), total, source, params, by_dtype, elements)

"""How many bytes one stored value takes, as an exact fraction.

Weights and KV cache are "count x bytes per value". Sub-byte formats (int4)
and group quantization (int4 with one fp16 scale per group of 128 weights)
make bytes-per-value a fraction, so we keep it as :class:`fractions.Fraction`
and round to whole bytes only at the end of a sum.

>>> get_dtype("bf16").bytes_per_value
Fraction(2, 1)
>>> get_dtype("int4").bytes_per_value
Fraction(1, 2)
>>> q = get_dtype("int4-g128")   # 4 bits + one 16-bit scale per 128 values
>>> q.bytes_per_value             # 1/2 + 2/128 = 33/64 = 0.515625
Fraction(33, 64)
>>> q.bytes_for(1_000_000)
515625
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from .errors import CourseInputError


@dataclass(frozen=True)
class DType:
    """A storage format.

    name: canonical name ("fp16", "int4-g128", ...).
    bits: bits of one value, before any per-group scale.
    group_size: values sharing one scale (0 for none).
    scale_bits: bits of each group's scale (and zero point, if any).
    """

    name: str
    bits: int
    group_size: int = 0
    scale_bits: int = 0

    @property
    def bytes_per_value(self) -> Fraction:
        """Exact bytes per value, scales included: bits/8 + scale_bits/(8*group)."""
        value = Fraction(self.bits, 8)
        if self.group_size:
            value += Fraction(self.scale_bits, 8 * self.group_size)
        return value

    def bytes_for(self, count: int) -> int:
        """Whole bytes to store ``count`` values (rounded up: a half byte still occupies a byte).

        >>> get_dtype("fp16").bytes_for(3)
        6
        >>> get_dtype("int4").bytes_for(3)
        2
        """
        return math.ceil(self.bytes_per_value * count)


_BASE: dict[str, DType] = {
    "fp32": DType("fp32", 32),
    "fp16": DType("fp16", 16),
    "bf16": DType("bf16", 16),
    "fp8-e4m3": DType("fp8-e4m3", 8),
    "fp8-e5m2": DType("fp8-e5m2", 8),
    "int8": DType("int8", 8),
    "int4": DType("int4", 4),
}

ALIASES: dict[str, str] = {
    "float32": "fp32", "float": "fp32", "f32": "fp32",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16",
    "fp8": "fp8-e4m3", "fp8_e4m3": "fp8-e4m3", "e4m3": "fp8-e4m3", "float8_e4m3fn": "fp8-e4m3",
    "fp8_e5m2": "fp8-e5m2", "e5m2": "fp8-e5m2", "float8_e5m2": "fp8-e5m2",
    "i8": "int8", "i4": "int4",
}

# "int4-g128" = int4 with an fp16 scale per 128 values; "int4-g64-bf16",
# "int4-g128-fp32" choose the scale format explicitly.
_GROUPED = re.compile(r"^int([48])-g(\d+)(?:-(fp16|bf16|fp32))?$")
_SCALE_BITS = {"fp16": 16, "bf16": 16, "fp32": 32}

VALID = "fp32/float32, fp16/float16, bf16/bfloat16, fp8 (fp8-e4m3, fp8-e5m2), int8, int4, int4-g128 (group-quantized, fp16 scales)"


def get_dtype(name: str | DType) -> DType:
    """Look up a dtype by name or alias (case-insensitive).

    >>> get_dtype("float16").name
    'fp16'
    >>> get_dtype("int4-g64-fp32").bytes_per_value   # 1/2 + 4/64
    Fraction(9, 16)
    >>> get_dtype("fp12")
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: dtype='fp12' is unknown; use fp32/float32, fp16/float16, bf16/bfloat16, fp8 (fp8-e4m3, fp8-e5m2), int8, int4, int4-g128 (group-quantized, fp16 scales)
    """
    if isinstance(name, DType):
        return name
    if not isinstance(name, str):
        raise CourseInputError(f"dtype={name!r} is not a dtype name; use {VALID}")
    key = name.strip().lower().removeprefix("torch.")
    key = ALIASES.get(key, key)
    if key in _BASE:
        return _BASE[key]
    match = _GROUPED.match(key)
    if match:
        if len(match.group(2)) > 7:   # read the digits only when they can be a group size (up to 10^7 values)
            raise CourseInputError(f"dtype={name[:24]!r}... has a group size of {len(match.group(2))} digits; use a "
                                   f"group of 1 to 10,000,000 values, e.g. int4-g128")
        bits, group, scale = int(match.group(1)), int(match.group(2)), match.group(3) or "fp16"
        if group < 1:
            raise CourseInputError(f"dtype={name!r} has group size 0; use a group of 1 or more, e.g. int4-g128")
        return DType(f"int{bits}-g{group}" + ("" if scale == "fp16" else f"-{scale}"), bits, group, _SCALE_BITS[scale])
    raise CourseInputError(f"dtype={name!r} is unknown; use {VALID}")

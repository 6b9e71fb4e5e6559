"""Byte sizes: parse "24GB" / "24GiB" into integers, and format them back.

Bytes are always Python ints. Decimal units are powers of 10 (GB = 10**9),
binary units are powers of 2 (GiB = 2**30); the two are never mixed silently.
A GPU sold as "24 GB" usually reports its memory in MiB/GiB, so a course that
talks about memory has to say which one it means every time.

>>> parse_bytes("24GB")
24000000000
>>> parse_bytes("24GiB")
25769803776
>>> parse_bytes("1.5 GB")
1500000000
>>> format_bytes(24 * GiB)
'25.77 GB (24.00 GiB)'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

from .bounds import MAX_DEVICE_BYTES, MIN_BYTES_PER_S
from .errors import CourseInputError

KB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12
KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40

#: Every unit we accept, spelled as users write it (matched case-sensitively
#: for the B/b distinction: "Gb" would be gigabits, which we refuse).
UNITS: dict[str, int] = {
    "B": 1,
    "KB": KB, "MB": MB, "GB": GB, "TB": TB,
    "kB": KB,
    "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB,
}

#: Text that reads as a number of bytes (so its own refusal explains it) rather than a preset name.
SIZE_LIKE = re.compile(r"^\s*[+-]?(\d|\.\d|inf|nan)", re.IGNORECASE)
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")

VALID_SIZES = 'a byte count such as 1500000000, or a size such as "24GB", "24GiB", "512MiB", "1.5 GB"'


def parse_bytes(value: object, *, name: str = "size") -> int:
    """Return ``value`` as an integer number of bytes.

    Accepts a non-negative int (bytes), a finite non-negative float with no
    fractional byte, or a string with an explicit unit from :data:`UNITS`.
    A string without a unit is bytes. Fractional bytes are rounded to the
    nearest byte ("1.5 KiB" is 1536 B exactly; "0.1 B" is refused).

    >>> parse_bytes("512MiB")
    536870912
    >>> parse_bytes(1024)
    1024
    >>> parse_bytes("24XB")
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: size='24XB' has an unknown unit 'XB'; use a byte count such as 1500000000, or a size such as "24GB", "24GiB", "512MiB", "1.5 GB" (units: B, KB, MB, GB, TB, kB, KiB, MiB, GiB, TiB)
    """
    shown = _show(value)
    if isinstance(value, bool):
        raise CourseInputError(f"{name}={shown} is a bool, not a size; use {VALID_SIZES}")
    if isinstance(value, int):
        if value < 0:
            raise CourseInputError(f"{name}={value} is negative; use {VALID_SIZES}")
        return _bounded(name, value, value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise CourseInputError(f"{name}={shown} is not finite; use {VALID_SIZES}")
        if value < 0:
            raise CourseInputError(f"{name}={shown} is negative; use {VALID_SIZES}")
        if not value.is_integer():
            raise CourseInputError(
                f"{name}={shown} is not a whole number of bytes; give a unit, e.g. \"{value}GB\""
            )
        return _bounded(name, value, int(value))
    if not isinstance(value, str):
        raise CourseInputError(f"{name}={shown} is a {type(value).__name__}; use {VALID_SIZES}")
    text = value.strip()
    if not text:
        raise CourseInputError(f"{name}={shown} is empty; use {VALID_SIZES}")
    if text.lower() in {"nan", "-nan", "+nan", "inf", "-inf", "+inf", "infinity", "-infinity", "+infinity"}:
        raise CourseInputError(f"{name}={shown} is not finite; use {VALID_SIZES}")
    if text.startswith("-"):
        raise CourseInputError(f"{name}={shown} is negative; use {VALID_SIZES}")
    match = _SIZE.match(text)
    if not match:
        raise CourseInputError(f"{name}={shown} is not a size; use {VALID_SIZES}")
    number, unit = match.groups()
    unit = unit or "B"
    hint = number if len(number) <= 30 else "N"     # a 5,000-digit number is not repeated in the hint
    if unit not in UNITS:
        near = [u for u in UNITS if u.lower() == unit.lower()]
        if near and unit[-1] == "b" and unit[:-1] != unit[:-1].lower():
            raise CourseInputError(
                f"{name}={shown}: {unit!r} would mean bits; sizes are in bytes: use {hint}{near[0]} "
                f"(units: {', '.join(UNITS)})"
            )
        if near:
            raise CourseInputError(
                f"{name}={shown} has unit {unit!r}; use {hint}{near[0]} (units: {', '.join(UNITS)})"
            )
        raise CourseInputError(
            f"{name}={shown} has an unknown unit {unit!r}; use {VALID_SIZES} "
            f"(units: {', '.join(UNITS)})"
        )
    try:
        exact = Decimal(number)
        if exact.adjusted() > 30:  # far above any bound; checked before the multiplication can overflow
            raise CourseInputError(f"{name}={shown} is above the bound of {MAX_SIZE_TEXT}; use {VALID_SIZES}")
        exact *= UNITS[unit]
    except (InvalidOperation, ArithmeticError):  # pragma: no cover - the regex already vetted it
        raise CourseInputError(f"{name}={shown} is not a size; use {VALID_SIZES}") from None
    if not exact.is_finite():
        raise CourseInputError(f"{name}={shown} is not finite; use {VALID_SIZES}")
    whole = _bounded(name, value, int(exact.to_integral_value()))
    if exact != whole and exact < 1:
        raise CourseInputError(f"{name}={shown} is less than one byte; use {VALID_SIZES}")
    return whole


#: No size in a serving budget (a device, a pool, a link's bytes per second) comes near 1 PB.
MAX_SIZE_BYTES = MAX_DEVICE_BYTES
MAX_SIZE_TEXT = "1 PB (10^15 bytes; no device comes near it)"


def parse_rate(value: object, *, name: str, presets: Iterable[str], kind: str, example: str) -> int:
    """A rate in bytes per second, given as the bytes moved in one second ("25GB" is 25 GB/s), for the option
    ``name`` whose presets (looked up by the caller first) are named in each refusal. The one reader of a rate: a
    disk's read rate (serving.loading) and a link's bandwidth (serving.offload) are refused alike.

    >>> parse_rate("25GB", name="link", presets=("pcie-gen4-x16",), kind="bandwidth", example="25GB")
    25000000000
    >>> parse_rate("0", name="storage", presets=("nvme", "network-disk"), kind="read rate", example="2GB")
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: storage='0' is 0 B/s; give a read rate per second such as 2GB, or a preset (nvme, network-disk)
    """
    listed = ", ".join(presets)
    valid = f"give a {kind} per second such as {example}, or a preset ({listed})"
    try:
        rate = parse_bytes(value, name=name)
    except CourseInputError:
        if isinstance(value, str) and SIZE_LIKE.match(value):
            raise  # it reads as a rate: the size error says what is wrong with it
        raise CourseInputError(f"{name}={value!r} is neither a preset ({listed}) nor a {kind} per second such as "
                               f"{example}") from None
    if rate == 0:
        raise CourseInputError(f"{name}={value!r} is 0 B/s; {valid}")
    if rate < MIN_BYTES_PER_S:   # bounds.py: anything slower makes every figure a day or more
        raise CourseInputError(f"{name}={value!r} is {rate:,} B/s, below the bound of {MIN_BYTES_PER_S:,} B/s "
                               f"(1 kB/s); {valid}")
    return rate


def _bounded(name: str, shown: object, value: int) -> int:
    if value > MAX_SIZE_BYTES:
        text = _show(shown) if isinstance(shown, str) else repr(
            f"{shown:.3e}" if isinstance(shown, float) else f"<a {value.bit_length() * 30103 // 100000 + 1}-digit number>")
        raise CourseInputError(f"{name}={text} is above the bound of {MAX_SIZE_TEXT}; use {VALID_SIZES}")
    return value


def _show(value: object) -> str:
    """``repr(value)``, cut short for a string of more than 60 characters (a 5,000-digit count).

    >>> _show("9" * 5000)
    "'99999999999999999999...' (5,000 characters)"
    """
    if isinstance(value, str) and len(value) > 60:
        return f"{repr(value[:20])[:-1]}...' ({len(value):,} characters)"
    return repr(value)


def to_gb(num_bytes: int) -> float:
    """Bytes as decimal gigabytes (10**9). ``to_gb(1_500_000_000) == 1.5``."""
    return num_bytes / GB


def to_gib(num_bytes: int) -> float:
    """Bytes as binary gibibytes (2**30). ``to_gib(2**31) == 2.0``."""
    return num_bytes / GiB


def format_gb(num_bytes: int, digits: int = 2) -> str:
    """Format as decimal GB with the unit spelled out.

    >>> format_gb(6_000_000_000)
    '6.00 GB'
    """
    return f"{num_bytes / GB:.{digits}f} GB"


def format_gib(num_bytes: int, digits: int = 2) -> str:
    """Format as binary GiB with the unit spelled out.

    >>> format_gib(4 * GiB)
    '4.00 GiB'
    """
    return f"{num_bytes / GiB:.{digits}f} GiB"


def format_bytes(num_bytes: int, unit: str = "both", digits: int = 2) -> str:
    """Format a byte count: ``unit`` is "GB", "GiB", "both" or "auto".

    "auto" picks the largest decimal unit that keeps the number >= 1.
    Negative counts (a deficit) keep their sign.

    >>> format_bytes(4_294_967_296)
    '4.29 GB (4.00 GiB)'
    >>> format_bytes(819_200, unit="auto")
    '819.20 KB'
    >>> format_bytes(-2_590_000_000, unit="GB")
    '-2.59 GB'
    """
    if unit == "GB":
        return format_gb(num_bytes, digits)
    if unit == "GiB":
        return format_gib(num_bytes, digits)
    if unit == "both":
        return f"{format_gb(num_bytes, digits)} ({format_gib(num_bytes, digits)})"
    if unit == "auto":
        magnitude = abs(num_bytes)
        for label, size in (("TB", TB), ("GB", GB), ("MB", MB), ("KB", KB)):
            if magnitude >= size:
                return f"{num_bytes / size:.{digits}f} {label}"
        return f"{num_bytes} B"
    raise CourseInputError(f"unit={unit!r} is not a unit; use one of GB, GiB, both, auto")

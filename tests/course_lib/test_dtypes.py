"""course_lib.dtypes: bytes per stored value, as exact fractions (worked by hand)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from course_lib.dtypes import DType, get_dtype
from course_lib.errors import CourseInputError

# name or alias -> (canonical name, bytes per value): bits / 8.
NAMES = {
    "fp32": ("fp32", Fraction(4)), "float32": ("fp32", Fraction(4)), "float": ("fp32", Fraction(4)),
    "f32": ("fp32", Fraction(4)), "torch.float32": ("fp32", Fraction(4)),
    "fp16": ("fp16", Fraction(2)), "float16": ("fp16", Fraction(2)), "half": ("fp16", Fraction(2)),
    "f16": ("fp16", Fraction(2)), "torch.float16": ("fp16", Fraction(2)), "FP16": ("fp16", Fraction(2)),
    " fp16 ": ("fp16", Fraction(2)),
    "bf16": ("bf16", Fraction(2)), "bfloat16": ("bf16", Fraction(2)), "torch.bfloat16": ("bf16", Fraction(2)),
    "fp8": ("fp8-e4m3", Fraction(1)), "fp8-e4m3": ("fp8-e4m3", Fraction(1)), "fp8_e4m3": ("fp8-e4m3", Fraction(1)),
    "e4m3": ("fp8-e4m3", Fraction(1)), "float8_e4m3fn": ("fp8-e4m3", Fraction(1)),
    "fp8-e5m2": ("fp8-e5m2", Fraction(1)), "fp8_e5m2": ("fp8-e5m2", Fraction(1)), "e5m2": ("fp8-e5m2", Fraction(1)),
    "float8_e5m2": ("fp8-e5m2", Fraction(1)),
    "int8": ("int8", Fraction(1)), "i8": ("int8", Fraction(1)),
    "int4": ("int4", Fraction(1, 2)), "i4": ("int4", Fraction(1, 2)),
}


@pytest.mark.parametrize("name", list(NAMES))
def test_each_name_and_alias(name):
    canonical, per_value = NAMES[name]
    dt = get_dtype(name)
    assert dt.name == canonical, f"{name!r} should mean {canonical}"
    assert dt.bytes_per_value == per_value
    assert isinstance(dt.bytes_per_value, Fraction), "bytes per value must stay an exact Fraction"


@pytest.mark.parametrize(
    "name, per_value",
    [
        # 4 bits + one 16-bit scale per 128 values: 4/8 + 16/(8 x 128) = 1/2 + 1/64 = 33/64 = 0.515625
        ("int4-g128", Fraction(33, 64)),
        ("int4-g128-bf16", Fraction(33, 64)),          # a bf16 scale is also 16 bits
        # 4/8 + 32/(8 x 64) = 1/2 + 1/16 = 9/16
        ("int4-g64-fp32", Fraction(9, 16)),
        # 4/8 + 16/(8 x 32) = 1/2 + 1/16 = 9/16
        ("int4-g32", Fraction(9, 16)),
        # 8/8 + 16/(8 x 128) = 1 + 1/64 = 65/64
        ("int8-g128", Fraction(65, 64)),
    ],
)
def test_group_quantized_is_exact(name, per_value):
    assert get_dtype(name).bytes_per_value == per_value


def test_int4_g128_is_33_over_64_and_not_a_float():
    bpv = get_dtype("int4-g128").bytes_per_value
    assert bpv == Fraction(33, 64)
    assert type(bpv) is Fraction
    assert float(bpv) == 0.515625


@pytest.mark.parametrize(
    "name, count, expected",
    [
        ("fp16", 3, 6),
        ("fp32", 3, 12),
        ("int4", 3, 2),                       # 1.5 bytes still take 2 whole bytes
        ("int4", 4, 2),
        ("int4-g128", 1_000_000, 515_625),    # 10^6 x 33/64 = 515,625 exactly
        ("int4-g128", 1, 1),                  # 33/64 of a byte rounds up to 1
        # Llama-2-7B in int4-g128: 6,738,415,616 / 64 = 105,287,744; x 33 = 3,474,495,552
        ("int4-g128", 6_738_415_616, 3_474_495_552),
        ("fp16", 6_738_415_616, 13_476_831_232),
    ],
)
def test_bytes_for_rounds_up_to_whole_bytes(name, count, expected):
    assert get_dtype(name).bytes_for(count) == expected


def test_a_dtype_passes_through():
    dt = DType("fp6", 6)
    assert get_dtype(dt) is dt
    assert dt.bytes_per_value == Fraction(3, 4)


@pytest.mark.parametrize("bad, shown", [("fp12", "'fp12'"), ("int3", "'int3'"), ("", "''"), ("int4-g0", "'int4-g0'"),
                                        (16, "16"), (None, "None")])
def test_unknown_dtype_refused_naming_it(bad, shown):
    with pytest.raises(CourseInputError) as info:
        get_dtype(bad)
    message = str(info.value)
    assert shown in message, f"the refusal should name {bad!r}; got: {message}"
    assert "\n" not in message


def test_unknown_dtype_lists_valid_ones():
    with pytest.raises(CourseInputError) as info:
        get_dtype("fp12")
    for valid in ("fp32", "fp16", "bf16", "fp8", "int8", "int4", "int4-g128"):
        assert valid in str(info.value), f"the refusal should list {valid} as valid"

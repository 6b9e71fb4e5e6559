"""course_lib.units: sizes in, sizes out. Every expected figure is worked by hand below."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.errors import CourseInputError
from course_lib.units import (GB, GiB, KB, KiB, MB, MiB, TB, TiB, format_bytes, format_gb, format_gib, parse_bytes,
                              parse_rate, to_gb, to_gib)


def test_unit_constants_are_powers_of_ten_and_two():
    assert (KB, MB, GB, TB) == (1000, 1_000_000, 1_000_000_000, 1_000_000_000_000)
    assert (KiB, MiB, GiB, TiB) == (1024, 1_048_576, 1_073_741_824, 1_099_511_627_776)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("24GB", 24_000_000_000),                # decimal: 24 x 10^9
        ("24GiB", 25_769_803_776),               # binary: 24 x 2^30 = 24 x 1,073,741,824
        ("512MiB", 536_870_912),                 # 512 x 1,048,576
        ("1.5 GB", 1_500_000_000),               # a space and a fraction
        ("1.5GiB", 1_610_612_736),               # 1.5 x 1,073,741,824
        ("  24 GB  ", 24_000_000_000),           # surrounding blanks
        ("1.5 KiB", 1536),
        ("2KiB", 2048),
        ("1kB", 1000),
        ("1KB", 1000),
        ("1TB", 10**12),
        ("1TiB", 2**40),
        ("80GiB", 85_899_345_920),               # 80 x 1,073,741,824
        ("24564MiB", 25_757_220_864),            # an RTX 4090 as nvidia-smi reports it
        ("1000", 1000),                          # no unit: bytes
        ("1000B", 1000),
        ("0", 0),
        ("1.000000001GB", 1_000_000_001),        # exact decimal arithmetic, no float rounding
        ("1e3GB", 10**12),
    ],
)
def test_parse_strings(text, expected):
    got = parse_bytes(text)
    assert got == expected, f"parse_bytes({text!r}) should be {expected:,} B, got {got:,}"
    assert type(got) is int, f"parse_bytes({text!r}) should return an int of bytes, got {type(got).__name__}"


@pytest.mark.parametrize("value, expected", [(0, 0), (1024, 1024), (24_000_000_000, 24 * 10**9), (2.0, 2), (10**15, 10**15)])
def test_parse_numbers_are_bytes(value, expected):
    got = parse_bytes(value)
    assert got == expected and type(got) is int


def test_decimal_and_binary_differ_by_the_known_ratio():
    # 2^30 / 10^9 = 1.073741824: "24GiB" is 7.37% more than "24GB".
    assert parse_bytes("24GiB") - parse_bytes("24GB") == 1_769_803_776


@pytest.mark.parametrize(
    "value, shown",
    [
        (-1, "-1"),                         # negative int
        (-1.0, "-1.0"),                     # negative float
        ("-1GB", "'-1GB'"),                 # negative string
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
        ("nan", "'nan'"),
        ("inf", "'inf'"),
        (True, "True"),                     # a bool is not a size
        (False, "False"),
        ("24XB", "'24XB'"),                 # unknown unit
        ("24Gb", "'24Gb'"),                 # gigabits: refused, not silently read as GB
        ("", "''"),                         # empty
        ("  ", "'  '"),                     # blank
        ("GB", "'GB'"),                     # a unit without a number
        ("1.5.3GB", "'1.5.3GB'"),
        ("0.1B", "'0.1B'"),                 # less than one byte
        (0.5, "0.5"),                       # a fractional byte count without a unit
        (None, "None"),
        ([24], "[24]"),
    ],
)
def test_refusals_name_the_value(value, shown):
    with pytest.raises(CourseInputError) as info:
        parse_bytes(value, name="weights")
    message = str(info.value)
    assert shown in message, f"the refusal of {value!r} should show {shown}; got: {message}"
    assert message.startswith("weights="), f"the refusal should name the setting first; got: {message}"
    assert "\n" not in message, "refusals are one line (the CLI prints them as one)"


def test_refusal_is_a_value_error():
    # One error type, a ValueError subclass, so `except ValueError` also catches it.
    with pytest.raises(ValueError):
        parse_bytes("24XB")


def test_unknown_unit_lists_the_valid_ones():
    with pytest.raises(CourseInputError) as info:
        parse_bytes("24XB")
    for unit in ("GB", "GiB", "MiB"):
        assert unit in str(info.value)


# ---------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    "num_bytes, unit, expected",
    [
        (6_000_000_000, "GB", "6.00 GB"),
        (4 * GiB, "GiB", "4.00 GiB"),
        (24 * GiB, "both", "25.77 GB (24.00 GiB)"),        # 25,769,803,776 B
        (4_294_967_296, "both", "4.29 GB (4.00 GiB)"),     # 2^32 B
        (25_757_220_864, "GB", "25.76 GB"),                # RTX 4090: 24,564 MiB
        (25_757_220_864, "GiB", "23.99 GiB"),              # 24,564 / 1024 = 23.988...
        (-1_500_000_000, "GB", "-1.50 GB"),                # a deficit keeps its sign
        (-2_590_000_000, "both", "-2.59 GB (-2.41 GiB)"),  # 2.59e9 / 2^30 = 2.412...
        (819_200, "auto", "819.20 KB"),                    # OPT-13B's KV per token
        (1_677_721_600, "auto", "1.68 GB"),                # one 2,048-token OPT-13B request
        (999, "auto", "999 B"),
        (2_500_000, "auto", "2.50 MB"),
        (3 * TB, "auto", "3.00 TB"),
    ],
)
def test_format_bytes(num_bytes, unit, expected):
    assert format_bytes(num_bytes, unit=unit) == expected


def test_format_gb_and_gib_digits():
    assert format_gb(1_234_567_890, digits=3) == "1.235 GB"
    assert format_gib(3 * GiB // 2, digits=1) == "1.5 GiB"


def test_format_unknown_unit_refused():
    with pytest.raises(CourseInputError, match="'MB'"):
        format_bytes(1, unit="MB")


def test_to_gb_and_to_gib():
    assert to_gb(1_500_000_000) == 1.5
    assert to_gib(2**31) == 2.0
    assert to_gb(24 * GiB) == 25.769803776


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=0, max_value=10**6))
def test_format_gb_then_parse_round_trips(thousandths):
    # n thousandths of a GB print exactly with 3 digits, so parsing the text gives n x 10^6 B back.
    num_bytes = thousandths * 10**6
    assert parse_bytes(format_gb(num_bytes, digits=3)) == num_bytes


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=0, max_value=4 * 10**5))
def test_format_gib_then_parse_round_trips(quarters):
    # Quarter GiBs (2^28 B) print exactly with 2 digits (x.00, x.25, x.50, x.75).
    num_bytes = quarters * 2**28
    assert parse_bytes(format_gib(num_bytes, digits=2)) == num_bytes


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=0, max_value=10**15), st.sampled_from(["B", "KB", "MB", "GB", "KiB", "MiB", "GiB"]))
def test_integer_with_unit_is_exact(count, unit):
    factor = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]
    if count * factor > 10**15:   # the bound: no size in a budget comes near 1 PB
        with pytest.raises(CourseInputError, match="above the bound of 1 PB"):
            parse_bytes(f"{count}{unit}")
        return
    assert parse_bytes(f"{count}{unit}") == count * factor
    assert parse_bytes(f"{count} {unit}") == count * factor


# ------------------------------------------------------------------ rates: one reader for a disk and a link


@pytest.mark.parametrize("value, says", [
    ("0", "is 0 B/s; give a {kind} per second such as {example}, or a preset ({listed})"),
    ("999B", "is 999 B/s, below the bound of 1,000 B/s (1 kB/s); give a {kind} per second such as {example}"),
    ("fast", "is neither a preset ({listed}) nor a {kind} per second such as {example}"),
    ("24XB", "has an unknown unit 'XB'"),          # reads as a rate: the size's own refusal
])
def test_a_disk_and_a_link_refuse_a_rate_alike(value, says):
    from course_lib.serving.loading import STORAGE_BYTES_PER_S, storage_rate
    from course_lib.serving.offload import LINKS, get_link

    for name, read, presets, kind, example in (("storage", storage_rate, STORAGE_BYTES_PER_S, "read rate", "2GB"),
                                               ("link", get_link, LINKS, "bandwidth", "25GB")):
        with pytest.raises(CourseInputError) as err:
            read(value)
        expected = says.format(kind=kind, example=example, listed=", ".join(presets))
        assert str(err.value).startswith(f"{name}={value!r}") and expected in str(err.value), str(err.value)


def test_a_rate_is_the_bytes_moved_in_one_second():
    from course_lib.serving.loading import storage_rate
    from course_lib.serving.offload import get_link

    assert storage_rate("2GB") == ("2 GB/s", 2 * 10**9)
    assert get_link("25GiB").bytes_per_s == 25 * 2**30
    assert parse_rate(1000, name="link", presets=(), kind="bandwidth", example="25GB") == 1000

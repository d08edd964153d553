"""Units are parsed to SI floats at the edges; exact values by the definitions of the prefixes."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabric.errors import FabricError
from fabric.units import (format_bandwidth, format_bytes, format_money, format_time, parse_bandwidth, parse_bytes,
                          parse_flops, parse_money, parse_power, parse_time)


@pytest.mark.parametrize("text, value", [
    ("400Gbps", 50e9), ("400Gb/s", 50e9), ("1.8TB/s", 1.8e12), ("900GB/s", 900e9), ("900GBps", 900e9),
    ("200 Gbps", 25e9), (12.5, 12.5), ("51.2Tbps", 6.4e12),
])
def test_bandwidth(text, value):
    assert parse_bandwidth(text) == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize("text, value", [("1GiB", 2**30), ("512MB", 512e6), ("4KiB", 4096), ("100", 100.0),
                                         ("80GB", 80e9)])
def test_bytes(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text, value", [("60us", 6e-5), ("1.2ms", 1.2e-3), ("3s", 3.0), ("0.5", 0.5),
                                         ("14us", 14e-6), ("2min", 120.0)])
def test_time(text, value):
    assert parse_time(text) == value


@pytest.mark.parametrize("text, value", [("$1,200", 1200.0), ("1.2k", 1200.0), ("$2M", 2e6), (950, 950.0),
                                         ("$200,000", 2e5)])
def test_money(text, value):
    assert parse_money(text) == value


def test_power_and_flops():
    assert parse_power("9W") == 9.0 and parse_power("1.2kW") == 1200.0
    assert parse_flops("989TFLOPS") == 989e12 and parse_flops("312e12") == 312e12


@pytest.mark.parametrize("fn, text", [(parse_bandwidth, "400Gbq"), (parse_bandwidth, "fast"), (parse_bytes, "1GiBs"),
                                      (parse_time, "3 weeks"), (parse_money, "EUR 5"), (parse_bandwidth, "-1Gbps"),
                                      (parse_time, "nan")])
def test_bad_units_name_the_field(fn, text):
    with pytest.raises(FabricError) as exc:
        fn(text, "myfield")
    assert exc.value.field == "myfield"


@pytest.mark.parametrize("fn, text", [(parse_bandwidth, "\u0664\u0665\u0660GB/s"), (parse_bytes, "\u0663MiB"),
                                      (parse_time, "\u0661ms"), (parse_money, "$\u0663\u0660,000"),
                                      (parse_power, "\u0967\u0966W"), (parse_flops, "1e\u0661\u0662"),
                                      (parse_bytes, "1.\uff15GiB")])
def test_digits_of_other_scripts_are_refused(fn, text):
    """ASCII digits only: ``\\d`` matched Arabic-Indic, Devanagari and full-width digits, so "\u0664\u0665\u0660GB/s"
    (in a topology file) read as 450 GB/s and ``--size \u0663MiB`` as 3 MiB, while ``--gpus \u0663`` was refused."""
    with pytest.raises(FabricError) as exc:
        fn(text, "myfield")
    assert exc.value.field == "myfield"


@pytest.mark.parametrize("fn", [parse_bandwidth, parse_bytes, parse_time, parse_money, parse_power, parse_flops])
def test_integer_beyond_float_range_names_the_field(fn):
    """YAML and JSON integers are unbounded: 10**400 has no float and raised OverflowError (a traceback)."""
    with pytest.raises(FabricError) as exc:
        fn(10**400, "myfield")
    assert exc.value.field == "myfield" and len(str(exc.value)) < 120  # the 401 digits are cut


def test_format_round_trip():
    assert format_bandwidth(50e9, bits=True) == "400Gbps"
    assert format_bandwidth(1.8e12) == "1.8TB/s"
    assert format_bytes(2**30) == "1GiB"
    assert format_time(6e-5) == "60us"
    assert format_money(1200) == "$1,200"


@given(st.floats(min_value=1e3, max_value=1e15, allow_nan=False))
def test_bandwidth_format_parse_round_trip(x):
    assert parse_bandwidth(format_bandwidth(x, digits=17)) == pytest.approx(x, rel=1e-12)


@pytest.mark.parametrize("fn, value", [(parse_bandwidth, -0.0), (parse_bandwidth, "-0Gbps"), (parse_bytes, "-0.0GiB"),
                                       (parse_time, "-0ms"), (parse_money, -0.0), (parse_power, "-0W"),
                                       (parse_flops, -0.0)])
def test_negative_zero_is_zero(fn, value):
    """-0.0 passes ``>= 0``; it is 0, not -0.0, which was printed as "$-0" and "-0.0"."""
    import math

    assert math.copysign(1.0, fn(value)) == 1.0

"""explorer.numbers.readable and readable_share: numbers in captions as a student reads them, never in e-notation."""

import pytest

from explorer.numbers import readable, readable_share


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [
        (2.48e-09, 3, "2.48 × 10⁻⁹"),
        (2.48e-09, 2, "2.5 × 10⁻⁹"),
        (-3.2e-08, 2, "-3.2 × 10⁻⁸"),
        (9.996e-09, 3, "1 × 10⁻⁸"),  # rounds up into the next power of ten
        (12_345_678, 3, "1.23 × 10⁷"),
        (0.0123, 3, "0.0123"),
        (0.000123, 3, "0.000123"),
        (4.1649, 3, "4.16"),
        (1250.0, 3, "1,250"),
        (100.0, 3, "100"),
        (0.9999, 3, "1"),
        (0.0, 3, "0"),
    ],
)
def test_readable(value, digits, text):
    assert readable(value, digits) == text
    assert "e" not in readable(value, digits)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.9996, "0.9996"),  # readable says "1": as if one weight had moved a whole row
        (0.99999994, "0.9999999"),  # the float32 just below 1: as few digits as keep it under 1
        (1.0, "1"),
        (0.5, "0.5"),
        (0.0123, "0.0123"),
        (1.49e-07, "1.49 × 10⁻⁷"),
    ],
)
def test_readable_share_never_rounds_up_to_one(value, text):
    assert readable_share(value) == text

"""explorer.numbers.readable: numbers in captions as a student reads them, never in e-notation."""

import pytest

from explorer.numbers import readable


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

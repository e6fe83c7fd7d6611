"""Numbers in sentences: what a caption prints, never in e-notation."""

from __future__ import annotations

import math

SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def readable(value: float, digits: int = 3) -> str:
    """`digits` significant digits, as a student reads them: 0.0123, 4.16, 1,250, or 2.5 × 10⁻⁹ for the tiny and
    the huge (where "%g" would print 2.5e-09)."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    exponent = math.floor(math.log10(abs(value)))
    if -4 <= exponent < 6:
        return _trimmed(f"{float(f'{value:.{digits}g}'):,.{max(0, digits - 1 - exponent)}f}")
    mantissa = value / 10**exponent
    if round(abs(mantissa), digits - 1) >= 10:  # 9.99 rounds up to 10: one more power of ten
        mantissa, exponent = mantissa / 10, exponent + 1
    return _trimmed(f"{mantissa:.{digits - 1}f}") + f" × 10{str(exponent).translate(SUPERSCRIPTS)}"


def readable_share(value: float, digits: int = 3) -> str:
    """readable for a value between 0 and 1, never rounded up to "1" unless it is 1: 0.9996, not 1 (a difference
    of attention weights that read "1" would say one weight moved all of a row)."""
    text = readable(value, digits)
    while value < 1.0 and text == "1" and digits < 9:
        digits += 1
        text = readable(value, digits)
    return text


def _trimmed(text: str) -> str:
    """Without the zeros that end a decimal fraction: 0.0120 -> 0.012, 2.0 -> 2 (1,250 keeps its zero)."""
    return text.rstrip("0").rstrip(".") if "." in text else text


def percent(share: float) -> str:
    """A share as a percentage with one decimal, never rounded up to "100.0%" unless it is exactly 1, nor down to
    "0.0%" unless it is 0 (a model's norms hold 0.03% of its parameters, not none)."""
    text = f"{share:.1%}"
    decimals = 1
    while 0.0 < share < 1.0 and (text.startswith("100.") or not text.strip("0.%")) and decimals < 6:
        decimals += 1
        text = f"{share:.{decimals}%}"
    if share > 0.0 and not text.strip("0.%"):  # below even six decimals
        text = f"<{10.0 ** -(decimals + 2):.{decimals}%}"
    return text

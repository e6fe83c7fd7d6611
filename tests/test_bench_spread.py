"""bench/spread.py: the paired bootstrap interval the page-load benches print beside a ratio of medians."""

from __future__ import annotations

import numpy as np
import pytest

from bench.spread import ratio_interval, ratio_text


def test_a_page_a_fixed_factor_slower_in_every_round_has_no_spread():
    base = [1.0, 1.4, 0.9, 1.6, 1.2, 1.1]
    low, high = ratio_interval([1.25 * b for b in base], base)
    assert low == pytest.approx(1.25) and high == pytest.approx(1.25)


def test_the_interval_holds_the_measured_ratio_and_narrows_with_more_rounds():
    rng = np.random.default_rng(1)

    def width(rounds: int) -> tuple[float, float, float]:
        drift = rng.uniform(1.0, 1.5, rounds)  # the machine's speed, shared by both loads of a round
        base = drift * rng.normal(1.0, 0.05, rounds)
        page = 1.2 * drift * rng.normal(1.0, 0.05, rounds)
        low, high = ratio_interval(page, base)
        return low, high, float(np.median(page) / np.median(base))

    low, high, measured = width(10)
    assert low <= measured <= high
    wide = high - low
    low, high, measured = width(400)
    assert low <= measured <= high
    # 40 times the rounds: about a sixth of the width; a half leaves room for the draws of both runs
    assert high - low < wide / 2


def test_the_rounds_stay_paired():
    # Each round's two loads drift together by a factor of 3: resampled unpaired, a draw with more fast rounds of the
    # page than of its base would give 1.2 / 3 = 0.4, or 3.6 / 1; paired, every draw keeps the ratio of 1.2
    base = [1.0, 3.0] * 10
    page = [1.2, 3.6] * 10
    low, high = ratio_interval(page, base)
    assert low == pytest.approx(1.2) and high == pytest.approx(1.2)


def test_unpaired_loads_are_refused():
    with pytest.raises(ValueError, match="one load of each per round"):
        ratio_interval([1.0, 1.1], [1.0])


def test_a_ratio_that_two_decimals_would_show_as_its_target_gets_a_third():
    """The page-load table printed "1.20x ... <= 1.2x ... NO" for a ratio of about 1.202: the figure beside a "NO"
    read as the target itself."""
    assert ratio_text(1.2020, 1.2) == "1.202"
    assert ratio_text(1.1960, 1.2) == "1.196"
    assert ratio_text(1.2, 1.2) == "1.20"
    assert ratio_text(1.25, 1.2) == "1.25"

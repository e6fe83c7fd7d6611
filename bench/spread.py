"""How far a measured ratio of medians could move by chance: a paired bootstrap interval over the rounds of a bench.

The benches that compare two pages load them in turn, round after round (serve.turns), so a machine that slows down
slows both loads of a round. Resampling whole rounds (the two loads of a round together) keeps that pairing: the
interval shows the spread of the ratio itself, not of each page's seconds, which drift more (on the 2-core VM the
same bare page took 1.2 s in one run and 1.6 s in another).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DRAWS = 4000  # resamples: the 2.5th and 97.5th percentiles of 4000 move by well under 0.01 between seeds
LEVEL = 0.95


def ratio_interval(
    page: Sequence[float], base: Sequence[float], level: float = LEVEL, seed: int = 0
) -> tuple[float, float]:
    """(low, high): the central `level` interval of median(page) / median(base) over resampled rounds, where
    page[i] and base[i] were loaded in the same round."""
    if len(page) != len(base) or len(page) == 0:
        raise ValueError(f"one load of each per round: got {len(page)} and {len(base)}")
    pages, bases = np.asarray(page, dtype=np.float64), np.asarray(base, dtype=np.float64)  # [R], [R]
    rounds = np.random.default_rng(seed).integers(0, len(pages), size=(DRAWS, len(pages)))  # [DRAWS, R]
    ratios = np.median(pages[rounds], axis=1) / np.median(bases[rounds], axis=1)  # [DRAWS]
    tail = (1 - level) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return float(low), float(high)


def ratio_text(ratio: float, target: float) -> str:
    """`ratio` to two decimals, or to three where two would read as the target itself ("1.20" for 1.2020 against
    <= 1.2, beside a "NO"), so the figure shows on which side of the target it fell."""
    if f"{ratio:.2f}" == f"{target:.2f}" and ratio != target:
        return f"{ratio:.3f}"
    return f"{ratio:.2f}"

"""Which per-layer panels of Compare (and of the Activations page's depth chart) get a logarithmic y axis, and the
sentence that says so. A flipped checkpoint's
numbers can differ by orders of magnitude (SmolLM2 run post-norm: gradient norms up to 11,000 against A's 3 to 19;
A's residual RMS up to 300 against B's 0.1 to 0.4): on a linear axis from 0 the smaller model is a line at zero.
No Streamlit here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from explorer.compare import PER_LAYER
from explorer.numbers import readable
from explorer.word_lists import listed

AXES = ("auto", "linear", "log")  # the axes URL parameter: auto picks per panel by LOG_SPAN
# A panel goes logarithmic (auto) when its largest value, over A and B together, is more than 100 times its smallest:
# on a linear axis from 0 the smallest values then sit within 1 % of the panel's 150 px height, under 2 px, which
# reads as a line at zero.
LOG_SPAN = 100.0


@dataclass(frozen=True)
class PanelScale:
    """One panel's y axis."""

    log: bool  # drawn on a logarithmic axis
    span: float | None  # its largest positive value over its smallest, A and B together; None: no positive value
    non_positive: bool  # it has a value <= 0, which a log axis cannot show: the panel stays linear

    @property
    def wide(self) -> bool:
        """Its positive values span more than LOG_SPAN."""
        return self.span is not None and self.span > LOG_SPAN


def panel_scale(values: np.ndarray, axes: str = "auto") -> PanelScale:
    """The axis of a panel drawing `values` (A's and B's together, NaN where a side has no such layer), for the
    choice `axes` (one of AXES): log when picked, or (auto) when the values span more than LOG_SPAN; linear
    whenever a value is <= 0."""
    finite = values[np.isfinite(values)]  # [n]
    positive = finite[finite > 0]  # [m]
    span = float(positive.max() / positive.min()) if len(positive) else None
    non_positive = bool(len(positive) < len(finite))
    wanted = axes == "log" or (axes == "auto" and span is not None and span > LOG_SPAN)
    return PanelScale(wanted and span is not None and not non_positive, span, non_positive)


def panel_scales(table: pd.DataFrame, axes: str = "auto") -> dict[str, PanelScale]:
    """Each statistic's axis, for a table of per_layer_comparison (statistic, layer, a, b)."""
    scales = {}
    for statistic in PER_LAYER:
        rows = table[table["statistic"] == statistic]
        scales[statistic] = panel_scale(rows[["a", "b"]].to_numpy(dtype=np.float64).ravel(), axes)
    return scales


def _listed(scales: dict[str, PanelScale], statistics: list[str], titles: dict[str, str]) -> str:
    """ "Residual stream RMS (×3,340) and Gradient norm of each block (×3,930)": each panel with its span."""
    return listed([f"{titles[s]} (×{readable(scales[s].span)})" for s in statistics])


def log_panels_note(scales: dict[str, PanelScale], titles: dict[str, str]) -> str | None:
    """A subtitle's note of the panels drawn on a log scale, each with its span, for a chart with no axes choice; None
    when every panel is linear."""
    log = [s for s, scale in scales.items() if scale.log]
    if not log:
        return None
    listed = _listed(scales, log, titles)
    return f"log scale where the largest value is over {LOG_SPAN:.0f} times the smallest: {listed}"


def scales_note(scales: dict[str, PanelScale], axes: str, titles: dict[str, str]) -> str | None:
    """What the axes show when a panel is logarithmic or would be: which panels and their spans, a panel spanning
    more than LOG_SPAN on linear axes picked, and which stay linear because a value is <= 0. None when there is
    nothing to say. `titles`: each statistic's panel title."""
    log = [s for s, scale in scales.items() if scale.log]
    wide = [s for s, scale in scales.items() if scale.wide and not scale.log]
    sentences = []
    if log and axes == "log":
        sentences.append(f"Log scale, as picked, on {_listed(scales, log, titles)}: largest value over smallest.")
    elif log:
        sentences.append(
            f"Log scale on {_listed(scales, log, titles)}: each panel's largest value over its smallest is more than "
            f"×{LOG_SPAN:.0f}, and on a linear axis from 0 the smaller values would be a line at zero. Pick linear "
            "axes to see every panel from 0."
        )
    if axes == "linear" and wide:
        sentences.append(
            f"On these linear axes the smaller values of {_listed(scales, wide, titles)} (largest value over "
            "smallest) sit at zero: pick auto or log to spread them."
        )
    stays = [
        s for s, scale in scales.items() if scale.non_positive and (axes == "log" or (axes == "auto" and scale.wide))
    ]
    if stays:
        one = len(stays) == 1
        sentences.append(
            f"{listed([titles[s] for s in stays])} stay{'s' if one else ''} linear: {'it has' if one else 'they have'} "
            "values of 0 or below, which a log axis cannot show."
        )
    return " ".join(sentences) or None

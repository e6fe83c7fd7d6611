"""The four norm placements on one model's weights (explorer.analysis.placements.PlacementRun), as one Plotly figure:
residual RMS over depth, gradient norm per block and attention entropy per layer, one line per placement. No
Streamlit here; the Compare page and pictures.notebook_figures.placements_figure draw it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.analysis.placements import ENTROPY, GRADIENT, MEASURES, RMS, PlacementRun
from explorer.config import NORMS
from pictures.compare_lines_chart import NO_KEY, NOT_AVAILABLE
from pictures.style import (
    HOVER_NUMBERS,
    LOG_NUMBERS,
    PANEL_TITLE_FONT,
    PANEL_TITLE_PX,
    SUBTITLE_COLOUR,
    axis,
    block_axis,
    block_label,
    figure_layout,
    legend_below,
)

# One look per placement, told apart in greyscale by dash and marker as well as by lightness (grey levels as PIL's
# "L" mode converts them: purple 45, blue 84, orange 136, green 167 of 255). Post and pre keep the Train page's blue
# and orange (pictures.training_charts.NORM_COLOURS).
PLACEMENT_COLOURS = {"post": "#1f5fa8", "pre": "#e0701a", "res-post": "#6fcf6a", "peri": "#3d1a66"}
PLACEMENT_DASHES = {"post": "solid", "pre": "dash", "res-post": "dot", "peri": "dashdot"}
PLACEMENT_MARKERS = {"post": "circle", "pre": "diamond", "res-post": "square", "peri": "triangle-up"}
# Short: at 1024 px, beside the sidebar, the chart is 530 px and each title has a third of it ("Residual RMS after
# each block" ran into "Gradient norm per block"); the x axes say "after block" and "block".
PANEL_TITLES = {
    RMS: "Residual RMS",
    GRADIENT: "Gradient norm",
    ENTROPY: "Attention entropy",
}
PANEL_SPACING = 0.14  # of the width between panels: room for the next panel's tick labels and its axis title
VALUE_TITLES = {RMS: "RMS", GRADIENT: "‖gradient‖", ENTROPY: "entropy (nats)"}
LOG_ABOVE = 30.0  # a stream or gradient panel spanning more than this factor gets a log scale (SmolLM2's RMS: x4000)
# Labels along a panel's x axis. At 1024 px a panel's plot is about 106 px wide: eleven labels (every third of 30
# blocks) left 10 px each and Plotly turned them on end; four leave 27 px, room for "input" beside its neighbour.
MAX_LAYER_TICKS = 4


def placement_name(placement: str) -> str:
    return f"{placement}-norm"


def _log_scale(values: np.ndarray) -> bool:
    """True when positive values span more than LOG_ABOVE: on a linear axis the small lines would lie flat on 0."""
    positive = values[values > 0]
    return positive.size > 0 and bool(positive.max() > LOG_ABOVE * positive.min()) and bool((values > 0).all())


def _hover_layer(measure: str, layer: int) -> str:
    """Where a value is, as hover says it: "input" (the stream entering block 0), "after block 3" or "block 3"."""
    if layer == -1:
        return "input"
    return f"{'after block' if measure == RMS else 'block'} {block_label(layer)}"


def _missing_note(rows: pd.DataFrame, measure: str) -> str:
    """What an empty panel says: no values at all (no gradient norms), or an entropy with no key to spread over."""
    if rows.empty:
        return NOT_AVAILABLE
    return NO_KEY if measure == ENTROPY else "not a number"


def placements_chart(result: PlacementRun, stack: str | None = None, title: str | None = None) -> go.Figure:
    """Three panels side by side (residual RMS, gradient norm, attention entropy over the layers of `stack`, the
    first unless named), one line per placement in PLACEMENT_COLOURS, dashes and markers; hover gives the placement,
    the layer and the value. A panel without values (no gradient norms) says so; the stream's or the gradients' panel
    is drawn on a log scale when its values span more than LOG_ABOVE, and its axis says so (entropy stays linear from
    0, which means all weight on one key)."""
    stack = stack or result.stacks[0]
    rows = result.table[result.table["stack"] == stack]
    figure = make_subplots(
        rows=1, cols=3, subplot_titles=[PANEL_TITLES[m] for m in MEASURES], horizontal_spacing=PANEL_SPACING
    )
    figure.update_annotations(font=PANEL_TITLE_FONT)
    for col, measure in enumerate(MEASURES, start=1):
        mine = rows[rows["measure"] == measure]
        if mine.empty or not np.isfinite(mine["value"].to_numpy(dtype=np.float64)).any():
            panel = figure.get_subplot(1, col)
            figure.add_annotation(text=_missing_note(mine, measure), showarrow=False,
                                  font={"color": SUBTITLE_COLOUR, "size": 13},
                                  x=sum(panel.xaxis.domain) / 2, y=0.5, xref="paper", yref="paper")  # fmt: skip
            figure.update_xaxes(visible=False, row=1, col=col)
            figure.update_yaxes(visible=False, row=1, col=col)
            continue
        for placement in NORMS:
            line = mine[mine["placement"] == placement].sort_values("layer")
            layers = line["layer"].to_numpy(dtype=np.int32)  # [n]
            name = placement_name(placement)
            unresolved = measure == GRADIENT and placement in result.unresolved  # float32 rounding, not a measure
            figure.add_trace(
                go.Scatter(
                    x=layers,
                    y=line["value"].to_numpy(dtype=np.float64),
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    mode="lines+markers",
                    line={"color": PLACEMENT_COLOURS[placement], "width": 2, "dash": PLACEMENT_DASHES[placement]},
                    marker={"size": 7, "symbol": PLACEMENT_MARKERS[placement]},
                    opacity=0.35 if unresolved else 1.0,
                    customdata=[_hover_layer(measure, layer) for layer in layers],
                    hovertemplate=f"{name}<br>%{{customdata}}<br>{VALUE_TITLES[measure]} %{{y:{HOVER_NUMBERS}}}"
                    + ("<br>not resolved in float32: rounding, not a measurement" if unresolved else "")
                    + "<extra></extra>",
                ),
                row=1,
                col=col,
            )
        log = measure != ENTROPY and _log_scale(mine["value"].to_numpy(dtype=np.float64))  # entropy: 0 is one key
        value_title = VALUE_TITLES[measure] + (" (log scale)" if log else "")
        y_axis = axis(value_title, **LOG_NUMBERS) if log else axis(value_title, rangemode="tozero")
        figure.update_yaxes(y_axis, row=1, col=col)
        figure.update_xaxes(
            block_axis(
                "after block" if measure == RMS else "block",
                sorted(int(v) for v in mine["layer"].unique()),
                MAX_LAYER_TICKS,
            ),
            row=1,
            col=col,
        )
    subtitle = (
        f"{stack} · the same weights, made for {placement_name(result.own)}; norms they lack start at identity · "
        "RMS over tokens and units, before any final norm · entropy: self-attention, mean over heads and queries"
    )
    if result.unresolved:
        faint = ", ".join(placement_name(p) for p in result.unresolved)
        subtitle += f" · faint gradients ({faint}): float32 rounding, not resolved on these weights"
    layout = figure_layout(title or "All four norm placements on the same weights", subtitle, 300)
    legend_below(layout)
    layout["margin"]["t"] += PANEL_TITLE_PX
    figure.update_layout(layout)
    return figure

"""The Compare page's per-layer chart: A's and B's statistics over depth (residual RMS and std, gradient norms,
attention entropy) as lines on the same axes, one panel each, linear or logarithmic as pictures.log_axes picks. No
Streamlit here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.compare import PER_LAYER
from pictures.compare_charts import A_COLOUR, B_COLOUR
from pictures.log_axes import PanelScale, panel_scales
from pictures.style import (
    HOVER_NUMBERS,
    LOG_NUMBERS,
    PANEL_TITLE_FONT,
    PANEL_TITLE_PX,
    SUBTITLE_COLOUR,
    axis,
    block_axis,
    figure_layout,
    label_text,
    legend_below,
)

STATISTIC_TITLES = {
    "residual RMS": "Residual stream RMS",
    "residual std": "Residual stream std",
    "gradient norm": "Gradient norm of each block",
    "attention entropy": "Attention entropy (nats, mean of heads)",  # "Self-…" lost its ")" at 1024 px
}
STATISTIC_UNITS = {  # each linear panel's y title (a logarithmic one's is LOG_TITLE)
    "residual RMS": "RMS",
    "residual std": "std",
    "gradient norm": "L2 norm",
    "attention entropy": "nats",
}
LINE_HEIGHT = 150  # px of each per-layer panel
PANEL_GAP_PX = 90  # px between the two rows of panels: the upper row's axis title and the lower row's panel titles
MAX_LAYER_TICKS = 13
SHADE_COLOUR = "#eeeeee"  # behind the blocks only one model has
NOT_AVAILABLE = "not available"  # written in a panel whose statistic has no values (no gradient norms)
NO_KEY = "no query has a key<br>it may attend to"  # the entropy panel's, on all-[PAD] input
LOG_TITLE = "log scale"  # the y title of a logarithmic panel
# Between the two columns of panels, of the figure's width: the right panel's y tick labels, and its title "log scale"
# when logarithmic. At 0.1 a 1024 px page (a 560 px chart, 56 px between columns) drew the right panel's "log scale"
# on the left panel's last markers and its "input" against the left one's "29" (SmolLM2 flipped to post-norm).
SPACING, LOG_SPACING = 0.1, 0.15


def _layer_title(statistic: str) -> str:
    """What a panel's x axis counts: the residual stream is measured after each block, the others in each block."""
    return "after block" if statistic.startswith("residual") else "block"


def _model_line(rows: pd.DataFrame, column: str, name: str, statistic: str, first: bool) -> go.Scatter:
    """One model's values of one statistic over its layers: A solid blue with circles, B dashed orange with diamonds;
    hover names the model, the layer and the value. `first`: the panel that puts it in the legend."""
    mine = rows[rows[column].notna()]
    layers = mine["layer"].to_numpy(dtype=np.int32)  # [n]
    a = column == "a"
    return go.Scatter(
        x=layers,
        y=mine[column].to_numpy(dtype=np.float64),
        name=name,
        legendgroup=name,
        showlegend=first,
        mode="lines+markers",
        line={"color": A_COLOUR if a else B_COLOUR, "width": 2, "dash": "solid" if a else "dash"},
        marker={"size": 8, "symbol": "circle" if a else "diamond"},
        customdata=["input" if layer == -1 else f"{_layer_title(statistic)} {layer}" for layer in layers],
        hovertemplate=f"{label_text(name)}<br>%{{customdata}}<br>{statistic} %{{y:{HOVER_NUMBERS}}}<extra></extra>",
    )


def log_axis(scale: PanelScale) -> dict:
    """A logarithmic y axis labelled in powers of ten; only at whole decades when it spans two or more (its 2 and 5
    between decades crowded a 150 px panel spanning three: "5 2 10³ 5 2 10² 5 2 10 5")."""
    decades = {"dtick": 1} if scale.wide else {}  # spanning less, a decade may not be in the range at all
    return axis(LOG_TITLE, **LOG_NUMBERS, **decades)


def model_layers(table: pd.DataFrame, column: str) -> set[int]:
    """The layers one model (`column`: "a" or "b" of per_layer_comparison) has: those with a value of any statistic."""
    return {int(layer) for layer in table.loc[table[column].notna(), "layer"]}


def layer_lines(
    table: pd.DataFrame, names: tuple[str, str] = ("A", "B"), axes: str = "auto", missing: str = NOT_AVAILABLE
) -> go.Figure:
    """A 2 x 2 grid, one panel per statistic of per_layer_comparison (each its own y scale, from 0, or logarithmic as
    pictures.log_axes picks for `axes`), A (solid blue, circles) and B (dashed orange, diamonds) as two lines on the
    same axes. Layer -1 is the input to the first block, labelled "input"; layers only one model has are shaded.
    Without B's values, the legend names A alone; a gradient panel with no values at all says `missing` (why, when
    known), an entropy panel that no query has a key it may see (all [PAD])."""
    has_b = bool(table["b"].notna().any())
    scales = panel_scales(table, axes)
    figure = make_subplots(
        rows=2, cols=2, subplot_titles=[STATISTIC_TITLES[s] for s in PER_LAYER],
        horizontal_spacing=LOG_SPACING if any(scale.log for scale in scales.values()) else SPACING,
        vertical_spacing=PANEL_GAP_PX / (2 * LINE_HEIGHT + PANEL_GAP_PX),  # of the plot area: exactly that gap
    )  # fmt: skip
    figure.update_annotations(font=PANEL_TITLE_FONT)
    in_legend: set[str] = set()
    shaded = False
    # A block only one model has: not a panel's missing value (B with heads removed has no gradient norms, yet every
    # block A has), but a layer where one model has no statistic at all
    depth_a, depth_b = model_layers(table, "a"), model_layers(table, "b")
    for i, statistic in enumerate(PER_LAYER):
        row, col = i // 2 + 1, i % 2 + 1
        rows = table[table["statistic"] == statistic].sort_values("layer")
        if rows[["a", "b"]].notna().to_numpy().sum() == 0:  # e.g. no gradient norms: say so rather than draw bare axes
            panel = figure.get_subplot(row, col)  # placed on the page: a hidden axis has no domain to refer to
            why = missing if statistic == "gradient norm" else NO_KEY if statistic == "attention entropy" else None
            figure.add_annotation(text=why or NOT_AVAILABLE, showarrow=False,
                                  font={"color": SUBTITLE_COLOUR, "size": 13}, x=sum(panel.xaxis.domain) / 2,
                                  y=sum(panel.yaxis.domain) / 2, xref="paper", yref="paper")  # fmt: skip
            figure.update_xaxes(visible=False, row=row, col=col)
            figure.update_yaxes(visible=False, row=row, col=col)
            continue
        for column, name in zip(("a", "b"), names, strict=True):
            if rows[column].notna().any():
                figure.add_trace(_model_line(rows, column, name, statistic, name not in in_legend), row=row, col=col)
                in_legend.add(name)
        only_one = [layer for layer in rows["layer"] if (layer in depth_a) != (layer in depth_b)]
        if has_b and only_one:
            figure.add_vrect(x0=min(only_one) - 0.5, x1=max(only_one) + 0.5, fillcolor=SHADE_COLOUR,
                             opacity=1.0, line_width=0, layer="below", row=row, col=col)  # fmt: skip
            shaded = True
        figure.update_xaxes(
            block_axis(_layer_title(statistic), [int(v) for v in rows["layer"]], MAX_LAYER_TICKS), row=row, col=col
        )
        linear = axis(STATISTIC_UNITS[statistic], rangemode="tozero")
        y_axis = log_axis(scales[statistic]) if scales[statistic].log else linear
        figure.update_yaxes(y_axis, row=row, col=col)
    a_name, b_name = names
    if has_b:
        title = f"Per-layer statistics of {a_name} and {b_name}"
        subtitle = (
            f"{a_name}: solid blue, circles; {b_name}: dashed orange, diamonds; each panel its own scale, "
            + ("from 0 or logarithmic (marked log scale)" if any(s.log for s in scales.values()) else "from 0")
            + ("; shaded: blocks only one model has" if shaded else "")
        )
    else:
        title, subtitle = f"Per-layer statistics of {a_name}", f"{b_name} has no values here: {a_name} alone"
    panels_px = 2 * LINE_HEIGHT + PANEL_GAP_PX
    layout = figure_layout(title, subtitle)
    legend_below(layout)
    layout["margin"]["t"] += PANEL_TITLE_PX
    layout["height"] = panels_px + layout["margin"]["t"] + layout["margin"]["b"]  # each panel LINE_HEIGHT px tall
    figure.update_layout(layout)
    return figure

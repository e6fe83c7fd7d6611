"""Figures of the activations page. Tables in, dicts out (no Streamlit here).

Vega-Lite specs for the lines and bars (each names its tables under "datasets"): act_depth, act_layernorm,
act_histogram, act_zeros, act_grad_totals. Matrix-view panels and boards for the matrices (pictures/boards.py
says why they are not Vega-Lite): act_token_norms, the per-head grids (named by the caller) and act_grad, whose hover
also gives each gradient norm.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer.positional import ADDED_TO_INPUT, input_text
from pictures.attention_panels import token_labels
from pictures.boards import board, matrix_panel
from pictures.style import (
    AXIS_NUMBERS,
    CATEGORY10,
    GRID_COLOUR,
    MAX_CELL_PX,
    VIRIDIS,
    Ramp,
    axis,
    chart,
    figure_layout,
    heading,
    layer_head_axes,
)

CIVIDIS = ("#00224e", "#123570", "#3b496c", "#575d6d", "#707173", "#8a8678", "#a59c74", "#c3b369", "#e1cc55",
           "#fee838")  # fmt: skip
POINT_COLOURS = {  # one colour per point, whichever points a stack has
    "residual": CATEGORY10[0],
    "attention output": CATEGORY10[1],
    "cross-attention output": CATEGORY10[4],
    "FFN hidden": CATEGORY10[2],
    "FFN output": CATEGORY10[3],
}
STAT_TITLES = {"mean": "mean", "std": "standard deviation", "rms": "RMS", "max_abs": "max |x|"}
SUBLAYER_NAMES = {"attn": "self-attention", "cross": "cross-attention", "ffn": "feed-forward"}
MAX_TEXT_HEADS = 6  # a per-head grid (a third of the page wide) writes its values up to this many heads
MAX_LAYER_TICKS = 14
PANEL_WIDTH, PANEL_HEIGHT = 330, 190  # px of one panel of a grid of line charts
LINE_WIDTH = 640  # px of the plot area of a single line or bar chart
BAR_COLOUR = "#4c78a8"
HEAD_GRID_PX = 150  # px along the longer side of a per-head grid: three fit in a row


def _layer_axis(title: str | None, layers: list[int]) -> dict:
    """An x encoding over block indices; -1 is labelled 'input' (the input to the first block)."""
    values = layers if len(layers) <= MAX_LAYER_TICKS else layers[:: math.ceil(len(layers) / MAX_LAYER_TICKS)]
    return {
        "field": "layer",
        "type": "quantitative",
        "scale": {"domain": [layers[0] - 0.3, layers[-1] + 0.3], "nice": False, "zero": False},
        "axis": {"title": title, "values": values, "labelExpr": "datum.value == -1 ? 'input' : datum.value",
                 "grid": True, "gridColor": GRID_COLOUR},
    }  # fmt: skip


def _block_name() -> dict:
    """A transform naming each row's block for hover: 'input' for -1, else the block index."""
    return {"calculate": "datum.layer == -1 ? 'input' : '' + datum.layer", "as": "block"}


def _y(title: str | None = None, **scale: object) -> dict:
    return {"field": "value", "type": "quantitative", "scale": {"zero": False, **scale},
            "axis": {"title": title, "gridColor": GRID_COLOUR, "format": AXIS_NUMBERS}}  # fmt: skip


def _panels(panels: list[dict], columns: int) -> dict:
    """Panels in rows of `columns` (an hconcat per row: Streamlit draws nothing of a "concat" with "columns")."""
    shared = {"scale": {"color": "shared", "strokeDash": "shared", "shape": "shared"}}
    rows = [{"hconcat": panels[i : i + columns], "spacing": 40, "resolve": shared}
            for i in range(0, len(panels), columns)]  # fmt: skip
    return rows[0] if len(rows) == 1 else {"vconcat": rows, "spacing": 24, "resolve": shared}


def depth_figure(stats: pd.DataFrame, stack: str, positional: str) -> dict:
    """Mean, std, RMS and max |x| over depth (2 x 2), one line per point: the residual stream (after each block,
    and the input) and each sub-layer's output before it is added to the stream."""
    points = [p for p in stats["point"].unique() if "LayerNorm" not in p]
    rows = stats[stats["point"].isin(points)]
    table = rows.melt(id_vars=["layer", "point"], value_vars=list(STAT_TITLES), var_name="statistic")
    table = table.astype({"layer": np.int32, "value": np.float64})  # layer, point, statistic, value
    layers = list(range(-1, int(stats["layer"].max()) + 1))
    colours = [POINT_COLOURS.get(p, CATEGORY10[i % len(CATEGORY10)]) for i, p in enumerate(points)]
    colour = {"field": "point", "type": "nominal", "title": "point", "scale": {"domain": points, "range": colours}}
    width = {"condition": {"test": "datum.point == 'residual'", "value": 3}, "value": 2}
    panels = []
    for i, (stat, title) in enumerate(STAT_TITLES.items()):
        x = _layer_axis("block" if i >= 2 else None, layers)
        tooltip = [{"field": "point"}, {"field": "block"}, {"field": "value", "title": title, "format": ".4g"}]
        panels.append(
            {
                "title": {"text": title, "anchor": "middle", "fontSize": 13},
                "width": PANEL_WIDTH,
                "height": PANEL_HEIGHT,
                "data": {"name": "act_depth"},
                "transform": [{"filter": f"datum.statistic == '{stat}'"}, _block_name()],
                "layer": [
                    {"mark": {"type": "line"}, "encoding": {"x": x, "y": _y(), "color": colour, "strokeWidth": width}},
                    {"mark": {"type": "point", "filled": True, "size": 36, "opacity": 1},
                     "encoding": {"x": x, "y": _y(), "color": colour, "tooltip": tooltip}},
                ],
            }
        )  # fmt: skip
    subtitle = (
        f"residual: the stream after each block (input = {input_text(positional)}); sub-layer outputs: what each "
        "sub-layer adds, before the residual sum; over all tokens and units"
    )
    return chart(
        {
            "title": heading(f"Activation statistics over depth ({stack} stack)", subtitle, 2 * PANEL_WIDTH + 180),
            "datasets": {"act_depth": table},
            **_panels(panels, 2),
        }
    )


def layernorm_figure(stats: pd.DataFrame, stack: str, norm: str) -> dict:
    """Each LayerNorm's input against its output over depth: RMS and max |x|."""
    rows = stats[stats["point"].str.contains("LayerNorm")]
    sublayers = list(dict.fromkeys(p.rsplit(" LayerNorm", 1)[0] for p in rows["point"]))
    labels, colours, dashes, shapes = [], [], [], []
    for i, sub in enumerate(sublayers):
        for side in ("in", "out"):
            labels.append(f"{SUBLAYER_NAMES.get(sub, sub)} LayerNorm {'input' if side == 'in' else 'output'}")
            colours.append(CATEGORY10[i % len(CATEGORY10)])
            dashes.append([1, 0] if side == "in" else [6, 4])
            shapes.append("circle" if side == "in" else "diamond")
    names = {f"{sub} LayerNorm {side}": label for (sub, side), label in
             zip([(s, side) for s in sublayers for side in ("in", "out")], labels, strict=True)}  # fmt: skip
    table = rows.assign(series=rows["point"].map(names)).melt(
        id_vars=["layer", "series"], value_vars=["rms", "max_abs"], var_name="statistic"
    )
    table = table.astype({"layer": np.int32, "value": np.float64})  # layer, series, statistic, value
    layers = list(range(0, int(stats["layer"].max()) + 1))

    def channel(values: list) -> dict:
        return {"field": "series", "type": "nominal", "title": None, "scale": {"domain": labels, "range": values}}

    panels = []
    for stat in ("rms", "max_abs"):
        x = _layer_axis("block", layers)
        y = _y(zero=True)
        tooltip = [{"field": "series", "title": "LayerNorm"}, {"field": "block"},
                   {"field": "value", "title": STAT_TITLES[stat], "format": ".4g"}]  # fmt: skip
        panels.append(
            {
                "title": {"text": STAT_TITLES[stat], "anchor": "middle", "fontSize": 13},
                "width": PANEL_WIDTH,
                "height": PANEL_HEIGHT,
                "data": {"name": "act_layernorm"},
                "transform": [{"filter": f"datum.statistic == '{stat}'"}, _block_name()],
                "layer": [
                    {"mark": {"type": "line", "strokeWidth": 2},
                     "encoding": {"x": x, "y": y, "color": channel(colours), "strokeDash": channel(dashes)}},
                    {"mark": {"type": "point", "filled": True, "size": 45, "opacity": 1},
                     "encoding": {"x": x, "y": y, "color": channel(colours),
                                  "shape": channel(shapes), "tooltip": tooltip}},
                ],
            }
        )  # fmt: skip
    where = "x + sublayer(x), the sum it normalises" if norm == "post" else "the residual stream x itself"
    subtitle = (
        f"input (solid, circles): {where}; output (dashed, diamonds): what it returns, RMS ≈ 1 while its gain is 1 "
        "and its bias 0, as at initialisation (a trained LayerNorm moves away from that)"
    )
    spec = chart(
        {
            "title": heading(
                f"What each LayerNorm receives and returns ({stack} stack, {norm}-norm)",
                subtitle,
                2 * PANEL_WIDTH + 180,
            ),
            "datasets": {"act_layernorm": table},
            **_panels(panels, 2),
        }
    )
    spec["config"]["legend"] |= {"orient": "bottom", "direction": "horizontal", "columns": 2, "labelLimit": 320,
                                 "symbolSize": 80}  # fmt: skip
    return spec


def token_norm_heatmap(norms: np.ndarray, tokens: list[str], stack: str, positional: str) -> dict:
    """[L + 1, T] L2 norm of each token's residual vector, input on top, then after each block: a matrix-view
    board whose rows are tall enough for their labels."""
    n_rows, n_tokens = norms.shape
    cell = min(MAX_CELL_PX, LINE_WIDTH / max(n_rows, n_tokens))
    panel = matrix_panel(
        norms.astype(np.float32),
        None,
        Ramp(VIRIDIS, float(norms.min()), float(max(norms.max(), norms.min() + 1e-6))),
        name="act_token_norms",
        x_labels=token_labels(tokens),
        y_labels=["input"] + [f"after block {i}" for i in range(n_rows - 1)],
        x_title="token",
        y_title="layer",
        value_title="‖x‖₂",
        title=f"Norm of each token's residual vector, layer by layer ({stack} stack)",
        subtitle="L2 norm over d_model; "
        + (
            "the input adds each token's position, so a repeated word's input rows differ"
            if positional in ADDED_TO_INPUT
            else "no position is added to the input, so a repeated word has the same input row"
        ),
        text_digits=1,
        plot_px=(max(320.0, n_tokens * cell), max(n_rows * cell, min(24.0 * n_rows, 600.0))),
    )
    return board([panel])


def histogram_figure(bins: pd.DataFrame, what: str, values_summary: str, log_count: bool = False) -> dict:
    """A histogram from value_histogram's bins, with the exact zeros called out."""
    table = bins[["left", "right", "count"]].astype({"count": np.int64})
    zeros = int(bins["exact_zeros"].iloc[0])
    x = {"field": "left", "type": "quantitative", "scale": {"zero": False, "nice": False},
         "axis": {"title": "activation value", "gridColor": GRID_COLOUR}}  # fmt: skip
    scale = {"type": "log", "domainMin": 0.7} if log_count else {"zero": True}  # a count of 1 still shows
    y = {"field": "count", "type": "quantitative", "scale": scale,
         "axis": {"title": "count (log scale)" if log_count else "count", "gridColor": GRID_COLOUR}}  # fmt: skip
    layers: list[dict] = [
        {
            "data": {"name": "act_histogram"},
            "transform": [{"filter": "datum.count > 0"}] if log_count else [],
            "mark": {"type": "rect", "color": "#4c78a8"},
            "encoding": {"x": x, "x2": {"field": "right"}, "y": y,
                         "y2": {"value": "height"} if log_count else {"datum": 0}, "tooltip": [
                {"field": "left", "title": "from", "format": ".4g"},
                {"field": "right", "title": "to", "format": ".4g"},
                {"field": "count", "title": "values", "format": ","},
            ]},
        }
    ]  # fmt: skip
    if zeros:
        layers.append(
            {
                "data": {"values": [{"left": 0.0, "zeros": zeros}]},
                "mark": {"type": "rule", "color": "#d62728", "strokeDash": [2, 3], "strokeWidth": 1.5},
                "encoding": {"x": {"field": "left", "type": "quantitative"},
                             "tooltip": [{"field": "zeros", "title": "values exactly 0", "format": ","}]},
            }
        )  # fmt: skip
    return chart(
        {
            "title": heading(f"Distribution of values: {what}", values_summary, LINE_WIDTH + 40),
            "width": LINE_WIDTH,
            "height": 280,
            "datasets": {"act_histogram": table},
            "layer": layers,
        }
    )


def zero_fraction_figure(zeros: pd.DataFrame, stack: str, activation: str) -> go.Figure:
    """Share of feed-forward hidden units that are exactly 0, per layer: one bar per block, its percentage on top."""
    note = (
        "ReLU sets every negative pre-activation to exactly 0; about half for random weights"
        if activation == "relu"
        else "GELU is exactly 0 only at 0 itself, so this stays at 0%"
    )
    share = zeros["zero_fraction"].to_numpy(dtype=np.float64)  # [L]
    figure = go.Figure(
        go.Bar(
            x=zeros["layer"].to_numpy(dtype=np.int32),
            y=share,
            name="exactly 0",
            marker_color=BAR_COLOUR,
            text=[f"{s:.0%}" for s in share],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="block %{x}<br>hidden units exactly 0: %{y:.2%}<extra></extra>",
        )
    )
    figure.update_layout(
        figure_layout(f"Feed-forward hidden units that are exactly 0 ({stack} stack, {activation})", note, 240),
        xaxis=axis("block", numbers="d", type="category"),
        yaxis=axis("share of units × tokens", numbers=".0%", range=[0, 1.12], tickvals=[0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        bargap=0.35,
    )
    return figure


def head_grid_panel(
    grid: np.ndarray,
    title: str,
    subtitle: str,
    colour_title: str,
    zmin: float,
    zmax: float,
    colours: tuple[str, ...] = VIRIDIS,
    name: str = "heads",
) -> dict:
    """A [layer, head] grid of one per-head statistic as a matrix-view panel, the value written in each cell (up to
    MAX_TEXT_HEADS heads); a head with no value (no query had an allowed key) is grey."""
    n_layers, n_heads = grid.shape
    finite = np.isfinite(grid)  # [L, H]
    return matrix_panel(
        np.where(finite, grid, 0.0).astype(np.float32),
        None if finite.all() else finite,
        Ramp(colours, zmin, zmax if zmax > zmin else zmin + 1.0),
        name=name,
        **layer_head_axes(n_layers, n_heads),
        value_title=colour_title,
        title=title,
        subtitle=subtitle,
        text_digits=2 if n_heads <= MAX_TEXT_HEADS and n_layers <= 16 else None,
        masked_text="no value: no query had an allowed key",
        max_px=HEAD_GRID_PX,
    )


def gradient_totals_figure(totals: pd.DataFrame, norm: str) -> dict:
    """L2 norm of all of a block's parameter gradients, per block, one line per stack (log scale)."""
    table = totals[["stack", "layer", "norm"]].astype({"layer": np.int32, "norm": np.float64})
    table["series"] = table["stack"] + " blocks"
    names = list(dict.fromkeys(table["series"]))
    layers = list(range(0, int(table["layer"].max()) + 1)) if len(table) else [0]
    x = _layer_axis("block", layers)
    y = {"field": "norm", "type": "quantitative", "scale": {"type": "log"},
         "axis": {"title": "gradient norm (log scale)", "gridColor": GRID_COLOUR, "format": AXIS_NUMBERS}}  # fmt: skip
    colour = {"field": "series", "type": "nominal", "title": None,
              "scale": {"domain": names, "range": list(CATEGORY10[: len(names)])},
              "legend": {"orient": "top", "direction": "horizontal", "symbolStrokeWidth": 3}}  # fmt: skip
    return chart(
        {
            "title": heading(
                f"Gradient norm of each block's parameters ({norm}-norm)",
                "L2 norm of the gradients of all of the block's weights and biases together, for the objective "
                "stated above",
                LINE_WIDTH,
            ),
            "width": LINE_WIDTH,
            "height": 260,
            "datasets": {"act_grad_totals": table},
            "data": {"name": "act_grad_totals"},
            "transform": [{"filter": "datum.norm > 0"}],
            "layer": [
                {"mark": {"type": "line", "strokeWidth": 3}, "encoding": {"x": x, "y": y, "color": colour}},
                {"mark": {"type": "point", "filled": True, "size": 60, "opacity": 1},
                 "encoding": {"x": x, "y": y, "color": colour, "tooltip": [
                     {"field": "stack"}, {"field": "layer", "title": "block"},
                     {"field": "norm", "title": "gradient norm", "format": ".4g"},
                 ]}},
            ],
        }
    )  # fmt: skip


def gradient_heatmap(norms: pd.DataFrame, stack: str) -> dict:
    """[parameter, block] gradient norm of each weight matrix and bias of one stack as a matrix-view board, coloured
    by the norm's log10 so that small and large norms both show (a zero gradient, which has no logarithm, is grey);
    hover gives the norm itself."""
    part = norms[(norms["stack"] == stack) & norms["layer"].notna()]
    table = part.pivot_table(index="parameter", columns="layer", values="norm", sort=False)  # [parameters, L]
    values = table.to_numpy(dtype=np.float64)  # [parameters, L]
    positive = values > 0
    logs = np.log10(np.where(positive, values, 1.0))  # [parameters, L]
    finite = logs[positive]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    decades = [float(k) for k in range(math.ceil(low), math.floor(high) + 1) if low < k < high]
    n_params, n_blocks = values.shape
    panel = matrix_panel(
        logs.astype(np.float32),
        positive,
        Ramp(VIRIDIS, low, high if high > low else low + 1.0),
        name="act_grad",
        x_labels=[str(int(c)) for c in table.columns],
        y_labels=list(table.index),
        x_title="block",
        y_title="parameter",
        value_title="log₁₀ norm",
        value_digits=2,
        extra={"gradient norm": (values.astype(np.float32), None)},
        title=f"Gradient norm of each weight matrix and bias ({stack} stack)",
        subtitle="colour: log₁₀ of the norm (-2 is 0.01), so that small and large norms both show",
        text_digits=None,
        masked_text="no gradient reaches it (norm 0)",
        plot_px=(min(LINE_WIDTH, max(240, 60 * n_blocks)), 24 * n_params),
        label_chars=40,  # e.g. multihead_attn.out_proj.weight, whole
        legend_marks=decades if 0 < len(decades) <= 6 else None,
    )
    return board([panel])

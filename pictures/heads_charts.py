"""Charts of the "What heads do" page for what removing heads changed in the attention: how much each layer's weights
moved (a Plotly bar chart) and one head's after − before map (a matrix-view panel, and its Plotly twin for the HTML
download). No Streamlit here."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.ablation import Head, head_name, head_names
from explorer.trace import AttentionMaps
from pictures.attention_panels import token_hover_names, token_labels
from pictures.boards import matrix_panel
from pictures.compare_charts import A_COLOUR, B_COLOUR, DIFFERENCE_TEXT_PX, difference_scale
from pictures.style import (
    HOVER_NUMBERS,
    MASKED_PLOT,
    TICK_PX,
    Ramp,
    axis,
    block_axis,
    figure_layout,
    label_text,
    masked_map_axes,
    noted,
    plotly_scale,
)

CHANGE = "after − before"  # what the difference map holds, as its notes name it
CHANGED_COLOUR = "#1f5fa8"
REMOVED_COLOUR = "#c2410c"
DIFFERENCE_PX = 320  # px along the longer side of the after − before map, at most
MAX_LAYER_TICKS = 16
CLICK_PX = 22  # px a side of the transparent square a click on a board cell lands on (rows are 26 px)


def change_title(removed: Sequence[Head]) -> str:
    return f"How much each layer's attention changed with {head_names(removed)} removed"


def attention_change_figure(changes: np.ndarray, removed: Sequence[Head]) -> go.Figure:
    """[L] mean |after − before| of each layer's weights as bars; the layers holding a removed head are marked."""
    layers = list(range(len(changes)))
    holding = {layer for layer, _ in removed}
    colours = [REMOVED_COLOUR if layer in holding else CHANGED_COLOUR for layer in layers]
    names = {layer: head_names(h for h in removed if h[0] == layer) for layer in layers}
    figure = go.Figure(
        go.Bar(
            x=layers,
            y=np.asarray(changes, dtype=np.float64),
            marker={"color": colours},
            customdata=[f"<br>removed here: {names[layer]}" if names[layer] else "" for layer in layers],
            hovertemplate=f"layer %{{x}}<br>mean |Δ weight| %{{y:{HOVER_NUMBERS}}}%{{customdata}}<extra></extra>",
        )
    )
    subtitle = (
        "mean |after − before| of the attention weights over each layer's heads and the cells they may attend to · "
        "orange: a layer with a removed head"
    )
    figure.update_layout(figure_layout(change_title(removed), subtitle, 240, bargap=0.2))
    figure.update_xaxes(block_axis("layer", layers, MAX_LAYER_TICKS))
    figure.update_yaxes(axis("mean |Δ weight|", rangemode="tozero"))
    return figure


def difference_title(layer: int, head: int) -> str:
    return f"After − before · layer {layer} · head {head}"


def head_change(
    before: AttentionMaps, after: AttentionMaps, layer: int, head: int, stretch: bool
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray, float, str | None]:
    """One head's weights before and after ([Tq, Tk] float64 each), after − before ([Tq, Tk]) and its colour scale:
    the half-width, ending at the largest |after − before| of the cells it may attend to or `stretch`ed at the top
    1 % of them (difference_scale, as Compare's A − B), and what the subtitle says of it."""
    sides = (before.weights[layer, head].astype(np.float64), after.weights[layer, head].astype(np.float64))
    difference = sides[1] - sides[0]  # [Tq, Tk]
    half, note = difference_scale(np.where(before.allowed, difference, np.nan), stretch, CHANGE)
    return sides, difference, half, note


def after_before_panel(
    before: AttentionMaps, after: AttentionMaps, layer: int, head: int, stretch: bool = False
) -> dict:
    """after − before of one head's weights ([Tq, Tk]) on a diverging scale centred on 0 (head_change): blue, it
    attends more with the heads removed; orange-red, less. Hover gives the difference, before and after."""
    sides, difference, half, note = head_change(before, after, layer, head, stretch)
    allowed = np.asarray(before.allowed, dtype=bool)  # [Tq, Tk]
    largest = float(np.abs(difference[allowed]).max()) if allowed.any() else 0.0
    subtitle = "identical: every difference is 0" if largest == 0 else f"largest |after − before| = {largest:.4f}"
    subtitle = noted(f"{subtitle} · blue: attends more with the heads removed · red: less", note)
    return matrix_panel(
        difference,
        allowed,
        Ramp((B_COLOUR, "#ffffff", A_COLOUR), -half, half),
        name="heads_difference",
        x_labels=token_labels(before.key_labels),
        y_labels=token_labels(before.query_labels),
        hover_names=token_hover_names(before),
        x_title="key",
        y_title="query",
        value_title="after − before",
        title=difference_title(layer, head),
        subtitle=subtitle,
        max_px=DIFFERENCE_PX,
        tick_px=TICK_PX,
        text_px=DIFFERENCE_TEXT_PX,
        masked_text="masked: may not attend",
        extra={"before": sides[0], "after": sides[1]},
    )


def after_before_figure(
    before: AttentionMaps, after: AttentionMaps, layer: int, head: int, stretch: bool = False
) -> go.Figure:
    """after_before_panel as a Plotly heatmap, for the HTML download (its colours too)."""
    _, difference, top, note = head_change(before, after, layer, head, stretch)
    difference = np.where(before.allowed, difference, np.nan)  # [Tq, Tk]: masked grey (MASKED_PLOT), as on the page
    x = [label_text(t) for t in token_labels(before.key_labels)]
    y = [label_text(t) for t in token_labels(before.query_labels)]
    figure = go.Figure(
        go.Heatmap(
            z=difference,
            x=x,
            y=y,
            zmin=-top,
            zmax=top,
            colorscale=plotly_scale((B_COLOUR, "#ffffff", A_COLOUR)),
            colorbar={"title": {"text": "after − before"}},
            hovertemplate="query %{y}<br>key %{x}<br>after − before %{z:.4f}<extra></extra>",
        )
    )
    side = min(620, 60 + 28 * len(y))
    figure.update_layout(
        figure_layout(
            difference_title(layer, head),
            noted("blue: attends more with the heads removed · red: less", note),
            side,
            **MASKED_PLOT,
        )
    )
    figure.update_yaxes(title="query")
    figure.update_xaxes(title="key")
    return masked_map_axes(figure)


def clickable_board(figure: go.Figure, values: np.ndarray, value_title: str) -> go.Figure:
    """A layers × heads board of pictures.output_charts with a transparent square on each cell: Plotly sends a click
    on a heatmap cell nowhere, but a click on a marker as a selection (Streamlit's on_select), whose customdata names
    the head ("L2H3"). The squares hover as the cells do."""
    values = np.asarray(values, dtype=np.float64)  # [L, H]
    layers, heads = np.indices(values.shape)
    figure.add_trace(
        go.Scatter(
            x=[f"H{h}" for h in heads.ravel()],
            y=[f"L{layer}" for layer in layers.ravel()],
            mode="markers",
            marker={"symbol": "square", "size": CLICK_PX, "opacity": 0},
            customdata=[head_name((int(lay), int(h))) for lay, h in zip(layers.ravel(), heads.ravel(), strict=True)],
            text=[f"{v:{HOVER_NUMBERS}}" for v in values.ravel()],
            hovertemplate=f"%{{customdata}}<br>{value_title} %{{text}}<br>click: remove or put back<extra></extra>",
            showlegend=False,
            name="click a head",
        )
    )
    n_layers, n_heads = values.shape
    figure.update_xaxes(autorange=False, range=[-0.5, n_heads - 0.5])  # the heatmap's frame: markers add no padding
    figure.update_yaxes(autorange=False, range=[n_layers - 0.5, -0.5])  # layer 0 on top, as the board draws it
    return figure

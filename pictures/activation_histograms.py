"""Figures of the activations page that count values: the histogram of the values at one point and the share of
feed-forward hidden units that are exactly 0, block by block. Tables in, Plotly figures out (no Streamlit here)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer.config_words import count
from explorer.numbers import percent
from pictures.style import CATEGORY10, axis, figure_layout

BAR_COLOUR = "#4c78a8"
BIN_EDGES = ".4~g"  # a bin's edges in its hover label: 4 significant digits, no trailing zeros ("0", not "0.000")
ZERO_COLOUR = CATEGORY10[3]  # the red dotted line at 0 of the histogram
ZERO_LINE_POINTS = 81  # points along that line: one within 2 px of anywhere on it, so all of it hovers
ZERO_LINE_HOVER_PX = 5  # the line answers hover this close (Plotly's hoverdistance); further, the bar under it does


def histogram_figure(bins: pd.DataFrame, what: str, values_summary: str, log_count: bool = False) -> go.Figure:
    """A histogram from value_histogram's bins (on a log count axis, the empty bins left out and a bin of 1 value
    still a bar), with the values that are exactly 0 called out by a red dotted line at 0."""
    zeros = int(bins["exact_zeros"].iloc[0])
    shown = bins[bins["count"] > 0] if log_count else bins
    left, right = shown["left"].to_numpy(dtype=np.float64), shown["right"].to_numpy(dtype=np.float64)  # [bins]
    count = shown["count"].to_numpy(dtype=np.int64)  # [bins]
    holds_zero = (left <= 0) & ((right > 0) | (right == bins["right"].iloc[-1]))  # the last bin holds its right edge
    figure = go.Figure(
        go.Bar(
            x=(left + right) / 2,
            y=count,
            width=right - left,
            name="values",
            marker={"color": BAR_COLOUR, "line": {"width": 0}},
            customdata=np.stack([left, right], axis=-1),  # [bins, 2]
            text=[f"<br>of which exactly 0: {zeros:,}" if zeros and z else "" for z in holds_zero],
            textposition="none",
            hovertemplate=f"from %{{customdata[0]:{BIN_EDGES}}} to %{{customdata[1]:{BIN_EDGES}}}<br>"
            "values: %{y:,}%{text}<extra></extra>",
            showlegend=False,
        )
    )
    if zeros:  # a line over the plot's full height (an axis of its own, 0 to 1): its close points hover all along it
        figure.add_trace(
            go.Scatter(
                x=np.zeros(ZERO_LINE_POINTS),
                y=np.linspace(0.0, 1.0, ZERO_LINE_POINTS),
                yaxis="y2",
                name="exactly 0",
                mode="lines",
                line={"color": ZERO_COLOUR, "dash": "dot", "width": 2},
                hovertemplate=f"values exactly 0: {zeros:,}<extra></extra>",
                showlegend=False,
            )
        )
        figure.add_annotation(
            x=0.0,
            y=1.0,
            yref="y2",
            text=f"{zeros:,} exactly 0",
            showarrow=False,
            xanchor="left",
            yanchor="top",
            xshift=4,
            font={"color": ZERO_COLOUR},
            bgcolor="rgba(255, 255, 255, 0.8)",
        )
    top = float(count.max()) if count.size else 1.0  # room above the highest bar for the label of the zeros
    y = (
        axis("count (log scale)", type="log", range=[math.log10(0.7), math.log10(top * 3)])  # a count of 1 shows
        if log_count
        else axis("count", range=[0.0, top * 1.15])
    )
    low, high = float(bins["left"].iloc[0]), float(bins["right"].iloc[-1])
    pad = (high - low) * 0.02  # the line at 0 clear of the frame when 0 is the smallest value (ReLU)
    figure.update_layout(
        figure_layout(f"Distribution of values: {what}", values_summary, 300),
        xaxis=axis("activation value", range=[low - pad, high + pad]),
        yaxis=y,
        yaxis2={"overlaying": "y", "range": [0, 1], "visible": False, "fixedrange": True},
        bargap=0,
        hoverdistance=ZERO_LINE_HOVER_PX,
    )
    return figure


ZERO_NOTES = {  # why a feed-forward's hidden units are, or are not, exactly 0, by the config's activation name
    "relu": "ReLU sets every negative pre-activation to exactly 0; about half for random weights",
    # Measured: MiniLM's blocks 0-5 hold 0.18 %, 0.34 %, 0.23 %, 0.15 %, 0.02 % and 0 % exact zeros, inputs -5.6 to -17
    # x·Φ(x) at −5.5 is −1.0e-7, far above float32's smallest number, so not an underflow: erf(x/√2) is within
    # float32's half-step (3e-8) of −1 there and rounds to −1, making Φ(x) = (1 + erf) / 2 exactly 0
    "gelu": "GELU is exactly 0 at 0 and, in float32, below about −5.5, where erf(x/√2) rounds to −1 and so "
    "x·Φ(x) to 0: a fraction of a percent at most",
    "swiglu": "SwiGLU: silu(gate(x)) * linear1(x) is exactly 0 only where a factor is, so this stays near 0%",
}
ZERO_NOTES["silu"] = ZERO_NOTES["swiglu"]  # a Llama checkpoint's files name the same gated unit "silu"
UPRIGHT_LABEL_BARS = 12  # more bars than this: each label stands upright, "0.34%" being wider than its bar at 1024 px


def zero_fraction_figure(zeros: pd.DataFrame, stack: str, activation: str) -> go.Figure:
    """Share of feed-forward hidden units that are exactly 0, per layer: one bar per block, its percentage on top
    (upright beside the bar when more than UPRIGHT_LABEL_BARS bars would crowd it, and none when every block has no
    zero, which the subtitle says instead: SmolLM2's 30 blocks of "0.0%" ran into each other)."""
    note = ZERO_NOTES.get(activation, f"{activation} is exactly 0 only where its input is")
    share = zeros["zero_fraction"].to_numpy(dtype=np.float64)  # [L]
    none = not share.any()
    if none:
        note += f"; here no unit is exactly 0 in any of the {count(len(share), 'block')}"
    figure = go.Figure(
        go.Bar(
            x=zeros["layer"].to_numpy(dtype=np.int32),
            y=share,
            name="exactly 0",
            marker_color=BAR_COLOUR,
            text=None if none else [percent(s) for s in share],  # 0.34 %, not "0%" over a bar hover calls 0.34 %
            textposition="outside",
            textangle=-90 if len(share) > UPRIGHT_LABEL_BARS else 0,
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

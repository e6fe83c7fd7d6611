"""Plotly figures of the activations page: statistics over depth, LayerNorm in vs out, per-token norms,
histograms, ReLU zeros, per-head grids and gradient norms. Tables in, go.Figure out (no Streamlit here)."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from explorer.figures import token_labels

COLOURS = qualitative.D3
FONT = dict(size=13)
POINT_COLOURS = {  # one colour per point, whichever points a stack has
    "residual": COLOURS[0],
    "attention output": COLOURS[1],
    "cross-attention output": COLOURS[4],
    "FFN hidden": COLOURS[2],
    "FFN output": COLOURS[3],
}
STAT_TITLES = {"mean": "mean", "std": "standard deviation", "rms": "RMS", "max_abs": "max |x|"}
MAX_CELL_TEXT = 16 * 24  # write the value in each heatmap cell up to this many cells
MAX_TEXT_HEADS = 6  # a per-head grid (a third of the page wide) writes its values up to this many heads


def _auto_margins(fig: go.Figure) -> go.Figure:
    """Let every axis make room for its tick labels and title (Plotly's default clips them)."""
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig


def _title(text: str, subtitle: str = "") -> dict:
    body = html.escape(text) + (f"<br><sup>{html.escape(subtitle)}</sup>" if subtitle else "")
    return dict(text=body, x=0.0, xanchor="left")


def _layer_axis(fig: go.Figure, n_layers: int, with_input: bool, **where) -> None:
    """x = block index; -1 is labelled 'input' (embedding + position)."""
    values = list(range(-1 if with_input else 0, n_layers))
    every = max(1, len(values) // 13 + 1) if len(values) > 14 else 1
    shown = values[::every]
    fig.update_xaxes(
        tickmode="array",
        tickvals=shown,
        ticktext=["input" if v == -1 else str(v) for v in shown],
        showgrid=True,
        gridcolor="#eee",
        zeroline=False,
        **where,
    )


def depth_figure(stats: pd.DataFrame, stack: str) -> go.Figure:
    """Mean, std, RMS and max |x| over depth (2 x 2), one line per point: the residual stream (after each block,
    and the input) and each sub-layer's output before it is added to the stream."""
    points = [p for p in stats["point"].unique() if "LayerNorm" not in p]
    n_layers = int(stats["layer"].max()) + 1
    fig = make_subplots(
        rows=2,
        cols=2,
        subplot_titles=[STAT_TITLES[s] for s in STAT_TITLES],
        vertical_spacing=0.16,
        horizontal_spacing=0.08,
    )
    for i, point in enumerate(points):
        rows = stats[stats["point"] == point].sort_values("layer")
        for j, stat in enumerate(STAT_TITLES):
            fig.add_trace(
                go.Scatter(
                    x=rows["layer"],
                    y=rows[stat],
                    mode="lines+markers",
                    marker=dict(size=6),
                    line=dict(
                        color=POINT_COLOURS.get(point, COLOURS[i % len(COLOURS)]), width=3 if point == "residual" else 2
                    ),
                    name=point,
                    legendgroup=point,
                    showlegend=j == 0,
                    hovertemplate=f"{point}<br>block %{{x}}<br>{STAT_TITLES[stat]} %{{y:.4g}}<extra></extra>",
                ),
                row=j // 2 + 1,
                col=j % 2 + 1,
            )
    for j in range(4):
        _layer_axis(fig, n_layers, True, row=j // 2 + 1, col=j % 2 + 1)
        fig.update_yaxes(showgrid=True, gridcolor="#eee", zerolinecolor="#bbb", row=j // 2 + 1, col=j % 2 + 1)
    fig.update_xaxes(title_text="block", row=2)
    fig.update_layout(
        title=_title(
            f"Activation statistics over depth ({stack} stack)",
            "residual: the stream after each block (input = embedding + position); sub-layer outputs: what each "
            "sub-layer adds, before the residual sum; over all tokens and units",
        ),
        height=640,
        margin=dict(l=10, r=10, t=90, b=10),
        plot_bgcolor="white",
        font=FONT,
        legend=dict(title=dict(text="point"), font=dict(size=12)),
    )
    fig.update_annotations(font=dict(size=13))
    return _auto_margins(fig)


def layernorm_figure(stats: pd.DataFrame, stack: str, norm: str) -> go.Figure:
    """Each LayerNorm's input against its output over depth: RMS and max |x|."""
    rows = stats[stats["point"].str.contains("LayerNorm")]
    n_layers = int(stats["layer"].max()) + 1
    sublayers = list(dict.fromkeys(p.rsplit(" LayerNorm", 1)[0] for p in rows["point"]))
    names = {"attn": "self-attention", "cross": "cross-attention", "ffn": "feed-forward"}
    fig = make_subplots(rows=1, cols=2, subplot_titles=("RMS", "max |x|"), horizontal_spacing=0.08)
    for i, sub in enumerate(sublayers):
        for side, dash in (("in", "solid"), ("out", "dash")):
            point = f"{sub} LayerNorm {side}"
            part = rows[rows["point"] == point].sort_values("layer")
            label = f"{names.get(sub, sub)} LayerNorm {'input' if side == 'in' else 'output'}"
            for col, stat in enumerate(("rms", "max_abs"), start=1):
                fig.add_trace(
                    go.Scatter(
                        x=part["layer"],
                        y=part[stat],
                        mode="lines+markers",
                        marker=dict(size=6, symbol="circle" if side == "in" else "diamond"),
                        line=dict(color=COLOURS[i % len(COLOURS)], dash=dash),
                        name=label,
                        legendgroup=label,
                        showlegend=col == 1,
                        hovertemplate=f"{label}<br>block %{{x}}<br>{STAT_TITLES[stat]} %{{y:.4g}}<extra></extra>",
                    ),
                    row=1,
                    col=col,
                )
    for col in (1, 2):
        _layer_axis(fig, n_layers, False, row=1, col=col)
        fig.update_yaxes(showgrid=True, gridcolor="#eee", zerolinecolor="#bbb", rangemode="tozero", row=1, col=col)
    fig.update_xaxes(title_text="block")
    where = "x + sublayer(x), the sum it normalises" if norm == "post" else "the residual stream x itself"
    fig.update_layout(
        title=_title(
            f"What each LayerNorm receives and returns ({stack} stack, {norm}-norm)",
            f"input (solid): {where}; output (dashed): what it returns, RMS ≈ 1 while its gain is 1 (untrained)",
        ),
        height=430,
        margin=dict(l=10, r=10, t=90, b=10),
        plot_bgcolor="white",
        font=FONT,
        legend=dict(font=dict(size=12)),
    )
    fig.update_annotations(font=dict(size=13))
    return _auto_margins(fig)


def token_norm_heatmap(norms: np.ndarray, tokens: list[str], stack: str) -> go.Figure:
    """[L + 1, T] L2 norm of each token's residual vector: input on top, then after each block."""
    n_rows, n_tokens = norms.shape
    y = ["input"] + [f"after block {i}" for i in range(n_rows - 1)]
    x = token_labels(tokens)
    trace = go.Heatmap(
        z=norms.astype(np.float32),
        x=x,
        y=y,
        colorscale="Viridis",
        colorbar=dict(title=dict(text="‖x‖₂")),
        hovertemplate="token %{x}<br>%{y}<br>norm %{z:.4g}<extra></extra>",
        xgap=1 if n_tokens <= 60 else 0,
        ygap=1,
    )
    if norms.size <= MAX_CELL_TEXT:
        trace.update(texttemplate="%{z:.1f}", textfont=dict(size=11))
    fig = go.Figure(trace)
    fig.update_layout(
        title=_title(
            f"Norm of each token's residual vector, layer by layer ({stack} stack)",
            "L2 norm over d_model; a repeated word has the same input row",
        ),
        height=int(min(700, max(300, 150 + 28 * n_rows))),
        margin=dict(l=10, r=10, t=80, b=10),
        font=FONT,
    )
    fig.update_xaxes(title_text="token", type="category", tickangle=-45 if n_tokens > 12 else 0, automargin=True)
    fig.update_yaxes(title_text="layer", type="category", autorange="reversed", automargin=True)
    return _auto_margins(fig)


def histogram_figure(bins: pd.DataFrame, what: str, values_summary: str, log_count: bool = False) -> go.Figure:
    """A histogram from value_histogram's bins, with the exact zeros called out."""
    centre = (bins["left"] + bins["right"]) / 2
    fig = go.Figure(
        go.Bar(
            x=centre,
            y=bins["count"],
            width=bins["right"] - bins["left"],
            customdata=np.stack([bins["left"], bins["right"]], axis=-1),
            marker=dict(color="#4c78a8", line=dict(width=0)),
            name="values",
            hovertemplate="from %{customdata[0]:.4g} to %{customdata[1]:.4g}<br>%{y:,} values<extra></extra>",
        )
    )
    zeros = int(bins["exact_zeros"].iloc[0])
    if zeros:
        fig.add_vline(x=0.0, line=dict(color="#d62728", dash="dot"))
    fig.update_layout(
        title=_title(f"Distribution of values: {what}", values_summary),
        height=400,
        bargap=0,
        margin=dict(l=10, r=10, t=80, b=10),
        plot_bgcolor="white",
        font=FONT,
        showlegend=False,
    )
    fig.update_xaxes(title_text="activation value", showgrid=True, gridcolor="#eee")
    fig.update_yaxes(
        title_text="count (log scale)" if log_count else "count",
        type="log" if log_count else "linear",
        showgrid=True,
        gridcolor="#eee",
    )
    return _auto_margins(fig)


def zero_fraction_figure(zeros: pd.DataFrame, stack: str, activation: str) -> go.Figure:
    """Share of feed-forward hidden units that are exactly 0, per layer."""
    fig = go.Figure(
        go.Bar(
            x=zeros["layer"],
            y=zeros["zero_fraction"],
            marker=dict(color="#4c78a8"),
            texttemplate="%{y:.0%}",
            textposition="outside",
            name="exactly zero",
            hovertemplate="block %{x}<br>%{y:.2%} of hidden units exactly 0<extra></extra>",
        )
    )
    note = (
        "ReLU sets every negative pre-activation to exactly 0; about half for random weights"
        if activation == "relu"
        else "GELU is exactly 0 only at 0 itself, so this stays at 0%"
    )
    fig.update_layout(
        title=_title(f"Feed-forward hidden units that are exactly 0 ({stack} stack, {activation})", note),
        height=340,
        margin=dict(l=10, r=10, t=80, b=10),
        plot_bgcolor="white",
        font=FONT,
    )
    _layer_axis(fig, len(zeros), False)
    fig.update_xaxes(title_text="block")
    fig.update_yaxes(title_text="share of units × tokens", range=[0, 1.12], tickformat=".0%", gridcolor="#eee")
    return _auto_margins(fig)


def head_grid_figure(
    grid: np.ndarray,
    title: str,
    subtitle: str,
    colour_title: str,
    zmin: float,
    zmax: float,
    value_format: str = ".2f",
    colorscale: str = "Viridis",
) -> go.Figure:
    """A [layer, head] grid of one per-head statistic, the value written in each cell."""
    n_layers, n_heads = grid.shape
    fig = go.Figure(
        go.Heatmap(
            z=grid.astype(np.float32),
            x=[f"H{h}" for h in range(n_heads)],
            y=[f"L{layer}" for layer in range(n_layers)],
            zmin=zmin,
            zmax=zmax if zmax > zmin else zmin + 1.0,
            colorscale=colorscale,
            colorbar=dict(title=dict(text=colour_title)),
            texttemplate=f"%{{z:{value_format}}}" if n_heads <= MAX_TEXT_HEADS and n_layers <= 16 else None,
            hovertemplate=f"layer %{{y}} head %{{x}}<br>{colour_title} %{{z:{value_format}}}<extra></extra>",
            xgap=1,
            ygap=1,
        )
    )
    fig.update_layout(
        title=_title(title, subtitle),
        height=int(min(600, max(240, 130 + 36 * n_layers))),
        margin=dict(l=10, r=10, t=80, b=10),
        font=FONT,
    )
    fig.update_xaxes(title_text="head", type="category", side="bottom")
    fig.update_yaxes(title_text="layer", type="category", autorange="reversed")
    return _auto_margins(fig)


def gradient_totals_figure(totals: pd.DataFrame, norm: str) -> go.Figure:
    """L2 norm of all of a block's parameter gradients, per block, one line per stack (log scale)."""
    fig = go.Figure()
    for i, (stack, part) in enumerate(totals.groupby("stack", sort=False)):
        fig.add_trace(
            go.Scatter(
                x=part["layer"].astype(int),
                y=part["norm"],
                mode="lines+markers",
                marker=dict(size=7),
                line=dict(color=COLOURS[i % len(COLOURS)], width=3),
                name=f"{stack} blocks",
                hovertemplate=f"{stack} block %{{x}}<br>gradient norm %{{y:.4g}}<extra></extra>",
            )
        )
    fig.update_layout(
        title=_title(
            f"Gradient norm of each block's parameters ({norm}-norm)",
            "L2 norm of the gradients of all of the block's weights and biases together, for the objective stated "
            "above",
        ),
        height=400,
        margin=dict(l=10, r=10, t=80, b=10),
        plot_bgcolor="white",
        font=FONT,
        legend=dict(orientation="h", x=1.0, xanchor="right", y=1.02, yanchor="bottom"),
    )
    _layer_axis(fig, int(totals["layer"].max()) + 1, False)
    fig.update_xaxes(title_text="block")
    fig.update_yaxes(title_text="gradient norm (log scale)", type="log", gridcolor="#eee")
    return _auto_margins(fig)


def gradient_heatmap(norms: pd.DataFrame, stack: str) -> go.Figure:
    """[parameter, block] gradient norm of each weight matrix and bias of one stack, coloured on a log scale."""
    part = norms[(norms["stack"] == stack) & norms["layer"].notna()]
    table = part.pivot_table(index="parameter", columns="layer", values="norm", sort=False)  # [parameters, L]
    values = table.to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore"):
        logs = np.where(values > 0, np.log10(np.where(values > 0, values, 1.0)), np.nan)
    finite = logs[np.isfinite(logs)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    ticks = [np.log10(m * 10.0**e) for e in range(int(np.floor(low)), int(np.ceil(high)) + 1) for m in (1, 2, 5)]
    ticks = [t for t in ticks if low - 1e-9 <= t <= high + 1e-9] or [low, high]
    fig = go.Figure(
        go.Heatmap(
            z=logs.astype(np.float32),
            x=[str(int(c)) for c in table.columns],
            y=list(table.index),
            customdata=values.astype(np.float32),
            zmin=low,
            zmax=high if high > low else low + 1.0,
            colorscale="Viridis",
            colorbar=dict(title=dict(text="norm"), tickvals=ticks, ticktext=[f"{10**t:.3g}" for t in ticks]),
            hovertemplate="%{y}<br>block %{x}<br>gradient norm %{customdata:.4g}<extra></extra>",
            xgap=1,
            ygap=1,
        )
    )
    fig.update_layout(
        title=_title(
            f"Gradient norm of each weight matrix and bias ({stack} stack)",
            "colour on a log scale, so that small and large norms both show; hover for the value",
        ),
        height=int(max(320, 120 + 24 * len(table.index))),
        margin=dict(l=10, r=10, t=80, b=10),
        font=FONT,
    )
    fig.update_xaxes(title_text="block", type="category")
    fig.update_yaxes(title_text="parameter", type="category", autorange="reversed", automargin=True)
    return _auto_margins(fig)

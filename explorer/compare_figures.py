"""Plotly builders for the Compare page: A and B on one colour scale, A - B on a diverging scale, and per-layer
statistics of A and B on the same axes (no Streamlit here)."""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.compare import PER_LAYER
from explorer.figures import COLOURSCALE, MASKED_COLOUR, MASKED_NAME, token_labels
from explorer.trace import AttentionMaps

A_COLOUR = "#1f5fa8"  # A is blue everywhere: its lines, and A - B > 0 (A attends more)
B_COLOUR = "#c2410c"  # B is orange-red: its lines, and A - B < 0 (B attends more)
DIFFERENCE_SCALE = [[0.0, B_COLOUR], [0.5, "#ffffff"], [1.0, A_COLOUR]]  # centred on 0 by zmid
MAX_CELL_TEXT_SIDE = 8  # write the value in each cell while a map is at most this many tokens a side
MAX_X_TICKS = 12  # token labels across a map (the maps are narrow); above this only every n-th is labelled
MAX_Y_TICKS = 24  # token labels down a map
MAP_HEIGHT = 420  # px; cells are kept square (scaleanchor), so a map is as wide as this allows
ROUNDING = 1e-5  # |A - B| below this is float32 rounding (e.g. the same words in another order, no positions)
STATISTIC_TITLES = {
    "residual RMS": "Residual stream RMS",
    "residual std": "Residual stream std",
    "gradient norm": "Gradient norm of each block",
    "attention entropy": "Self-attention entropy (nats, mean of heads)",
}


def _ticks(labels: list[str], most: int) -> list[str]:
    every = math.ceil(len(labels) / most)
    return labels[::every]


def _masked(allowed: np.ndarray) -> np.ndarray:
    """[Tq, Tk] float32: 1 where masked, NaN (drawn as nothing) where allowed."""
    return np.where(allowed, np.nan, 1.0).astype(np.float32)


def _grey(z: np.ndarray, x: list[str], y: list[str], hover: str) -> go.Heatmap:
    return go.Heatmap(
        z=z,
        x=x,
        y=y,
        zmin=0.0,
        zmax=1.0,
        colorscale=[[0.0, MASKED_COLOUR], [1.0, MASKED_COLOUR]],
        showscale=False,
        hovertemplate=hover,
        name=MASKED_NAME,
    )


def _gap(tq: int, tk: int) -> int:
    return 1 if max(tq, tk) <= 40 else 0


def side_title(name: str, maps: AttentionMaps | None, layer: int, head: int, missing: str | None) -> str:
    """E.g. "A · layer 0 · head 1", or what the side lacks."""
    if maps is None or missing:
        return f"{name}: {missing or 'no such attention'}"
    return f"{name} · layer {layer} · head {head}"


def pair_heatmaps(
    maps_a: AttentionMaps | None,
    maps_b: AttentionMaps | None,
    layer: int,
    head: int,
    *,
    names: tuple[str, str] = ("A", "B"),
    missing: tuple[str | None, str | None] = (None, None),
) -> go.Figure:
    """A's and B's map of one layer and head side by side on ONE colour scale (0 to 1, one colour bar).

    A side is left empty, with its title saying why, when its maps are None or `missing` names what it lacks
    (e.g. "B has no layer 3"). Grey cells are masked (weight exactly 0)."""
    sides = []
    for maps, name, why in zip((maps_a, maps_b), names, missing, strict=True):
        usable = maps is not None and why is None and layer < maps.n_layers and head < maps.n_heads
        sides.append((maps if usable else None, name, why))
    titles = [html.escape(side_title(name, maps, layer, head, why)) for maps, name, why in sides]
    same_queries = all(m is not None for m, _, _ in sides) and sides[0][0].query_tokens == sides[1][0].query_tokens
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.04 if same_queries else 0.12)
    for col, (maps, name, _) in enumerate(sides, start=1):
        if maps is None:
            fig.update_xaxes(visible=False, row=1, col=col)
            fig.update_yaxes(visible=False, row=1, col=col)
            continue
        weights = np.asarray(maps.weights[layer, head], dtype=np.float32)  # [Tq, Tk]
        allowed = np.asarray(maps.allowed, dtype=bool)  # [Tq, Tk]
        x, y = token_labels(maps.key_tokens), token_labels(maps.query_tokens)
        tq, tk = weights.shape
        gap = _gap(tq, tk)
        trace = go.Heatmap(
            z=np.where(allowed, weights, np.nan).astype(np.float32),
            x=x,
            y=y,
            coloraxis="coloraxis",
            hovertemplate=f"{name}<br>query %{{y}}<br>key %{{x}}<br>weight %{{z:.4f}}<extra></extra>",
            name=name,
            xgap=gap,
            ygap=gap,
        )
        if max(tq, tk) <= MAX_CELL_TEXT_SIDE:
            trace.update(texttemplate="%{z:.2f}", textfont=dict(size=10))
        fig.add_trace(trace, row=1, col=col)
        if not allowed.all():
            hover = f"{name}<br>query %{{y}}<br>key %{{x}}<br>masked: weight 0<extra></extra>"
            fig.add_trace(_grey(_masked(allowed), x, y, hover), row=1, col=col)
        cross = maps.kind == "cross-attention"
        fig.update_xaxes(
            title_text="key (source)" if cross else "key",
            type="category",
            tickmode="array",
            tickvals=_ticks(x, MAX_X_TICKS),
            tickangle=-45 if tk > 8 else 0,
            automargin=True,
            row=1,
            col=col,
        )
        shared_labels = same_queries and col == 2  # B's rows are A's queries: A's labels serve both
        fig.update_yaxes(
            title_text=None if shared_labels else ("query (target)" if cross else "query"),
            showticklabels=not shared_labels,
            ticks="" if shared_labels else "outside",
            type="category",
            autorange="reversed",
            tickmode="array",
            tickvals=_ticks(y, MAX_Y_TICKS),
            automargin=True,
            scaleanchor="x" if col == 1 else "x2",  # square cells
            constrain="domain",
            constraintoward="top",  # the map right under its title
            row=1,
            col=col,
        )
        fig.update_xaxes(constrain="domain", row=1, col=col)
    fig.update_layout(
        coloraxis=dict(cmin=0.0, cmax=1.0, colorscale=COLOURSCALE, colorbar=dict(title=dict(text="weight"), len=0.9)),
        height=MAP_HEIGHT,
        margin=dict(l=10, r=10, t=60, b=10),
        plot_bgcolor="white",
        showlegend=False,
    )
    return fig


def difference_range(difference: np.ndarray) -> float:
    """Half-width of the symmetric colour range: the largest |A - B| drawn (1 when every difference is 0)."""
    finite = np.abs(difference[np.isfinite(difference)])
    largest = float(finite.max()) if finite.size else 0.0
    return largest if largest > 0 else 1.0


def difference_heatmap(
    maps_a: AttentionMaps,
    maps_b: AttentionMaps,
    difference: np.ndarray,
    layer: int,
    head: int,
) -> go.Figure:
    """A - B of one layer and head ([Tq, Tk], from attention_difference) on a diverging scale centred on 0,
    with its own colour bar titled "A − B". Blue: A attends more; orange-red: B attends more; white: equal.
    Cells masked in both are grey; a cell masked in one only is drawn, since its weight went to or from 0."""
    allowed_a, allowed_b = np.asarray(maps_a.allowed, bool), np.asarray(maps_b.allowed, bool)  # [Tq, Tk]
    either = allowed_a | allowed_b
    z = np.where(either, difference, np.nan).astype(np.float32)  # [Tq, Tk]
    weights = np.stack([maps_a.weights[layer, head], maps_b.weights[layer, head]], axis=-1)  # [Tq, Tk, 2]
    x, y = token_labels(maps_a.key_tokens), token_labels(maps_a.query_tokens)
    tq, tk = z.shape
    largest = float(np.abs(z[np.isfinite(z)]).max()) if np.isfinite(z).any() else 0.0
    half = difference_range(z)
    gap = _gap(tq, tk)
    main = go.Heatmap(
        z=z,
        x=x,
        y=y,
        zmin=-half,
        zmax=half,
        zmid=0.0,
        colorscale=DIFFERENCE_SCALE,
        customdata=weights,
        colorbar=dict(title=dict(text="A − B"), len=0.9),
        hovertemplate="query %{y}<br>key %{x}<br>A %{customdata[0]:.4f}<br>B %{customdata[1]:.4f}"
        "<br>A − B %{z:.4f}<extra></extra>",
        name="A − B",
        xgap=gap,
        ygap=gap,
    )
    if max(tq, tk) <= MAX_CELL_TEXT_SIDE:
        main.update(texttemplate="%{z:.2f}", textfont=dict(size=10))
    fig = go.Figure(main)
    if not either.all():
        fig.add_trace(_grey(_masked(either), x, y, "query %{y}<br>key %{x}<br>masked in A and B<extra></extra>"))
    if largest == 0:
        verdict = "identical: every difference is exactly 0"
    elif largest < ROUNDING:
        verdict = f"largest |A − B| = {largest:.1e}: float32 rounding, A and B agree"
    else:
        verdict = f"largest |A − B| = {largest:.4f}"
    note = f"{verdict}<br>blue: A attends more · red: B attends more"
    title = f"A − B · layer {layer} · head {head}<br><span style='font-size:12px'>{note}</span>"
    fig.update_layout(
        title=dict(text=title, x=0.0, xanchor="left", font=dict(size=16)),
        height=MAP_HEIGHT,
        margin=dict(l=10, r=10, t=90, b=10),
        plot_bgcolor="white",
    )
    cross = maps_a.kind == "cross-attention"
    fig.update_xaxes(
        title_text="key (source)" if cross else "key",
        type="category",
        tickmode="array",
        tickvals=_ticks(x, MAX_X_TICKS),
        tickangle=-45 if tk > 8 else 0,
        automargin=True,
    )
    fig.update_yaxes(
        title_text="query (target)" if cross else "query",
        type="category",
        autorange="reversed",
        tickmode="array",
        tickvals=_ticks(y, MAX_Y_TICKS),
        automargin=True,
        scaleanchor="x",  # square cells
        constrain="domain",
        constraintoward="top",
    )
    fig.update_xaxes(constrain="domain")
    return fig


def ranking_heatmap(ranking: pd.DataFrame, layer: int | None = None, head: int | None = None) -> go.Figure:
    """Jensen-Shannon divergence (bits) per [layer, head] from head_ranking; the shown head is outlined."""
    n_layers, n_heads = int(ranking["layer"].max()) + 1, int(ranking["head"].max()) + 1
    z = np.full((n_layers, n_heads), np.nan, dtype=np.float32)  # [L, H]
    z[ranking["layer"].to_numpy(), ranking["head"].to_numpy()] = ranking["js_divergence"].to_numpy()
    top = float(np.nanmax(z)) if np.isfinite(z).any() and np.nanmax(z) > 0 else 1.0
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[f"H{h}" for h in range(n_heads)],
            y=[f"L{i}" for i in range(n_layers)],
            zmin=0.0,
            zmax=top,
            colorscale="Oranges",
            colorbar=dict(title=dict(text="bits")),
            hovertemplate="layer %{y} head %{x}<br>JS divergence %{z:.4f} bits<extra></extra>",
            xgap=1,
            ygap=1,
            texttemplate="%{z:.3f}" if n_layers * n_heads <= 64 else None,
        )
    )
    if layer is not None and head is not None and layer < n_layers and head < n_heads:
        fig.add_shape(
            type="rect",
            x0=head - 0.5,
            x1=head + 0.5,
            y0=layer - 0.5,
            y1=layer + 0.5,
            line=dict(color="black", width=2),
        )
    fig.update_layout(
        title=dict(text="How much each head changed (JS divergence, bits)", x=0.0, xanchor="left", font=dict(size=14)),
        height=int(min(520, max(220, 110 + 28 * n_layers))),
        margin=dict(l=10, r=10, t=50, b=10),
    )
    fig.update_xaxes(title_text="head", side="bottom", type="category", automargin=True)
    fig.update_yaxes(title_text="layer", type="category", autorange="reversed", automargin=True)
    return fig


def layer_lines(table: pd.DataFrame, names: tuple[str, str] = ("A", "B")) -> go.Figure:
    """A 2 x 2 grid, one panel per statistic of per_layer_comparison, A and B as two lines on the same axes.
    Layer -1 is the input (embedding + position); layers only one model has are shaded."""
    fig = make_subplots(
        rows=2,
        cols=2,
        subplot_titles=[STATISTIC_TITLES[s] for s in PER_LAYER],
        horizontal_spacing=0.1,
        vertical_spacing=0.2,
    )
    for i, statistic in enumerate(PER_LAYER):
        row, col = i // 2 + 1, i % 2 + 1
        rows = table[table["statistic"] == statistic].sort_values("layer")
        for column, name, colour, dash in (("a", names[0], A_COLOUR, "solid"), ("b", names[1], B_COLOUR, "dash")):
            shown = rows[rows[column].notna()]
            fig.add_trace(
                go.Scatter(
                    x=shown["layer"].to_numpy(),
                    y=shown[column].to_numpy(dtype=np.float64),
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=i == 0,
                    line=dict(color=colour, dash=dash, width=2),
                    marker=dict(size=7, symbol="circle" if column == "a" else "diamond"),
                    hovertemplate=f"{name}<br>layer %{{x}}<br>{statistic} %{{y:.4g}}<extra></extra>",
                ),
                row=row,
                col=col,
            )
        only_one = rows[rows["a"].isna() != rows["b"].isna()]["layer"]
        if len(only_one) and rows["b"].notna().any():
            fig.add_vrect(
                x0=float(only_one.min()) - 0.5,
                x1=float(only_one.max()) + 0.5,
                fillcolor="#eeeeee",
                line_width=0,
                layer="below",
                row=row,
                col=col,
            )
        layers = sorted(int(v) for v in rows["layer"].unique())
        ticks = layers if len(layers) <= 13 else layers[:: math.ceil(len(layers) / 13)]
        fig.update_xaxes(
            tickmode="array",
            tickvals=ticks,
            ticktext=["input" if v == -1 else str(v) for v in ticks],
            title_text="after block" if statistic.startswith("residual") else "block",
            row=row,
            col=col,
        )
    fig.update_layout(
        height=660,
        margin=dict(l=10, r=10, t=60, b=20),
        legend=dict(orientation="h", x=1.0, xanchor="right", y=1.08, yanchor="bottom"),
        plot_bgcolor="white",
    )
    fig.update_xaxes(showgrid=True, gridcolor="#eeeeee", zeroline=False, automargin=True)
    fig.update_yaxes(showgrid=True, gridcolor="#eeeeee", zeroline=False, rangemode="tozero", automargin=True)
    return fig

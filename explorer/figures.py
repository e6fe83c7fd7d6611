"""Plotly figure builders: attention maps and statistics in, go.Figure out (no Streamlit here)."""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer.stats import attention_matrix
from explorer.trace import AttentionMaps

COLOURSCALE = "Blues"  # weight 0 = near white, 1 = dark blue; grey is reserved for masked cells
MASKED_COLOUR = "#9a9a9a"
MASKED_NAME = "masked (may not attend)"
EMPTY_ROW_MARK = "⊘ "
MAX_CELL_TEXT = 16 * 16  # write the weight in each cell up to this many cells
MAX_GAPPED_SIDE = 40  # draw 1 px borders between cells up to this many tokens a side
MAX_Y_TICKS = 45  # query labels that fit down the heatmap; above this only every n-th is labelled
GRID_MAX_CELLS = 400_000  # all layers x heads x Tq x Tk; above this the grid is too heavy for a browser
PICK_MAX_SIDE = 16  # clickable points per map side: every cell of maps up to this size, a lattice above it
PICK_MAX_POINTS = 5_000  # clickable points in the whole grid (SVG markers are slow in the browser)


def token_labels(tokens: list[str]) -> list[str]:
    """HTML-escaped, unique labels for a category axis: a repeated token gets its position, e.g. "the·4"."""
    labels: list[str] = []
    seen: set[str] = set()
    for i, token in enumerate(tokens):
        label = html.escape(str(token)) or f"·{i}"
        while label in seen:
            label = f"{label}·{i}"
        seen.add(label)
        labels.append(label)
    return labels


def _masked_layer(allowed: np.ndarray) -> np.ndarray:
    """[Tq, Tk] float32: 1 where masked, NaN (drawn as nothing) where allowed."""
    return np.where(allowed, np.nan, 1.0).astype(np.float32)


def _shown_weights(weights: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """[Tq, Tk] float32 weights with masked cells set to NaN, so they are not drawn as a weight of 0."""
    return np.where(allowed, weights, np.nan).astype(np.float32)


def map_title(maps: AttentionMaps, layer: int, head: int | None) -> str:
    """E.g. "self-attention · layer 0 · head 1" or "... · average of 4 heads"."""
    which = f"head {head}" if head is not None else f"average of {maps.n_heads} heads (not a real head)"
    return f"{maps.kind} · layer {layer} · {which}"


def attention_heatmap(maps: AttentionMaps, layer: int, head: int | None) -> go.Figure:
    """One attention map: keys across (x), queries down (y, first on top); grey = masked; ⊘ = no allowed key."""
    weights = attention_matrix(maps, layer, head)  # [Tq, Tk]
    allowed = np.asarray(maps.allowed, dtype=bool)  # [Tq, Tk]
    empty = maps.empty_rows  # [Tq]
    x = token_labels(maps.key_tokens)
    y = token_labels(maps.query_tokens)
    what = "mean weight" if head is None else "weight"
    tq, tk = weights.shape
    gap = 1 if max(tq, tk) <= MAX_GAPPED_SIDE else 0  # cell borders only while cells are big enough to spare them
    main = go.Heatmap(
        z=_shown_weights(weights, allowed),
        x=x,
        y=y,
        zmin=0.0,
        zmax=1.0,
        colorscale=COLOURSCALE,
        colorbar=dict(title=dict(text=what), len=0.9),
        hovertemplate=f"query %{{y}}<br>key %{{x}}<br>{what} %{{z:.4f}}<extra></extra>",
        name=what,
        xgap=gap,
        ygap=gap,
    )
    if weights.size <= MAX_CELL_TEXT:
        main.update(texttemplate="%{z:.2f}", textfont=dict(size=11))
    fig = go.Figure(main)
    n_masked = int((~allowed).sum())
    if n_masked:
        fig.add_trace(
            go.Heatmap(
                z=_masked_layer(allowed),
                x=x,
                y=y,
                zmin=0.0,
                zmax=1.0,
                colorscale=[[0.0, MASKED_COLOUR], [1.0, MASKED_COLOUR]],
                showscale=False,
                hovertemplate="query %{y}<br>key %{x}<br>masked: may not attend (weight 0)<extra></extra>",
                name=MASKED_NAME,
                xgap=gap,
                ygap=gap,
            )
        )
        fig.add_trace(_legend_swatch())
    notes = []
    if n_masked:
        notes.append(f"grey = masked ({n_masked} of {allowed.size} cells)")
    if empty.any():
        notes.append(f"{EMPTY_ROW_MARK.strip()} = query with no allowed key: its row is all zeros")
    title = html.escape(map_title(maps, layer, head))
    if notes:
        title += "<br><sup>" + " · ".join(notes) + "</sup>"
    y_text = [EMPTY_ROW_MARK + label if e else label for label, e in zip(y, empty, strict=True)]
    every = math.ceil(tq / MAX_Y_TICKS)  # label every query while they fit, else every n-th
    fig.update_layout(
        title=dict(text=title, x=0.0, xanchor="left"),
        height=int(min(900, max(360, 170 + 30 * tq))),
        margin=dict(l=10, r=10, t=80, b=10),
        plot_bgcolor="white",
        legend=dict(orientation="h", x=1.0, xanchor="right", y=1.02, yanchor="bottom"),
    )
    cross = maps.kind == "cross-attention"
    fig.update_xaxes(
        title_text="key (source)" if cross else "key",
        type="category",
        side="bottom",
        tickangle=-45 if tk > 12 else 0,
        automargin=True,
    )
    fig.update_yaxes(
        title_text="query (target)" if cross else "query",
        type="category",
        automargin=True,
        autorange="reversed",
        tickmode="array",
        tickvals=y[::every],
        ticktext=y_text[::every],
    )
    return fig


def _legend_swatch() -> go.Scatter:
    """An invisible point whose legend entry explains the grey cells."""
    return go.Scatter(
        x=[None],
        y=[None],
        mode="markers",
        marker=dict(symbol="square", size=14, color=MASKED_COLOUR),
        name=MASKED_NAME,
        showlegend=True,
        hoverinfo="skip",
    )


def grid_cells(maps: AttentionMaps) -> int:
    """How many cells attention_grid would draw (layers x heads x queries x keys)."""
    return int(np.prod(maps.weights.shape))


def _grid_geometry(n_layers: int, n_heads: int, tq: int, tk: int) -> dict[str, int]:
    """Where each map sits in the mosaic: block pitch in rows and columns, including the blank gap."""
    return {
        "n_layers": n_layers,
        "n_heads": n_heads,
        "row_pitch": tq + max(1, math.ceil(0.2 * tq)),  # the gap above each block holds its "L0 H1" title
        "col_pitch": tk + max(1, math.ceil(0.08 * tk)),
        "tq": tq,
        "tk": tk,
    }


def attention_grid(maps: AttentionMaps) -> go.Figure:
    """Every layer (rows) x head (columns) as a small map titled "L0 H1"; click a map to pick it.

    Drawn as one mosaic (three traces, however many heads) so that 12 x 12 heads stay fast in the browser:
    the weights with NaN for masked cells and gaps, a grey layer for masked cells, and invisible markers that
    make a click selectable (Plotly heatmaps are not): one per cell for small maps, whose hover shows the cell,
    or an even lattice for larger ones, whose hover names only the map. picked_map turns a click into a map.
    """
    n_layers, n_heads, tq, tk = maps.weights.shape  # [L, H, Tq, Tk]
    allowed = np.asarray(maps.allowed, dtype=bool)  # [Tq, Tk]
    geo = _grid_geometry(n_layers, n_heads, tq, tk)
    rp, cp = geo["row_pitch"], geo["col_pitch"]
    height, width = n_layers * rp, n_heads * cp
    z = np.full((height, width), np.nan, dtype=np.float32)  # [L * row_pitch, H * col_pitch]
    grey = np.full((height, width), np.nan, dtype=np.float32)
    top = rp - tq  # rows of gap above each block
    for layer in range(n_layers):
        for head in range(n_heads):
            rows = slice(layer * rp + top, layer * rp + top + tq)
            cols = slice(head * cp, head * cp + tk)
            z[rows, cols] = _shown_weights(maps.weights[layer, head], allowed)  # [Tq, Tk]
            grey[rows, cols] = _masked_layer(allowed)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            zmin=0.0,
            zmax=1.0,
            colorscale=COLOURSCALE,
            colorbar=dict(title=dict(text="weight"), len=min(1.0, max(0.4, 300 / (60 + 110 * n_layers)))),
            hoverinfo="skip",
            name="weights",
        )
    )
    if not allowed.all():
        fig.add_trace(
            go.Heatmap(
                z=grey,
                zmin=0.0,
                zmax=1.0,
                colorscale=[[0.0, MASKED_COLOUR], [1.0, MASKED_COLOUR]],
                showscale=False,
                hoverinfo="skip",
                name=MASKED_NAME,
            )
        )
    fig.add_trace(_pick_points(maps, geo))
    for layer in range(n_layers):
        for head in range(n_heads):
            fig.add_annotation(
                x=head * cp + (tk - 1) / 2,
                y=layer * rp + top - 0.5,
                text=f"L{layer} H{head}",
                showarrow=False,
                yanchor="bottom",
                font=dict(size=11),
            )
    row_px = int(min(220, max(85, 900 / n_heads)))
    fig.update_layout(
        height=40 + row_px * n_layers,
        margin=dict(l=10, r=10, t=30, b=10),
        plot_bgcolor="white",
        clickmode="event+select",
        hovermode="closest",
        hoverdistance=30,
        showlegend=False,
        meta={"grid": geo},
    )
    axis = dict(showticklabels=False, ticks="", showgrid=False, zeroline=False, fixedrange=True)
    fig.update_xaxes(range=[-0.5, width - 0.5], **axis)
    fig.update_yaxes(range=[height - 0.5, -0.5], **axis)
    if not allowed.all():
        fig.update_layout(title=dict(text="grey = masked", x=1.0, xanchor="right", font=dict(size=12)))
    return fig


def _pick_points(maps: AttentionMaps, geo: dict[str, int]) -> go.Scatter:
    """Invisible, clickable markers: every cell of small maps (hover shows it), a lattice on larger ones."""
    n_layers, n_heads, tq, tk = maps.weights.shape  # [L, H, Tq, Tk]
    per_side = int(min(PICK_MAX_SIDE, max(2, math.isqrt(PICK_MAX_POINTS // (n_layers * n_heads)))))
    every_cell = tq <= per_side and tk <= per_side
    qi = np.unique(np.linspace(0, tq - 1, min(tq, per_side)).round().astype(int))  # [Pq] query indices
    ki = np.unique(np.linspace(0, tk - 1, min(tk, per_side)).round().astype(int))  # [Pk] key indices
    layer, head, q, k = (a.ravel() for a in np.meshgrid(np.arange(n_layers), np.arange(n_heads), qi, ki, indexing="ij"))
    x = head * geo["col_pitch"] + k  # [P]
    y = layer * geo["row_pitch"] + (geo["row_pitch"] - tq) + q  # [P]
    name = [f"L{a} H{b}" for a, b in zip(layer.tolist(), head.tolist(), strict=True)]
    if every_cell:
        qt, kt = token_labels(maps.query_tokens), token_labels(maps.key_tokens)
        allowed = maps.allowed[q, k]  # [P]
        weight = maps.weights[layer, head, q, k]  # [P]
        text = [
            f"{n}<br>query {qt[a]}<br>key {kt[b]}<br>" + (f"weight {w:.4f}" if ok else "masked")
            for n, a, b, w, ok in zip(name, q.tolist(), k.tolist(), weight.tolist(), allowed.tolist(), strict=True)
        ]
    else:
        text = name
    return go.Scatter(
        x=x,
        y=y,
        mode="markers",
        marker=dict(size=6, opacity=0.0, color="black"),
        text=text,
        hovertemplate="%{text}<extra>click to show large</extra>",
        name="pick",
        showlegend=False,
    )


def picked_map(fig: go.Figure, point: dict) -> tuple[int, int] | None:
    """(layer, head) of the grid map a selected point (a dict with x and y, as Streamlit reports it) is in."""
    geo = (fig.layout.meta or {}).get("grid") if isinstance(fig.layout.meta, dict) else None
    if geo is None or point.get("x") is None or point.get("y") is None:
        return None
    layer = int(float(point["y"]) // geo["row_pitch"])
    head = int(float(point["x"]) // geo["col_pitch"])
    if 0 <= layer < geo["n_layers"] and 0 <= head < geo["n_heads"]:
        return layer, head
    return None


def entropy_heatmap(df: pd.DataFrame) -> go.Figure:
    """Mean attention entropy per head as a [layer, head] heatmap, coloured from 0 (one-hot) to uniform."""
    n_layers = int(df["layer"].max()) + 1
    n_heads = int(df["head"].max()) + 1
    ent = np.full((n_layers, n_heads), np.nan, dtype=np.float32)  # [L, H]
    peak = np.full((n_layers, n_heads), np.nan, dtype=np.float32)  # [L, H]
    ent[df["layer"], df["head"]] = df["entropy"]
    peak[df["layer"], df["head"]] = df["peakedness"]
    max_entropy = float(df["max_entropy"].iloc[0])
    top = max_entropy if np.isfinite(max_entropy) and max_entropy > 0 else 1.0
    fig = go.Figure(
        go.Heatmap(
            z=ent,
            x=[f"H{h}" for h in range(n_heads)],
            y=[f"L{layer}" for layer in range(n_layers)],
            zmin=0.0,
            zmax=top,
            colorscale="Viridis",
            customdata=peak,
            texttemplate="%{z:.2f}",
            hovertemplate="layer %{y} head %{x}<br>entropy %{z:.4f} nats<br>peakedness %{customdata:.2f}"
            "<extra></extra>",
            colorbar=dict(title=dict(text="nats")),
            xgap=1,
            ygap=1,
        )
    )
    fig.update_layout(
        title=dict(
            text="Mean attention entropy per head (nats)<br><sup>"
            f"0 = each query looks at one key; {max_entropy:.2f} = uniform over the allowed keys</sup>",
            x=0.0,
            xanchor="left",
        ),
        height=int(min(600, max(220, 120 + 40 * n_layers))),
        margin=dict(l=10, r=10, t=70, b=10),
    )
    fig.update_xaxes(title_text="head", type="category", side="bottom", automargin=True)
    fig.update_yaxes(title_text="layer", type="category", autorange="reversed", automargin=True)
    return fig

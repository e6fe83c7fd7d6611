"""Plotly figures of the positional page: encodings, wavelengths, similarities, rotary angles, offset scores and
the permutation demonstration. Arrays in, go.Figure out (no Streamlit here)."""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from explorer.figures import token_labels
from explorer.position_analysis import OffsetScores, PermutationDemo

MAX_SIDE = 512  # rows or columns drawn in one heatmap; longer axes show every n-th (said in the title)
TYPED_COLOUR = "#d62728"
DIVERGING = "RdBu_r"  # negative blue, 0 white, positive red
FONT = dict(size=13)
PALETTE = qualitative.D3


def every_nth(n: int, limit: int = MAX_SIDE) -> np.ndarray:
    """Indices 0, s, 2s ... below n with s = ceil(n / limit): at most `limit` of them, evenly spread."""
    return np.arange(0, n, max(1, math.ceil(n / limit)))


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th ... 11th, 12th, 13th ... 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _shown_note(shown: np.ndarray, n: int, what: str) -> str:
    """ " · every 8th position drawn (512 of 4,096)" when an axis was thinned, else ""."""
    if len(shown) == n:
        return ""
    step = int(shown[1] - shown[0]) if len(shown) > 1 else n
    return f" · every {ordinal(step)} {what} drawn ({len(shown)} of {n:,})"


def _layout(fig: go.Figure, title: str, height: int, subtitle: str = "") -> go.Figure:
    lines = [f"<sup>{html.escape(line)}</sup>" for line in subtitle.split("\n") if line]  # one <sup> per line
    text = "<br>".join([html.escape(title), *lines])
    fig.update_layout(
        title=dict(text=text, x=0.0, xanchor="left"),
        height=height,
        margin=dict(l=10, r=10, t=60 + 18 * len(lines), b=10),
        plot_bgcolor="white",
        font=FONT,
    )
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig


def _typed_tokens_hint(tokens: list[str], n_positions: int) -> str:
    shown = min(len(tokens), n_positions)
    if shown == len(tokens):
        return f"red: the {len(tokens)} typed tokens' positions 0–{len(tokens) - 1}"
    return f"red: the typed tokens' positions 0–{shown - 1} ({len(tokens) - shown} typed tokens lie beyond)"


def pair_name(dim: int, kind: str) -> str:
    """'dim 6 (sin of pair 3)' for the sinusoidal table, 'dim 6' for a learned one."""
    if kind != "sinusoidal":
        return f"dim {dim}"
    return f"dim {dim} ({'sin' if dim % 2 == 0 else 'cos'} of pair {dim // 2})"


def encoding_curves(table: np.ndarray, dims: list[int], tokens: list[str], kind: str) -> go.Figure:
    """Encoding value against position, one line per chosen dimension; the typed tokens' positions are marked."""
    n_positions = table.shape[0]  # table: [P, D]
    typed = min(len(tokens), n_positions)
    labels = [html.escape(t) for t in tokens[:typed]]
    fig = go.Figure()
    positions = np.arange(n_positions)
    for dim in dims:
        name = pair_name(dim, kind)
        group = dim // 2 if kind == "sinusoidal" else dim  # a sine and its cosine share a colour
        colour = PALETTE[sorted({d // 2 if kind == "sinusoidal" else d for d in dims}).index(group) % len(PALETTE)]
        fig.add_trace(
            go.Scatter(
                x=positions,
                y=table[:, dim].astype(np.float32),
                mode="lines",
                line=dict(color=colour, dash="dot" if kind == "sinusoidal" and dim % 2 else "solid", width=2),
                name=name,
                legendgroup=name,
                hovertemplate=f"{name}<br>position %{{x}}<br>value %{{y:.4f}}<extra></extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=positions[:typed],
                y=table[:typed, dim].astype(np.float32),
                mode="markers",
                marker=dict(color=TYPED_COLOUR, size=7, line=dict(color="white", width=1)),
                name=f"{name}, typed tokens",
                legendgroup=name,
                showlegend=False,
                customdata=labels,
                hovertemplate=f"{name}<br>position %{{x}}: token %{{customdata}}<br>value %{{y:.4f}}<extra></extra>",
            )
        )
    if typed:
        fig.add_vrect(x0=-0.5, x1=typed - 0.5, fillcolor=TYPED_COLOUR, opacity=0.07, line_width=0)
    what = "Sinusoidal encoding" if kind == "sinusoidal" else "Learned position embedding (untrained)"
    _layout(fig, f"{what}: value against position", 430, _typed_tokens_hint(tokens, n_positions))
    fig.update_xaxes(title_text="position", showgrid=True, gridcolor="#eee", zeroline=False)
    fig.update_yaxes(title_text="value added to that dimension", showgrid=True, gridcolor="#eee", zerolinecolor="#bbb")
    fig.update_layout(legend=dict(title=dict(text="dimension"), font=dict(size=12)), hovermode="closest")
    return fig


def encoding_heatmap(table: np.ndarray, tokens: list[str], kind: str) -> go.Figure:
    """The whole [position, dimension] table: positions down, dimensions across; typed positions outlined."""
    n_positions, d_model = table.shape  # [P, D]
    rows, cols = every_nth(n_positions), every_nth(d_model)
    z = table[np.ix_(rows, cols)].astype(np.float32)  # [P', D']
    top = 1.0 if kind == "sinusoidal" else float(max(np.abs(z).max(), 1e-6))
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=cols,
            y=rows,
            zmin=-top,
            zmax=top,
            colorscale=DIVERGING,
            colorbar=dict(title=dict(text="value")),
            hovertemplate="position %{y}<br>dimension %{x}<br>value %{z:.4f}<extra></extra>",
        )
    )
    typed = min(len(tokens), n_positions)
    if typed:
        fig.add_shape(
            type="rect",
            x0=-0.5,
            x1=d_model - 0.5,
            y0=-0.5,
            y1=typed - 0.5,
            line=dict(color=TYPED_COLOUR, width=2),
        )
    what = "Sinusoidal encoding" if kind == "sinusoidal" else "Learned position embedding (untrained, random init)"
    note = _shown_note(rows, n_positions, "position") + _shown_note(cols, d_model, "dimension")
    subtitle = "red outline: " + _typed_tokens_hint(tokens, n_positions).removeprefix("red: ") + note
    if kind == "sinusoidal":
        subtitle = "even dimensions sin, odd cos; slower waves further right · " + subtitle
    height = int(min(760, max(380, 200 + 4 * len(rows))))
    _layout(fig, f"{what}: the whole [position, dimension] matrix", height, subtitle)
    fig.update_xaxes(title_text="dimension", range=[-0.5, d_model - 0.5], showgrid=False, zeroline=False)
    fig.update_yaxes(title_text="position", autorange="reversed", showgrid=False, zeroline=False)
    return fig


def wavelength_figure(lengths: np.ndarray, width: int, n_positions: int, what: str = "d_model") -> go.Figure:
    """Period in positions of each sin/cos pair (log scale), with the max position drawn for scale."""
    pairs = np.arange(len(lengths))
    dims = [f"{2 * i}, {2 * i + 1}" if 2 * i + 1 < width else f"{2 * i}" for i in pairs]
    fig = go.Figure(
        go.Scatter(
            x=pairs,
            y=lengths,
            mode="lines+markers",
            marker=dict(size=5),
            customdata=dims,
            name="wavelength of the pair",
            hovertemplate="pair %{x} (dims %{customdata})<br>wavelength %{y:,.1f} positions<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[pairs[0], pairs[-1]],
            y=[n_positions, n_positions],
            mode="lines",
            line=dict(color="#555", dash="dash", width=1),
            name=f"max position shown ({n_positions:,})",
            hoverinfo="skip",
        )
    )
    fig.update_layout(legend=dict(x=0.99, xanchor="right", y=0.02, yanchor="bottom", bgcolor="rgba(255,255,255,0.85)"))
    subtitle = (
        f"pair i repeats every 2π·10000^(2i/{what}) positions: here from {lengths[0]:,.1f} (pair 0) up to "
        f"{lengths[-1]:,.0f} (pair {len(lengths) - 1})\n"
        "pairs above the dashed line do not complete one period within the positions shown"
    )
    _layout(fig, f"Wavelength of each pair ({what} = {width})", 420, subtitle)
    fig.update_xaxes(title_text="pair i (dimensions 2i and 2i+1)", showgrid=True, gridcolor="#eee")
    fig.update_yaxes(title_text="wavelength (positions, log scale)", type="log", showgrid=True, gridcolor="#eee")
    return fig


def similarity_heatmap(sim: np.ndarray, positions: np.ndarray, metric: str, n_tokens: int, kind: str) -> go.Figure:
    """[P', P'] similarity between the encodings of positions (the given, possibly thinned, position indices)."""
    n_all = int(positions[-1]) + 1 if len(positions) else 0
    if metric == "cosine":
        zmin, zmax, label = -1.0, 1.0, "cosine"
    else:
        top = float(max(np.abs(sim).max(), 1e-6))
        zmin, zmax, label = -top, top, "dot product"
    fig = go.Figure(
        go.Heatmap(
            z=sim.astype(np.float32),
            x=positions,
            y=positions,
            zmin=zmin,
            zmax=zmax,
            colorscale=DIVERGING,
            colorbar=dict(title=dict(text=label)),
            hovertemplate=f"position %{{y}} vs position %{{x}}<br>{label} %{{z:.4f}}<extra></extra>",
        )
    )
    typed = min(n_tokens, n_all)
    if typed:
        fig.add_shape(
            type="rect", x0=-0.5, x1=typed - 0.5, y0=-0.5, y1=typed - 0.5, line=dict(color=TYPED_COLOUR, width=2)
        )
    step = int(positions[1] - positions[0]) if len(positions) > 1 else 1
    note = f" · every {ordinal(step)} position drawn" if step > 1 else ""
    which = "sinusoidal encodings" if kind == "sinusoidal" else "learned (untrained) embeddings"
    subtitle = (
        "nearby positions look alike: a bright band along the diagonal"
        if kind == "sinusoidal"
        else "random untrained vectors: alike only with themselves (the diagonal)"
    )
    subtitle += f" · red square: the typed tokens' positions{note}"
    title = f"{'Cosine similarity' if metric == 'cosine' else 'Dot product'} between the {which} of two positions"
    _layout(fig, title, 620, subtitle)
    fig.update_xaxes(title_text="position", showgrid=False, zeroline=False, constrain="domain")
    fig.update_yaxes(
        title_text="position", autorange="reversed", showgrid=False, zeroline=False, scaleanchor="x", constrain="domain"
    )
    return fig


def similarity_profile(row: np.ndarray, reference: int, metric: str, which: str = "") -> go.Figure:
    """similarity_to(table, reference): how alike position `reference` is to every position 0..P-1."""
    positions = np.arange(len(row))
    fig = go.Figure(
        go.Scatter(
            x=positions,
            y=row.astype(np.float32),
            mode="lines+markers" if len(row) <= 80 else "lines",
            marker=dict(size=5),
            name=metric,
            hovertemplate=f"position %{{x}}<br>{metric} with position {reference}: %{{y:.4f}}<extra></extra>",
        )
    )
    fig.add_vline(x=reference, line=dict(color=TYPED_COLOUR, dash="dot"))
    what = "Cosine similarity" if metric == "cosine" else "Dot product"
    which = f" ({which})" if which else ""
    _layout(fig, f"{what} of position {reference}{which} with each position", 340)
    fig.update_xaxes(title_text="position", showgrid=True, gridcolor="#eee")
    fig.update_yaxes(title_text=metric, showgrid=True, gridcolor="#eee", zerolinecolor="#bbb")
    return fig


def rope_angle_heatmap(angles: np.ndarray, n_tokens: int) -> go.Figure:
    """[P, K/2] rotation angle of each pair at each position, wrapped to 0–360° on a cyclic colour scale."""
    n_positions, n_pairs = angles.shape
    rows = every_nth(n_positions)
    raw = angles[rows].astype(np.float64)  # [P', K/2] radians
    degrees = np.degrees(np.mod(raw, 2 * math.pi)).astype(np.float32)
    fig = go.Figure(
        go.Heatmap(
            z=degrees,
            x=np.arange(n_pairs),
            y=rows,
            zmin=0.0,
            zmax=360.0,
            colorscale="Twilight",
            customdata=raw.astype(np.float32),
            colorbar=dict(title=dict(text="angle (°)"), tickvals=[0, 90, 180, 270, 360]),
            hovertemplate="position %{y}<br>pair %{x}<br>angle %{customdata:.4f} rad = %{z:.1f}° after whole turns"
            "<extra></extra>",
        )
    )
    typed = min(n_tokens, n_positions)
    if typed:
        fig.add_shape(
            type="rect", x0=-0.5, x1=n_pairs - 0.5, y0=-0.5, y1=typed - 0.5, line=dict(color=TYPED_COLOUR, width=2)
        )
    subtitle = (
        "angle of pair i at position p = p / 10000^(2i/d_head), shown modulo 360°; pair 0 turns a full radian per "
        "position, the last pairs barely move · red outline: the typed tokens"
        + _shown_note(rows, n_positions, "position")
    )
    _layout(fig, "Rotary encoding: how far each pair of a query or key is turned", 520, subtitle)
    fig.update_xaxes(title_text="pair i (dimensions 2i and 2i+1 of each head)", showgrid=False, zeroline=False)
    fig.update_yaxes(title_text="position", autorange="reversed", showgrid=False, zeroline=False)
    return fig


def offset_scores_figure(result: OffsetScores, positional: str) -> go.Figure:
    """Left: the [query position, key position] scores of one head on a repeated token. Right: the score against
    the offset (query minus key position), with the range over each diagonal."""
    scores = np.where(np.isfinite(result.scores), result.scores, np.nan).astype(np.float32)  # [P, P]
    n = scores.shape[0]
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.45, 0.55],
        horizontal_spacing=0.12,
        subplot_titles=("score of query position vs key position", "score against offset (query − key)"),
    )
    fig.add_trace(
        go.Heatmap(
            z=scores,
            x=np.arange(n),
            y=np.arange(n),
            colorscale="Viridis",
            colorbar=dict(
                title=dict(text="score", side="right"),
                orientation="h",
                x=0.0,
                xanchor="left",
                y=-0.34,
                len=0.42,
                thickness=12,
            ),
            hovertemplate="query position %{y}<br>key position %{x}<br>score %{z:.4f}<extra></extra>",
            name="scores",
        ),
        row=1,
        col=1,
    )
    low, high = [], []
    for offset in result.offsets:
        diagonal = np.diagonal(scores, offset=-int(offset))
        finite = diagonal[np.isfinite(diagonal)]
        low.append(float(finite.min()) if finite.size else np.nan)
        high.append(float(finite.max()) if finite.size else np.nan)
    fig.add_trace(
        go.Scatter(
            x=result.offsets,
            y=high,
            mode="lines",
            line=dict(width=0),
            showlegend=False,
            hoverinfo="skip",
            name="highest",
        ),
        row=1,
        col=2,
    )
    fig.add_trace(
        go.Scatter(
            x=result.offsets,
            y=low,
            mode="lines",
            line=dict(width=0),
            fill="tonexty",
            fillcolor="rgba(214, 39, 40, 0.25)",
            name="range over the diagonal",
            hoverinfo="skip",
        ),
        row=1,
        col=2,
    )
    fig.add_trace(
        go.Scatter(
            x=result.offsets,
            y=result.by_offset.astype(np.float32),
            mode="lines+markers" if n <= 40 else "lines",
            marker=dict(size=4),
            line=dict(color="#1f77b4"),
            customdata=np.stack([low, high], axis=-1).astype(np.float32),
            name="mean score at this offset",
            hovertemplate="offset %{x}<br>mean score %{y:.4f}<br>lowest %{customdata[0]:.4f}, highest "
            "%{customdata[1]:.4f}<extra></extra>",
        ),
        row=1,
        col=2,
    )
    verdict = (
        "each diagonal is constant: the score depends on the offset only"
        if result.spread < 1e-4
        else "the diagonals vary: the score depends on where both tokens sit, not just the offset"
    )
    title = (
        f"{positional}: layer {result.layer}, head {result.head} scores when {result.token!r} fills all {n} positions"
    )
    _layout(fig, title, 540, f"{verdict} (largest spread along a diagonal: {result.spread:.2g})")
    fig.update_xaxes(title_text="key position", row=1, col=1, showgrid=False, zeroline=False)
    fig.update_yaxes(title_text="query position", autorange="reversed", row=1, col=1, showgrid=False, zeroline=False)
    fig.update_xaxes(title_text="offset: query position − key position", row=1, col=2, gridcolor="#eee")
    fig.update_yaxes(title_text="score q·k / √d_head", row=1, col=2, gridcolor="#eee", zerolinecolor="#bbb")
    fig.update_layout(
        legend=dict(orientation="h", x=1.0, xanchor="right", y=-0.3, font=dict(size=12)),
        margin=dict(b=40),
    )
    fig.update_annotations(font=dict(size=13))
    return fig


def permutation_figure(demo: PermutationDemo, layer: int, head: int) -> go.Figure:
    """Three maps of one head: on the typed tokens; the same map with rows and columns moved along with the
    reordered tokens; and the map of a run on the reordered tokens. The last two agree when order is invisible."""
    original = demo.attention[layer, head].astype(np.float32)  # [T, T]
    moved = demo.permuted_attention[layer, head].astype(np.float32)  # [T, T]
    rerun = demo.shuffled_attention[layer, head].astype(np.float32)  # [T, T]
    typed, shuffled = token_labels(demo.tokens), token_labels(demo.shuffled)
    difference = float(np.abs(moved - rerun).max())
    fig = make_subplots(
        rows=1,
        cols=3,
        horizontal_spacing=0.09,
        subplot_titles=(
            "① run on the typed tokens",
            "② map ① with rows and columns<br>moved along with the tokens",
            "③ run on the reordered tokens",
        ),
    )
    n = len(typed)
    small = n <= 10
    for col, (z, labels, what) in enumerate(
        ((original, typed, "typed order"), (moved, shuffled, "map ① reordered"), (rerun, shuffled, "reordered run")),
        start=1,
    ):
        trace = go.Heatmap(
            z=z,
            x=labels,
            y=labels,
            coloraxis="coloraxis",
            xgap=1 if n <= 40 else 0,
            ygap=1 if n <= 40 else 0,
            hovertemplate=f"{what}<br>query %{{y}}<br>key %{{x}}<br>weight %{{z:.4f}}<extra></extra>",
            name=what,
        )
        if small:
            trace.update(texttemplate="%{z:.2f}", textfont=dict(size=10))
        fig.add_trace(trace, row=1, col=col)
        fig.update_xaxes(title_text="key", type="category", tickangle=-45 if n > 6 else 0, row=1, col=col)
        fig.update_yaxes(type="category", autorange="reversed", row=1, col=col)
    fig.update_yaxes(title_text="query", row=1, col=1)
    same = "② and ③ agree" if difference < 1e-5 else "② and ③ differ"
    _layout(
        fig,
        f"Layer {layer}, head {head}: does reordering the tokens only move the map?",
        int(min(720, max(420, 230 + 28 * n))),
        f"{same}: largest |② − ③| in this head = {difference:.3g}",
    )
    fig.update_layout(
        coloraxis=dict(colorscale="Blues", cmin=0.0, cmax=1.0, colorbar=dict(title=dict(text="weight"))),
        margin=dict(t=110),
    )
    fig.update_annotations(font=dict(size=13))
    return fig

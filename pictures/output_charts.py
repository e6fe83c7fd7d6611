"""Figures of what the model's parts do to its output: every layer's guess (the logit lens grid), each head's share of
a prediction (the direct logit attribution board) and each head's effect on the sentence embedding when removed (the
ablation board). Plotly figures for the "What heads do" page and a notebook alike; no Streamlit here."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer.ablation import Head, head_name
from explorer.analysis.attribution import LogitAttribution
from explorer.heads_text import norm_route
from explorer.text_reading import DRAWN_BLANKS, quoted
from pictures.attention_panels import token_labels
from pictures.style import (
    BLUES,
    HOVER_NUMBERS,
    LEGEND_FIRST_ROW_PX,
    RDBU,
    SUBTITLE_CHARS,
    axis,
    decimals_for,
    figure_layout,
    label_text,
    legend_below,
    noted,
    plotly_scale,
)

LENS_TEXT_CELLS = 600  # the top piece is written in each cell up to this many cells (30 blocks x 20 positions)
# Plotly writes every cell of a heatmap at one font size, which it fits to the longest text as escaped ("&lt;0xF0&gt;"
# counts 12 characters): one cell's " <0xF0><0x9F><0x98>" made every cell of SmolLM2's lens 3 px. The lens writes its
# cells at LENS_TEXT_PX, each piece cut to what its column holds where the lens is narrowest, LENS_PLOT_PX (beside the
# sidebar on a 1024 px screen), at most LENS_CELL_CHARS; the hover has it whole.
LENS_CELL_CHARS = 8
LENS_TEXT_PX = 11
LENS_PLOT_PX = 380  # measured: SmolLM2's lens plot is 385 px wide beside the sidebar at 1024 px (480 overran cells)
LENS_CHAR_PX = 6.5  # the width of a character at LENS_TEXT_PX, a digit's or a wide letter's
BOARD_TEXT_CELLS = 144  # a board writes each head's value in its cell up to this many heads (12 x 12)
CELL_PX = 26  # px per row of a board or grid, so a 30-block model stays readable without scrolling past it
MIN_BOARD_ROWS = 3  # a 1- or 2-layer board still gets cells tall enough to read, hover and click
COLOUR_BAR_LABEL_PX = 40  # px of a board's height per label of its colour bar (under its title): Plotly's own count
# wrote four labels into a 2-layer board's 78 px, on top of each other
# Below a board's plot: figure_layout's bottom margin (the head axis) and legend_below's row, plus the 16 px that
# figure_layout keeps between the title and the plot. A board's height adds these to its rows.
BOARD_FRAME_PX = 56 + LEGEND_FIRST_ROW_PX + 16
HEAD_CELL_MAX_PX = 96  # px a board's cell is at most wide: a 1-head model's board had been one bar across the page
# Beside a board's cells: figure_layout's 64 + 24 px margins and the colour bar with its title ("effect on the logit")
BOARD_MARGINS_PX = 64 + 24
BOARD_SIDES_PX = BOARD_MARGINS_PX + 150
# The least a board is wide: its subtitle's lines of SUBTITLE_CHARS characters, about 5.6 px each at 13 px, uncut
BOARD_TEXT_PX = round(SUBTITLE_CHARS * 5.6) + 24
COLOUR_BAR_GAP = 0.02  # of the plot width between a board's cells and its colour bar: Plotly's own 1.02, from the cells
REMOVED_MARK = {"symbol": "x-thin", "size": 12, "line": {"width": 2, "color": "#31333f"}}
# A white cross under it: the dark cross alone was lost on the darkest red and blue cells of a board
REMOVED_HALO = {"symbol": "x-thin", "size": 13, "line": {"width": 6, "color": "#ffffff"}}


def _visible(text: str, piece: str) -> str:
    """A piece as a cell writes it: text of only blanks drawn as ␣ (any space), ↵ and ⇥, and text that is empty (a
    special piece) as the piece, so that no cell with a guess is blank."""
    text = str(text)
    if text.strip():
        return text
    if not text:
        return str(piece)
    return "".join(DRAWN_BLANKS.get(c, "␣") for c in text)


def _cell_text(text: str, most: int = LENS_CELL_CHARS) -> str:
    """`text` cut to `most` characters with an ellipsis, a byte name cut in two left out ("<0xF0>…", not
    "<0xF0><0…"; "…" when not even one fits). A text that must be cut loses its leading space first: in a 3-character
    column " the" had read " t…" (the hover keeps the piece whole, space and all)."""
    if len(text) <= most:
        return text
    text = text.lstrip(" ") or text
    if len(text) <= most:
        return text
    cut = text[: most - 1]
    if "<0x" in text and cut.rfind(">") < cut.rfind("<"):  # a byte name cut in two: keep the names before it
        cut = cut[: cut.rfind("<")]
    return cut + "…"


def lens_grid_figure(
    lens: pd.DataFrame, tokens: list[str], final_norm: bool = True, next_piece: bool = True
) -> go.Figure:
    """Blocks (up) x positions (across) of explorer.logit_lens: each cell names the top piece read out after that
    block at that position (cut to what its column holds), coloured by its probability (white 0 to dark blue 1); hover
    lists the k pieces of the cell, whole. `tokens`: the output stack's tokens as labelled (trace.last.labels).
    `final_norm`: whether the stack read out ends with a norm, which the lens applies (a post-norm stack has none);
    `next_piece`: whether a position's read-out guesses the next piece (a decoder) or its own output (an encoder)."""
    layers = sorted(set(lens["layer"].tolist()))
    positions = sorted(set(lens["position"].tolist()))
    labels = token_labels(tokens)
    probability = np.full((len(layers), len(positions)), np.nan)  # [L, P]
    text = np.full((len(layers), len(positions)), "", dtype=object)  # [L, P]
    hover = np.full((len(layers), len(positions)), "", dtype=object)  # [L, P]: every rank of the cell
    rows = lens["layer"].map({layer: i for i, layer in enumerate(layers)}).to_numpy()
    columns = lens["position"].map({position: j for j, position in enumerate(positions)}).to_numpy()
    most = max(2, min(LENS_CELL_CHARS, int(LENS_PLOT_PX / max(1, len(positions)) / LENS_CHAR_PX)))
    for rank in sorted(set(lens["rank"].tolist())):
        at = (lens["rank"] == rank).to_numpy()
        i, j = rows[at], columns[at]
        pieces = lens["text"][at].tolist()
        chances = lens["probability"][at].to_numpy()
        if rank == 1:
            spelled = lens["piece"][at].tolist()
            probability[i, j] = chances
            text[i, j] = [label_text(_cell_text(_visible(t, p), most)) for t, p in zip(pieces, spelled, strict=True)]
        lines = [f"{rank}. {label_text(quoted(t))} {p:.3f}" for t, p in zip(pieces, chances, strict=True)]
        hover[i, j] = np.where(hover[i, j] == "", lines, hover[i, j] + "<br>" + np.array(lines, dtype=object))
    x = [label_text(labels[p]) for p in positions]
    write = len(layers) * len(positions) <= LENS_TEXT_CELLS
    figure = go.Figure(
        go.Heatmap(
            z=probability,
            x=x,
            y=layers,
            text=text,
            texttemplate="%{text}" if write else None,
            textfont={"size": LENS_TEXT_PX},
            customdata=hover,
            zmin=0.0,
            zmax=1.0,
            colorscale=plotly_scale(BLUES),
            colorbar={"title": {"text": "probability"}},
            hovertemplate="after block %{y}, position %{x}<br>%{customdata}<extra></extra>",
            xgap=1,
            ygap=1,
        )
    )
    route = "final norm, then the read-out" if final_norm else "the read-out: this stack has no final norm"
    guess = "the top next piece" if next_piece else "each position's top output"
    subtitle = f"{guess} read out after each block ({route}) · colour: its probability"
    settled = _settled(lens, positions[-1]) if positions else None
    if settled is not None:
        piece, layer = settled
        subtitle += f" · at the last position {quoted(piece)} is the top guess from block {layer} on"
    subtitle = noted(subtitle, _positions_shown(positions, len(tokens)))
    figure.update_layout(figure_layout("Every layer's guess (logit lens)", subtitle, CELL_PX * len(layers) + 90))
    figure.update_xaxes(axis("position (token)"), type="category", tickangle=-45, showgrid=False)
    figure.update_yaxes(axis("after block", numbers="d"), showgrid=False, dtick=1 if len(layers) <= 32 else None)
    return figure


def _positions_shown(positions: list[int], n_tokens: int) -> str | None:
    """Which positions a lens of some of a text's positions shows, e.g. "the last 32 of 507 positions"; None for all."""
    if len(positions) == n_tokens:
        return None
    last = positions == list(range(n_tokens - len(positions), n_tokens))
    return f"{'the last ' if last else ''}{len(positions)} of {n_tokens} positions"


def _settled(lens: pd.DataFrame, position: int) -> tuple[str, int] | None:
    """(the last block's top piece at `position`, the first block from which it stays the top piece)."""
    column = lens[(lens["position"] == position) & (lens["rank"] == 1)].sort_values("layer")
    if column.empty:
        return None
    final = column["text"].iloc[-1]
    layers, texts = column["layer"].tolist(), column["text"].tolist()
    since = layers[-1]
    for layer, text in zip(reversed(layers), reversed(texts), strict=True):
        if text != final:
            break
        since = layer
    return final, since


def _head_board(
    values: np.ndarray,
    removed: Iterable[Head],
    zmin: float,
    zmax: float,
    colours: tuple[str, ...],
    name: str,
    numbers: str,
) -> go.Figure:
    """A layers (down) x heads (across) heatmap of [L, H] values, hover "L3H5 name value", each value written in its
    cell as `numbers` (d3-format) says while they fit; removed heads crossed."""
    values = np.asarray(values, dtype=np.float64)  # [L, H]
    L, H = values.shape
    x, y = [f"H{h}" for h in range(H)], [f"L{layer}" for layer in range(L)]
    names = np.array([[head_name((layer, h)) for h in range(H)] for layer in range(L)], dtype=object)  # [L, H]
    figure = go.Figure(
        go.Heatmap(
            z=values,
            x=x,
            y=y,
            customdata=names,
            zmin=zmin,
            zmax=zmax,
            colorscale=plotly_scale(colours),
            colorbar=_colour_bar(name, zmin, zmax, L),
            texttemplate=f"%{{z:{numbers}}}" if L * H <= BOARD_TEXT_CELLS else None,
            hovertemplate=f"%{{customdata}}<br>{name} %{{z:{HOVER_NUMBERS}}}<extra></extra>",
            xgap=1,
            ygap=1,
            name=name,
        )
    )
    gone = sorted(set(removed))
    if gone:
        x, y = [f"H{h}" for _, h in gone], [f"L{layer}" for layer, _ in gone]
        figure.add_trace(go.Scatter(x=x, y=y, mode="markers", marker=REMOVED_HALO, showlegend=False, hoverinfo="skip"))
        figure.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="markers",
                marker=REMOVED_MARK,
                name="removed head",
                customdata=[head_name(head) for head in gone],
                hovertemplate="%{customdata} removed<extra></extra>",
            )
        )
    cells = cells_fraction(H)
    if cells < 1:  # a notebook or the view's HTML file draws a figure as wide as its page unless told
        figure.update_layout(width=board_width(H))
    figure.update_xaxes(axis("head"), type="category", showgrid=False, domain=[0.0, cells])
    figure.update_yaxes(axis("layer"), type="category", autorange="reversed", showgrid=False)
    return figure.update_traces(colorbar_x=cells + COLOUR_BAR_GAP, selector={"type": "heatmap"})


def _colour_bar(name: str, zmin: float, zmax: float, n_layers: int) -> dict:
    """A board's colour bar: Plotly's round labels, as many as COLOUR_BAR_LABEL_PX allows; a short board's room for
    three or fewer got one round label ("0") and none at the top, so it is labelled at its ends (and 0) instead,
    each label hung below its tick: a label centred on the top end had run into the bar's title above it."""
    labels = _rows_px(n_layers) // COLOUR_BAR_LABEL_PX
    if labels > 3:
        return {"title": {"text": name}, "nticks": labels}
    ends = [zmin, 0.0, zmax] if zmin < 0 < zmax else [zmin, zmax]
    return {
        "title": {"text": name},
        "tickvals": ends,
        "ticktext": [f"{end:.3g}".replace("-", "−") for end in ends],
        "ticks": "outside",
        "ticklabelposition": "outside bottom",
    }


def cells_fraction(n_heads: int) -> float:
    """The share of a board's plot width its cells take: all of it (the colour bar beside the plot), unless the board
    is wider than HEAD_CELL_MAX_PX a head and the colour bar need (it is at least its subtitle wide), when the cells
    keep to the left at HEAD_CELL_MAX_PX a head and the colour bar follows them inside the plot."""
    cells = HEAD_CELL_MAX_PX * n_heads
    if board_width(n_heads) <= BOARD_SIDES_PX + cells:
        return 1.0
    return cells / (board_width(n_heads) - BOARD_MARGINS_PX)


def attribution_board_figure(attribution: LogitAttribution, removed: Iterable[Head] = ()) -> go.Figure:
    """Layers x heads of a direct logit attribution: red raises the piece's logit, blue lowers it, white 0 (the
    colours centred at 0, as wide as the largest head); the title says the piece and the logit, the subtitle what the
    heads, the feed-forward blocks and the embeddings add. `removed` heads are crossed."""
    heads = attribution.heads
    top = max(float(np.abs(heads).max()), 1e-9)
    figure = _head_board(heads, removed, -top, top, RDBU, "effect on the logit", ".2f")
    parts = [
        f"heads {heads.sum():+.2f}",
        f"feed-forward {attribution.feed_forward.sum():+.2f}",
        f"embeddings {attribution.embeddings:+.2f}",
    ]
    if attribution.rest != 0:  # a model without biases has none to add (the sentence leaves them out too)
        cross = " and cross-attention" if attribution.cross_attention is not None else ""
        parts.append(f"biases{cross} {attribution.rest:+.2f}")
    route = norm_route(attribution.placement, attribution.final_norm)
    subtitle = (
        f"logit {attribution.logit:.2f} = " + " ".join(parts) + " · each head's output at the last position through "
        f"{route}the piece's read-out row · red raises the logit, blue lowers it"
    )
    title = f"Which heads write {quoted(attribution.text)} (logit {attribution.logit:.2f})"
    return figure.update_layout(legend_below(figure_layout(title, subtitle, board_height(attribution.n_layers))))


def ablation_board_figure(effects: np.ndarray, removed: Iterable[Head] = ()) -> go.Figure:
    """Layers x heads of each head's effect on the sentence embedding when removed alone, 1 − cosine (white 0 = no
    change, dark blue = the largest effect); `removed` heads are crossed."""
    effects = np.asarray(effects, dtype=np.float64)  # [L, H]
    largest = float(np.nanmax(effects)) if np.isfinite(effects).any() else 0.0
    top = max(largest, 1e-9)
    figure = _head_board(effects, removed, 0.0, top, BLUES, "1 − cosine", cell_numbers(largest))
    most = f"largest {largest:.3g}" if largest > 0 else "every cell is 0: no head alone changes it"
    subtitle = (
        "each head removed alone: 1 − cosine between the sentence embedding (mean over the positions) with and "
        f"without it · 0 = no change · {most}"
    )
    title = "What each head does to the sentence embedding"
    return figure.update_layout(legend_below(figure_layout(title, subtitle, board_height(effects.shape[0]))))


def cell_numbers(top: float) -> str:
    """The format of a board's cells: fixed decimals that give its largest value two significant digits (0.053,
    0.001, 0.000 on a board whose largest is 0.0533). Plotly writes every cell at the size its longest text fits, and
    two significant digits of each value ("0.00093") had made MiniLM's 72 cells 4 px; the hover keeps four."""
    return f".{decimals_for(top)}f"


def board_height(n_layers: int) -> int:
    """figure_layout's height for a layers x heads board whose plot area gives each layer CELL_PX (at least
    MIN_BOARD_ROWS rows' worth): a 2-layer board was once squeezed to 18 px by its axis and legend margins."""
    return _rows_px(n_layers) + BOARD_FRAME_PX


def board_width(n_heads: int) -> int:
    """The px a layers x heads board is at most wide: cells of HEAD_CELL_MAX_PX across and the colour bar beside
    them, and never less than its subtitle needs. A narrower column draws it narrower."""
    return max(BOARD_TEXT_PX, BOARD_SIDES_PX + HEAD_CELL_MAX_PX * n_heads)


def _rows_px(n_layers: int) -> int:
    """The px of a board's plot area: CELL_PX a layer, at least MIN_BOARD_ROWS layers' worth."""
    return CELL_PX * max(n_layers, MIN_BOARD_ROWS)

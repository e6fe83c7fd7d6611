"""Figures of the activations page over depth. Tables in, figures out (no Streamlit here).

Plotly figures for the lines: statistics over depth, each norm's input and output, the gradient norm of each block,
each token's residual vector and the heads' share of the token with a massive activation; the per-token table as a
matrix-view board too (act_token_norms). The histograms are pictures/activation_histograms.py's, the per-head grids and
the gradient map pictures/activation_boards.py's."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.activations_text import shares_average_text, sublayer_outputs_text
from explorer.analysis.norm_attention import norm_attention
from explorer.analysis.stream_energy import focus_token, padding_queries_counted, token_energy, token_shares
from explorer.arguments import is_whole
from explorer.config import ConfigError
from explorer.model import Transformer
from explorer.numbers import readable
from explorer.positional import ADDED_TO_INPUT, GIVEN_INPUT, input_text, positional_of
from explorer.trace import StackTrace, Trace
from pictures.attention_panels import FAINT, token_labels, top_of
from pictures.boards import board, matrix_panel
from pictures.log_axes import log_panels_note, panel_scale
from pictures.one_pass import axis_name, merged, panel_axes, subplot_grid
from pictures.style import (
    CATEGORY10,
    DISTINCT,
    HOVER_NUMBERS,
    MAX_CELL_PX,
    PANEL_TITLE_FONT,
    VIRIDIS,
    Ramp,
    axis,
    block_axis,
    block_label,
    figure_layout,
    label_text,
    legend_below,
    noted,
    plotly_scale,
    ticks,
)

POINT_COLOURS = {  # one colour per point, whichever points a stack has
    "residual": CATEGORY10[0],
    "attention output": CATEGORY10[1],
    "cross-attention output": CATEGORY10[4],
    "FFN hidden": CATEGORY10[2],
    "FFN output": CATEGORY10[3],
}
# and a dash and a marker each: to a colour-blind eye some of those colours are one (simulated protanopia puts the
# attention output's orange CIEDE2000 1.3 from the FFN hidden's green, deuteranopia that green 4.6 from the FFN
# output's red)
POINT_DASHES = {"residual": "solid", "attention output": "dash", "cross-attention output": "dashdot",
                "FFN hidden": "dot", "FFN output": "longdash"}  # fmt: skip
POINT_MARKERS = {"residual": "circle", "attention output": "diamond", "cross-attention output": "triangle-up",
                 "FFN hidden": "square", "FFN output": "triangle-down"}  # fmt: skip
STAT_TITLES = {"mean": "mean", "std": "standard deviation", "rms": "RMS", "max_abs": "max |x|"}
SUBLAYER_NAMES = {"attn": "self-attention", "cross": "cross-attention", "ffn": "feed-forward"}
SUBLAYER_NAMES |= {f"{key} output": f"{name} output" for key, name in SUBLAYER_NAMES.items()}  # res-post, peri
NORM_READS = {  # what a block's norms read, by placement: the figure's subtitle
    "post": "x + sublayer(x), the sum it normalises",
    "pre": "the residual stream x itself",
    "res-post": "the sub-layer's output f(x), before it is added to the stream",
    "peri": "the stream x in front of the sub-layer, the sub-layer's output behind it",
}
MAX_LAYER_TICKS = 14  # block labels along a chart's whole width
PANEL_LAYER_TICKS = 8  # along one of two panels side by side: "input" and 7 numbers stay level at 1024 px
LINE_WIDTH = 640  # px a matrix board may take across
IN_ORDER = {"traceorder": "normal"}  # a legend lists the points in the order they are drawn, not grouped
TWO_COLUMNS = {"entrywidth": 0.5, "entrywidthmode": "fraction"}
NORM_POINT = "LayerNorm"  # how layer_statistics names a norm's points ("attn LayerNorm in"), whatever the norm
# a norm on a sub-layer's output (res-post, peri): "attn output LayerNorm in"
OUTPUT_NORM_POINT = f"output {NORM_POINT}"


def _line(rows: pd.DataFrame, column: str, name: str, value_title: str, **style: object) -> dict:
    """One line of `rows`' `column` over their blocks, a point at each, as a Plotly scatter trace; hover names the
    line, the block and the value. `style`: line, marker, showlegend, the panel's axes ..."""
    layers = rows["layer"].to_numpy(dtype=np.int32)  # [n]
    return {
        "type": "scatter",
        "x": layers,
        "y": rows[column].to_numpy(dtype=np.float64),
        "name": name,
        "legendgroup": name,
        "mode": "lines+markers",
        "customdata": [block_label(int(layer)) for layer in layers],
        "hovertemplate": f"{name}<br>block %{{customdata}}<br>{value_title} %{{y:{HOVER_NUMBERS}}}<extra></extra>",
        **style,
    }


def _panel_titles(figure: go.Figure) -> go.Figure:
    """make_subplots writes each panel's title as an annotation: in the page's font size."""
    return figure.update_annotations(font=PANEL_TITLE_FONT)


def depth_figure(
    stats: pd.DataFrame, stack: str, positional: str, family: str | None = None, padded: bool = False
) -> go.Figure:
    """Mean, std, RMS and max |x| over depth (2 x 2), one line per point: the residual stream (after each block,
    and the input) and each sub-layer's output before it is added to the stream. Made in one pass
    (pictures/one_pass.py): it is the Activations page's first chart, made on every load."""
    points = [p for p in stats["point"].unique() if NORM_POINT not in p]
    by_point = {point: stats[stats["point"] == point].sort_values("layer") for point in points}
    layers = list(range(-1, int(stats["layer"].max()) + 1))
    traces = []
    for i, (stat, title) in enumerate(STAT_TITLES.items()):
        for j, point in enumerate(points):
            colour = POINT_COLOURS.get(point, CATEGORY10[j % len(CATEGORY10)])
            width = 3 if point == "residual" else 2
            line = {"color": colour, "width": width, "dash": POINT_DASHES.get(point, "solid")}
            marker = {"size": 6, "symbol": POINT_MARKERS.get(point, "circle")}
            style = {"line": line, "marker": marker, "showlegend": i == 0}
            traces.append(_line(by_point[point], stat, point, title, **style, **panel_axes(i // 2 + 1, i % 2 + 1, 2)))
    # a panel whose values span more than LOG_SPAN goes logarithmic: SmolLM2's residual RMS runs from 0.1 to 340, and
    # on a linear axis its first eleven blocks lay flat at zero. The mean stays linear: it crosses 0, and where it
    # does not, a post-norm stream's mean of 6e-9 (float32 rounding of 0) spanned x1e8 against the rest
    drawn = stats[stats["point"].isin(points)]
    scales = {stat: panel_scale(drawn[stat].to_numpy(dtype=np.float64), "linear" if stat == "mean" else "auto")
              for stat in STAT_TITLES}  # fmt: skip
    subtitle = noted(
        f"residual: the stream after each block (input = {input_text(positional, family)}); "
        f"{sublayer_outputs_text(bool(stats['point'].str.contains(OUTPUT_NORM_POINT).any()))}; over all tokens "
        f"{'([PAD] included) ' if padded else ''}and units (the standard deviation divides by their number, N)",
        log_panels_note(scales, STAT_TITLES),
    )
    layout = figure_layout(f"Activation statistics over depth ({stack} stack)", subtitle, 480)
    legend_below(layout, 1, title={"text": "point"}, **IN_ORDER)
    grid = subplot_grid(2, 2, list(STAT_TITLES.values()), shared_xaxes=True, vertical_spacing=0.12)
    x_axis = block_axis(None, layers, PANEL_LAYER_TICKS, 0.3)
    for i, stat in enumerate(STAT_TITLES):
        x, y = (axis_name(ref) for ref in panel_axes(i // 2 + 1, i % 2 + 1, 2).values())
        bottom_row = {"title": {"text": "block"}} if i >= 2 else {}
        grid[x] = merged(grid[x], merged(x_axis, bottom_row))
        log = {"type": "log", **_log_ticks(drawn[stat])} if scales[stat].log else {}
        grid[y] = merged(grid[y], axis(None, **log))
    return go.Figure({"data": traces, "layout": merged(grid, layout)})


def norm_figure(stats: pd.DataFrame, stack: str, norm: str, norm_name: str = "LayerNorm") -> go.Figure:
    """Each norm's input against its output over depth: RMS and max |x|, a colour per sub-layer (DISTINCT, told
    apart by colour-blind eyes too); input solid with circles, output dashed with diamonds. `norm_name`: what the
    model's norms are (anatomy.norm_name: LayerNorm or RMSNorm), in the title and the legend."""
    rows = stats[stats["point"].str.contains(NORM_POINT)]
    sublayers = list(dict.fromkeys(p.rsplit(f" {NORM_POINT}", 1)[0] for p in rows["point"]))
    layers = list(range(0, int(stats["layer"].max()) + 1))
    statistics = ("rms", "max_abs")
    figure = make_subplots(rows=1, cols=2, subplot_titles=[STAT_TITLES[s] for s in statistics])
    for col, stat in enumerate(statistics, start=1):
        for i, sub in enumerate(sublayers):
            colour = DISTINCT[i % len(DISTINCT)]
            for side, shown, dash, symbol in (("in", "input", "solid", "circle"), ("out", "output", "dash", "diamond")):
                line = _line(
                    rows[rows["point"] == f"{sub} {NORM_POINT} {side}"].sort_values("layer"),
                    stat,
                    f"{SUBLAYER_NAMES.get(sub, sub)} {norm_name} {shown}",
                    STAT_TITLES[stat],
                    line={"color": colour, "width": 2, "dash": dash},
                    marker={"size": 8, "symbol": symbol},
                    showlegend=col == 1,
                )
                figure.add_trace(line, row=1, col=col)
    initial = "gain is 1 and its bias 0" if norm_name == "LayerNorm" else "gain is 1"  # an RMSNorm has no bias
    subtitle = (
        f"input (solid, circles): {NORM_READS[norm]}; output (dashed, diamonds): what it returns, RMS ≈ 1 while its "
        f"{initial}, as at initialisation (a trained {norm_name} moves away from that)"
    )
    layout = figure_layout(f"What each {norm_name} receives and returns ({stack} stack, {norm}-norm)", subtitle, 300)
    legend_below(layout, len(sublayers), **IN_ORDER, **TWO_COLUMNS)  # a row per sub-layer: its input and output
    figure.update_layout(layout)
    figure.update_xaxes(block_axis("block", layers, PANEL_LAYER_TICKS, 0.3))
    figure.update_yaxes(axis(None, rangemode="tozero"))
    return _panel_titles(figure)


ENERGY_TITLES = {  # token_energy's measures: what a cell holds, and how a title names it
    "norm": ("‖x‖₂", "Norm of each token's residual vector", "L2 norm over d_model"),
    "max": ("max |x|", "Largest |x| in each token's residual vector", "largest absolute value over d_model"),
}


def _layer_labels(n_rows: int) -> list[str]:
    """The rows of a [L + 1, T] table over depth: "input", then "after block 0" ..."""
    return ["input"] + [f"after block {i}" for i in range(n_rows - 1)]


def _energy_subtitle(measure: str, positional: str) -> str:
    if positional == GIVEN_INPUT:
        return f"{ENERGY_TITLES[measure][2]}; the input is the tensor given to explorer.run, as it is"
    return f"{ENERGY_TITLES[measure][2]}; " + (
        "the input adds each token's position, so a repeated word's input rows differ"
        if positional in ADDED_TO_INPUT
        else "no position is added to the input, so a repeated word has the same input row"
    )


def energy_colours(values: np.ndarray, stretch: bool) -> tuple[Ramp, str | None]:
    """The per-token heatmap's colours and what its subtitle says of them. Off: the lowest to the largest value.
    Stretched: the lowest to the 99th percentile (top_of, as the attention maps and the encoding table stretch), so
    a massive activation cannot leave every other cell dark (SmolLM2 on 512 pieces: one token's norm reaches 26,900
    where 99 % are below 60). Values are >= 0 (norms and max |x|)."""
    if not values.size:
        return Ramp(VIRIDIS, 0.0, 1.0), None
    low, full = float(values.min()), float(values.max())
    robust = top_of(values)  # [L + 1, T] -> the 99th percentile
    if stretch:
        note = f"colours stretched: brightest = {readable(robust)} or more (the top 1 % of values)"
        return Ramp(VIRIDIS, low, max(robust, low + 1e-6)), note
    note = None
    if robust - low < FAINT * (full - low):
        note = f"99 % of the values are below {readable(robust)}, dark next to the largest ({readable(full)}): "
        note += "try Stretch colours"
    return Ramp(VIRIDIS, low, max(full, low + 1e-6)), note


def token_norm_heatmap(
    norms: np.ndarray,
    tokens: list[str],
    stack: str,
    positional: str,
    measure: str = "norm",
    stretch: bool = False,
    hover_tokens: list[str] | None = None,
) -> dict:
    """[L + 1, T] each token's residual vector measured by `measure` (ENERGY_TITLES: its L2 norm, or its largest
    |x|), input on top, then after each block: a matrix-view board whose rows are tall enough for their labels.
    `stretch`: colours up to the 99th percentile of the values (energy_colours). `hover_tokens`: the tokens as hover
    writes them, when not as labelled (attention_panels.spelled_names)."""
    n_rows, n_tokens = norms.shape
    cell = min(MAX_CELL_PX, LINE_WIDTH / max(n_rows, n_tokens))
    value_title, title, _ = ENERGY_TITLES[measure]
    ramp, scale = energy_colours(norms, stretch)
    subtitle = noted(_energy_subtitle(measure, positional), scale)
    panel = matrix_panel(
        norms.astype(np.float32),
        None,
        ramp,
        name="act_token_norms",
        x_labels=token_labels(tokens),
        y_labels=_layer_labels(n_rows),
        x_title="token",
        y_title="layer",
        value_title=value_title,
        title=f"{title}, layer by layer ({stack} stack)",
        subtitle=subtitle,
        text_digits=1,
        plot_px=(max(320.0, n_tokens * cell), max(n_rows * cell, min(24.0 * n_rows, 600.0))),
        hover_names=None if hover_tokens is None else (_layer_labels(n_rows), hover_tokens),
    )
    return board([panel])


def token_energy_figure(
    values: np.ndarray, tokens: list[str], stack: str, positional: str, measure: str, stretch: bool = False
) -> go.Figure:
    """The same [L + 1, T] table as token_norm_heatmap, as a Plotly heatmap (for a notebook and the HTML download):
    tokens across, the input on top and each block below it; hover gives the token, the layer and the value. Its
    colours as the page's (energy_colours: `stretch`ed to the 99th percentile, or the full range)."""
    n_rows, n_tokens = values.shape
    value_title, title, _ = ENERGY_TITLES[measure]
    ramp, scale = energy_colours(values, stretch)
    labels = [label_text(t) for t in token_labels(tokens)]
    figure = go.Figure(
        go.Heatmap(
            z=values.astype(np.float64),
            x=list(range(n_tokens)),
            y=list(range(n_rows)),
            customdata=np.array([[(labels[t], row) for t, _ in enumerate(labels)] for row in _layer_labels(n_rows)]),
            colorscale=plotly_scale(VIRIDIS),
            zmin=ramp.low,
            zmax=ramp.high,
            colorbar={"title": {"text": value_title}},
            hovertemplate=f"token %{{customdata[0]}}<br>%{{customdata[1]}}<br>{value_title} "
            f"%{{z:{HOVER_NUMBERS}}}<extra></extra>",
        )
    )
    rows = ticks(n_rows, MAX_LAYER_TICKS * 2)
    figure.update_layout(
        figure_layout(
            f"{title}, layer by layer ({stack} stack)",
            noted(_energy_subtitle(measure, positional), scale),
            max(260, min(18 * n_rows, 640)),
        ),
        xaxis=axis("token", tickmode="array", tickvals=list(range(n_tokens)), ticktext=labels, showgrid=False),
        yaxis=axis(
            "layer",
            tickmode="array",
            tickvals=rows,
            ticktext=[_layer_labels(n_rows)[int(r)] for r in rows],
            autorange="reversed",
            showgrid=False,
        ),
    )
    return figure


SHARE_LINES = (  # token_shares' columns: the line's name and colour
    ("weights", "share of attention weight (α)", CATEGORY10[0]),
    ("norms", "share of what heads add (‖α·f(x)‖)", CATEGORY10[3]),
)


def token_share_figure(
    shares: pd.DataFrame,
    position: int,
    piece: str,
    block: int | None,
    stack: str,
    averaged: str = shares_average_text(),
) -> go.Figure:
    """Per layer, the share of the heads' attention weight on one token, and of what they add (token_shares), two
    lines from 0 to 1. `block`: the block after which the token holds a massive activation; the layers that read it
    (after that block) are shaded. None: the token is shown for its largest |x|, with no massive activation.
    `averaged`: what each share is a mean over (shares_average_text: the heads kept, [PAD] queries counted)."""
    figure = go.Figure()
    for column, name, colour in SHARE_LINES:
        if shares[column].notna().any():
            figure.add_trace(
                _line(shares, column, name, "share", line={"color": colour, "width": 3}, marker={"size": 6})
            )
    layers = [int(layer) for layer in shares["layer"]]
    if block is not None and block + 1 <= layers[-1]:
        figure.add_vrect(x0=block + 0.5, x1=layers[-1] + 0.3, fillcolor="#eeeeee", opacity=1.0, line_width=0,
                         layer="below")  # fmt: skip
    who = f"“{piece}” (position {position})"
    why = (
        f"shaded: the layers after block {block}, which read the stream where it first became massive"
        if block is not None and block + 1 <= layers[-1]
        else f"massive only after the last block ({block}): no layer reads it"
        if block is not None
        else "no massive activation: the token with the largest |x| in the stream"
    )
    # The stack in the subtitle, which wraps: a title does not, and at 1024 px this one ran off the chart's edge
    subtitle = f"{stack} stack · {averaged} · {why}"
    layout = figure_layout(f"How much the heads look at {who}, and take from it", subtitle, 280)
    legend_below(layout, 1, **IN_ORDER)
    figure.update_layout(
        layout, xaxis=block_axis("layer", layers, MAX_LAYER_TICKS, 0.3), yaxis=axis("share", range=[0, 1.02])
    )
    return figure


def gradient_totals_figure(
    totals: pd.DataFrame, norm: str, objective: str = "for the objective stated above"
) -> go.Figure:
    """L2 norm of all of a block's parameter gradients, per block, one line per stack (log scale; a norm of 0, which
    a log axis cannot place, is left out). `objective` ends the subtitle: the page states the loss in a box above the
    chart; a figure drawn anywhere else names it."""
    stacks = list(dict.fromkeys(totals["stack"]))
    layers = list(range(0, int(totals["layer"].max()) + 1)) if len(totals) else [0]
    figure = go.Figure()
    for i, stack in enumerate(stacks):
        rows = totals[(totals["stack"] == stack) & (totals["norm"] > 0)].sort_values("layer")
        line = _line(
            rows,
            "norm",
            f"{stack} blocks",
            "gradient norm",
            line={"color": CATEGORY10[i % len(CATEGORY10)], "width": 3},
            marker={"size": 8},
        )
        figure.add_trace(line)
    figure.update_layout(
        figure_layout(
            f"Gradient norm of each block's parameters ({norm}-norm)",
            f"L2 norm of the gradients of all of the block's weights and biases together, {objective}",
            280,
        ),
        xaxis=block_axis("block", layers, MAX_LAYER_TICKS, 0.3),
        yaxis=axis("gradient norm (log scale)", type="log", **_log_ticks(totals["norm"])),
    )
    return figure


def _log_ticks(values: pd.Series) -> dict:
    """A log axis's labels for `values`: within two decades Plotly labels every digit (0.1, 0.2, ..., 0.9, 1), whose
    labels run into each other below each power of ten; there, only 1, 2 and 5 of each decade ("D2"), or every digit
    ("D1") where 1, 2 and 5 label fewer than two values within the data (an encoder-decoder's gradient norms, 2.2 to
    4.9, had one label: "5"), or Plotly's own (1.5, 1.6, ... within a narrow range) where neither labels two."""
    positive = values[values > 0]
    if not len(positive) or positive.max() >= 100 * positive.min():
        return {}
    low, high = float(positive.min()), float(positive.max())
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    for dtick, digits in (("D2", (1, 2, 5)), ("D1", range(1, 10))):
        if sum(low <= d * 10.0**k <= high for k in decades for d in digits) >= 2:
            return {"dtick": dtick}
    return {}


# --- Notebook builders: a trace (and its model) in, the page's figure out.


def trace_stack(trace: Trace, stack: int) -> StackTrace:
    """trace.stacks[stack], or a ConfigError naming the stacks the trace has (an encoder has no stack 1)."""
    names = ", ".join(f"{i} ({part.name})" for i, part in enumerate(trace.stacks))
    if not is_whole(stack) or not 0 <= stack < len(trace.stacks):
        raise ConfigError(f"stack is one of {names}; got {stack!r}.")
    return trace.stacks[stack]


def token_norm_figure(trace: Trace, measure: str = "norm", stack: int = 0, stretch: bool = False) -> go.Figure:
    """Each token's residual vector over depth, layers × tokens: its L2 norm ("norm") or largest |x| ("max") (the
    Activations page's per-token heatmap; `stretch`: colours up to the 99th percentile, as its Stretch colours)."""
    part = trace_stack(trace, stack)
    return token_energy_figure(
        token_energy(part, measure), part.labels, part.name, positional_of(trace.config), measure, stretch
    )


def massive_share_figure(model: Transformer, trace: Trace, stack: int = 0) -> go.Figure:
    """Per layer, the share of the heads' attention weight and of what they add (norm_attention, Kobayashi et al.
    2020) on the token with a massive activation (Sun et al. 2024), or, without one, on the token with the largest
    |x| (the Activations page's chart)."""
    part = trace_stack(trace, stack)
    position, block = focus_token(part)
    norms = norm_attention(model, trace, part.self_attention.kind)  # [L, H, T, T]
    table, averaged = shares_of(trace, part, position, norms)
    return token_share_figure(table, position, part.labels[position], block, part.name, averaged)


def shares_of(trace: Trace, part: StackTrace, position: int, norms: np.ndarray) -> tuple[pd.DataFrame, str]:
    """token_shares of the token at `position` of `part` (a stack of `trace`; norms [L, H, T, T] its norm_attention),
    with the heads the run removed (they are removed from the first stack's self-attention only), and what each share
    is a mean over (shares_average_text), for token_share_figure."""
    maps = part.self_attention
    removed = trace.ablated if part is trace.first else ()
    table = token_shares(maps, position, norms, removed, trace.ablate_with)
    return table, shares_average_text(padding_queries_counted(maps, position), removed, trace.ablate_with)

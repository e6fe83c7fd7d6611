"""Plotly figures of the Mixing page (attention rollout and flow, explorer.analysis.mixing): bars for one query's row,
and figures of a Trace for a notebook (rollout_figure, flow_figure); its matrix-view boards are in
pictures/mixing_boards.py. No Streamlit here."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.analysis.mixing import (
    DEFAULT_RESIDUAL,
    attention_flow,
    attention_flow_rows,
    attention_rollout,
    mixed_maps,
)
from explorer.analysis.stats import head_average
from explorer.arguments import whole_in
from explorer.mixing_text import predicts_next, reach_title, rows_note
from explorer.trace import AttentionMaps, Trace
from pictures.attention_panels import token_labels
from pictures.mixing_boards import BAR_TITLES, FLOW_KEEPS_SCALE, mix_colours, reachable, shown_cells
from pictures.style import (
    BLUES,
    CATEGORY10,
    HOVER_NUMBERS,
    MASKED_PLOT,
    PANEL_TITLE_FONT,
    axis,
    figure_layout,
    label_text,
    masked_map_axes,
    noted,
    plotly_scale,
    tick_positions,
)

# Tokens named under the reach bars: slanted 45°, labels need 20 px between ticks (a 14 px line), and a 1024 px
# projector leaves the bars about 460 px; the rest are named in hover.
REACH_TICKS = 20
ROW_COLOURS = {"raw": CATEGORY10[7], "rollout": CATEGORY10[0], "flow": CATEGORY10[1]}
ROW_UNITS = {"raw": "weight", "rollout": "share", "flow": "max flow"}  # each panel's y axis
SOLID_BARS = 150  # more bars than this are drawn without gaps: at 1024 px each is then about a pixel wide
ROW_NAMES = {
    "raw": "last layer, average of heads",
    "rollout": "rollout after the last block",
    "flow": "flow after the last block",
}


def reach_figure(
    tokens: list[str], title: str, rows: dict[str, np.ndarray], residual: float = DEFAULT_RESIDUAL
) -> go.Figure:
    """One query's rows as bars over the input tokens, a panel each, every panel on its own axis: `rows` maps
    "raw" (the last layer's average of heads), "rollout" and "flow" to [T] values (any of them may be left out)."""
    labels = [label_text(t) for t in token_labels(tokens)]
    shown = [(key, values) for key, values in rows.items() if values is not None]
    figure = make_subplots(
        rows=len(shown),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=[ROW_NAMES[k] for k, _ in shown],
    )
    for i, (key, values) in enumerate(shown, start=1):
        figure.add_trace(
            go.Bar(
                x=list(range(len(labels))),
                y=np.asarray(values, dtype=np.float64),
                name=ROW_NAMES[key],
                marker={"color": ROW_COLOURS[key]},
                customdata=labels,
                hovertemplate=f"%{{customdata}}<br>{ROW_NAMES[key]}: %{{y:{HOVER_NUMBERS}}}<extra></extra>",
                showlegend=False,
            ),
            row=i,
            col=1,
        )
    reached = rows.get("rollout") is None or float(np.sum(rows["rollout"])) > 0.5  # [T] -> its sum: 1, or 0
    sums = "the row sums to 1" if reached else "0: nothing reaches this position"
    parts = {
        "raw": "raw: where the last layer looks",
        "rollout": f"rollout: {sums}",
        "flow": "flow: each bar is its own max flow, at most 1, not a share",
    }
    subtitle = " · ".join([f"residual share {residual:g}", *(parts[key] for key, _ in shown)])
    # a long text's bars are under a pixel wide: gaps between them left the bars too faint to see (0.997 on one token)
    solid = len(labels) > SOLID_BARS
    if solid:
        figure.update_traces(marker_line_width=0)
    figure.update_layout(figure_layout(title, subtitle, 150 * len(shown) + 60, bargap=0.0 if solid else 0.25))
    named = tick_positions(len(labels), REACH_TICKS)
    figure.update_xaxes(tickmode="array", tickvals=named, ticktext=[labels[i] for i in named], tickangle=-45)
    figure.update_xaxes(title={"text": "input token"}, row=len(shown), col=1)
    for i, (key, _) in enumerate(shown, start=1):
        figure.update_yaxes(axis(ROW_UNITS[key], rangemode="tozero"), row=i, col=1)
    return figure.update_annotations(font=PANEL_TITLE_FONT)


def _heatmap(values: np.ndarray, x: list[str], y: list[str], title: str, top: float) -> go.Heatmap:
    return go.Heatmap(
        z=values,
        x=x,
        y=y,
        zmin=0.0,
        zmax=top,
        colorscale=plotly_scale(BLUES),
        showscale=False,
        name=title,
        hovertemplate=f"position %{{y}}<br>input token %{{x}}<br>{title} %{{z:{HOVER_NUMBERS}}}<extra></extra>",
    )


def _colour_bars(figure: go.Figure, measures: list[str], tops: list[float]) -> None:
    """A colour bar right of the last map of each run of maps on one scale: "value" for several, else its measure."""
    for i, (measure, top) in enumerate(zip(measures, tops, strict=True)):
        if i + 1 < len(tops) and tops[i + 1] == top:
            continue
        shared = i > 0 and tops[i - 1] == top
        right = figure.layout[f"xaxis{i + 1 if i else ''}"].domain[1]
        bar = {"title": {"text": "value" if shared else BAR_TITLES[measure]}, "x": right + 0.01, "len": 0.9}
        figure.update_traces(showscale=True, colorbar=bar, selector={"type": "heatmap"}, row=1, col=i + 1)


def maps_figure(
    maps: AttentionMaps,
    panels: list[tuple[str, str, np.ndarray, list[int]]],
    title: str,
    subtitle: str,
    stretch: bool = False,
) -> go.Figure:
    """Tokens x tokens maps side by side, each (its title, its measure: "raw", "rollout" or "flow", [Q, T] values,
    its query positions); grey gaps where no path reaches (masked). Colours as the page's board: 0 to 1, or
    `stretch`ed for raw and rollout (mix_colours) while flow keeps 0 to 1, the note in the subtitle."""
    labels = [label_text(t) for t in token_labels(maps.key_labels)]
    reach = reachable(maps.allowed)  # [T, T]
    stretched = [(values, reach[queries]) for _, measure, values, queries in panels if measure != "flow"]
    kinds = " and ".join(dict.fromkeys(measure for _, measure, _, _ in panels if measure != "flow"))
    what = "values" if len(stretched) == len(panels) else f"{kinds} values"
    ramp, note = mix_colours(*map(list, zip(*stretched, strict=True)), stretch, what)
    tops = [1.0 if measure == "flow" else ramp.high for _, measure, _, _ in panels]
    if len(set(tops)) > 1:
        note = noted(note, FLOW_KEEPS_SCALE)
    spacing = 0.16 if len(set(tops)) > 1 else 0.08  # room for a colour bar between two maps
    figure = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[0] for p in panels], horizontal_spacing=spacing)
    for i, ((name, _, values, queries), top) in enumerate(zip(panels, tops, strict=True), start=1):
        shown = np.where(shown_cells(values, reach[queries]), np.asarray(values, dtype=np.float64), np.nan)  # [Q, T]
        figure.add_trace(_heatmap(shown, labels, [labels[q] for q in queries], name, top), row=1, col=i)
    _colour_bars(figure, [p[1] for p in panels], tops)
    side = 360
    width = side * len(panels) + 160
    figure.update_layout(figure_layout(title, noted(subtitle, note), side + 60, width=width, **MASKED_PLOT))
    return masked_map_axes(figure, type="category").update_annotations(font=PANEL_TITLE_FONT)


def rollout_figure(
    trace: Trace, layer: int | None = None, residual: float = DEFAULT_RESIDUAL, stretch: bool = False
) -> go.Figure:
    """Attention rollout (Abnar & Zuidema 2020) after block `layer` (None: the last) beside that layer's raw average
    of heads, for the first stack's self-attention: by this estimate, which input tokens (across) each position
    (down) is made of (`stretch`: colours up to the 99th percentile, as the Mixing page's Stretch colours)."""
    rollout = attention_rollout(trace, residual)  # [L, T, T]
    return rollout_maps_figure(mixed_maps(trace), rollout, layer, residual, stretch)


def rollout_maps_figure(
    maps: AttentionMaps, rollout: np.ndarray, layer: int | None, residual: float, stretch: bool = False
) -> go.Figure:
    """rollout_figure from rollout already computed ([L, T, T])."""
    layer = maps.n_layers - 1 if layer is None else whole_in("layer", layer, 0, maps.n_layers - 1)
    everyone = list(range(len(maps.key_tokens)))
    return maps_figure(
        maps,
        [
            (f"raw: layer {layer}, average of heads", "raw", head_average(maps, layer), everyone),
            (f"rollout after block {layer}", "rollout", rollout[layer], everyone),
        ],
        f"Attention rollout after block {layer} ({maps.kind})",
        f"residual share {residual:g}: Ã = {residual:g}·I + {1 - residual:g}·(average of heads), multiplied from "
        "block 0 up",
        stretch,
    )


def flow_figure(
    trace: Trace, query: int | None = None, residual: float = DEFAULT_RESIDUAL, stretch: bool = False
) -> go.Figure:
    """Attention flow (Abnar & Zuidema 2020) after the last block, first stack's self-attention: with `query` (a
    position; -1 the last), that position's row as bars beside its rollout and raw rows; None: every position's row
    as a map beside rollout (T x T max-flow problems: slow past a few dozen tokens; `stretch`: as rollout_figure)."""
    maps = mixed_maps(trace)  # removed heads as they acted, as rollout and flow average them
    rollout = attention_rollout(trace, residual)  # [L, T, T]
    n_tokens = len(maps.key_tokens)
    if query is None:
        return flow_maps_figure(maps, rollout, attention_flow_rows(trace, None, residual), residual, stretch)
    query = whole_in("query", query, -n_tokens, n_tokens - 1) % n_tokens  # -1: the last position
    flow = attention_flow(trace, query, residual)  # [T]
    return flow_row_figure(maps, rollout, flow, query, residual, predicts_next([s.name for s in trace.stacks]))


def flow_maps_figure(
    maps: AttentionMaps, rollout: np.ndarray, flow: np.ndarray, residual: float, stretch: bool = False
) -> go.Figure:
    """flow_figure of every row, from rollout ([L, T, T]) and flow ([T, T]) already computed."""
    everyone = list(range(len(maps.key_tokens)))
    return maps_figure(
        maps,
        [
            ("rollout after the last block", "rollout", rollout[-1], everyone),
            ("flow after the last block", "flow", flow, everyone),
        ],
        f"Attention rollout and flow after block {maps.n_layers - 1} ({maps.kind})",
        f"residual share {residual:g} · rollout {rows_note(rollout[-1])}; each flow value is its own max flow, at most "
        "1, not a share",
        stretch,
    )


def flow_row_figure(
    maps: AttentionMaps,
    rollout: np.ndarray,
    flow: np.ndarray | None,
    query: int,
    residual: float,
    predicts: bool,
    title: str | None = None,
) -> go.Figure:
    """flow_figure of one query, from rollout ([L, T, T]) and that query's flow ([T]; None: not computed); `predicts`:
    whether the last position predicts the next token (explorer.mixing_text.predicts_next)."""
    tokens = maps.key_labels
    raw = head_average(maps, maps.n_layers - 1)[query]  # [T]
    rows = {"raw": raw, "rollout": rollout[-1, query], "flow": flow}
    title = title or reach_title(tokens[query], query, len(tokens), predicts)
    return reach_figure(tokens, title, rows, residual)

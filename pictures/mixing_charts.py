"""Figures of the Mixing page (attention rollout and flow, explorer.analysis.mixing): matrix-view panels for the
page's tokens x tokens maps (pictures/boards.py says why), Plotly bars for one query's row, and Plotly figures of a
Trace for a notebook (rollout_figure, flow_figure). No Streamlit here."""

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
from pictures.attention_panels import scale_note, token_hover_names, token_labels, top_of, weight_ramp
from pictures.boards import matrix_panel, noted_board
from pictures.style import (
    BLUES,
    CATEGORY10,
    HOVER_NUMBERS,
    PANEL_TITLE_FONT,
    Ramp,
    axis,
    figure_layout,
    label_text,
    noted,
    plotly_scale,
    tick_positions,
)

MIX = Ramp(BLUES, 0.0, 1.0)  # raw weights, rollout and flow all lie in 0..1: one scale, so the maps compare
# Stretch colours stretches raw and rollout only: flow's top 1 % is 1 on most texts (a row of flow can sum to 14 to 22
# on MiniLM), so a scale stretched over flow too stays 0 to 1 and the switch would change nothing
FLOW_KEEPS_SCALE = "flow keeps 0 to 1"
BAR_TITLES = {"raw": "mean weight", "rollout": "rollout", "flow": "max flow"}  # a colour bar of one map
PANEL_PX = 160  # three maps side by side, with their labels, gaps and one legend, fit the 940 px a 1400 px window has
TICK_PX = 12.0  # token labels at least this far apart: every token up to 13 in a 160 px map, else every n-th
LABEL_CHARS = 8  # a longer token is cut short on the axes (hover gives it whole): narrower labels, wider maps
LAYER_PX = 300  # two maps side by side
# Tokens named under the reach bars: slanted 45°, labels need 20 px between ticks (a 14 px line), and a 1024 px
# projector leaves the bars about 460 px; the rest are named in hover.
REACH_TICKS = 20
TEXT_PX = 28.0  # values are written in cells at least this wide: "0.37" fits, and smaller would not read
# The one legend of a board whose maps share its colour scale names them all, not the map that draws it
BOTH_MAPS, ALL_THREE_MAPS = "value, both maps", "value, all 3 maps"
ROW_COLOURS = {"raw": CATEGORY10[7], "rollout": CATEGORY10[0], "flow": CATEGORY10[1]}
ROW_UNITS = {"raw": "weight", "rollout": "share", "flow": "max flow"}  # each panel's y axis
SOLID_BARS = 150  # more bars than this are drawn without gaps: at 1024 px each is then about a pixel wide
ROW_NAMES = {
    "raw": "last layer, average of heads",
    "rollout": "rollout after the last block",
    "flow": "flow after the last block",
}


def reachable(allowed: np.ndarray) -> np.ndarray:
    """[T, T] bool: the cells the mask lets rollout and flow be nonzero in, the allowed keys and each token itself (the
    residual). The app's masks (causal, padding) are closed under composition, so further layers reach no more while
    every head attends as its mask allows; a head removed by its mean does not (shown_cells)."""
    allowed = np.asarray(allowed, dtype=bool)  # [T, T]
    return allowed | np.eye(allowed.shape[0], dtype=bool)


def shown_cells(values: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """[Q, T] bool: the cells drawn with their value, the rest grey: those the mask reaches (`reach`, [Q, T]) and any
    other whose value is not 0. A head removed by its mean weighs every key by its mean over the queries, so through
    it a position receives tokens its mask hides (later ones, under a causal mask)."""
    return np.asarray(reach, dtype=bool) | (np.asarray(values) != 0)  # [Q, T]


def _mixing_panel(
    values: np.ndarray,
    maps: AttentionMaps,
    allowed: np.ndarray,
    queries: list[int] | None = None,
    legend: bool = True,
    masked_text: str = "masked: no path from this token (0)",
    ramp: Ramp = MIX,
    **parts: object,
) -> dict:
    """A [Q, T] map over the first stack's tokens, input tokens across and the positions `queries` (None: all) down,
    white = 0 to darkest blue = 1 (MIX, or the board's stretched `ramp`: mix_colours); grey where `allowed` ([Q, T])
    is False and the value is 0: masked, no path reaches (shown_cells). Without `legend`, a neighbour on the same
    scale draws it."""
    labels = token_labels(maps.key_labels)
    y_labels = labels if queries is None else [labels[q] for q in queries]
    names = token_hover_names(maps)
    if names is not None:  # the input tokens across and the positions down are the key tokens both
        parts["hover_names"] = (names[1] if queries is None else [names[1][q] for q in queries], names[1])
    return matrix_panel(
        np.asarray(values, dtype=np.float32),
        shown_cells(values, allowed),
        ramp,
        x_labels=labels,
        y_labels=y_labels,
        x_title="input token",
        y_title="position",
        masked_text=masked_text,
        text_px=TEXT_PX,
        tick_px=TICK_PX,
        label_chars=LABEL_CHARS,
        legend=legend,
        wrap_subtitle=True,  # a stretched board's note would widen its first map's box past the maps beside it
        **parts,  # type: ignore[arg-type]
    )


def average_panel(
    maps: AttentionMaps,
    layer: int,
    name: str,
    max_px: float = PANEL_PX,
    legend: bool = False,
    pick: str | None = None,
    ramp: Ramp = MIX,
) -> dict:
    """The raw average of one layer's heads ([T, T]): where that layer looks, not which input tokens. `pick`:
    matrix_panel's ("cell": a click sends back the cell)."""
    return _mixing_panel(
        head_average(maps, layer),
        maps,
        maps.allowed,
        legend=legend,
        masked_text="masked: may not attend (weight 0)",
        pick=pick,
        ramp=ramp,
        name=name,
        value_title="mean weight",
        title=f"Raw: layer {layer}, mean of {maps.n_heads} heads",
        subtitle="where this layer looks",
        max_px=max_px,
    )


def rollout_panel(
    rollout: np.ndarray,
    maps: AttentionMaps,
    layer: int,
    residual: float,
    name: str,
    max_px: float = PANEL_PX,
    legend: bool = False,
    pick: str | None = None,
    ramp: Ramp = MIX,
    legend_title: str | None = None,
) -> dict:
    """Rollout after block `layer` ([T, T], explorer.analysis.mixing.attention_rollout's entry `layer`)."""
    return _mixing_panel(
        rollout,
        maps,
        reachable(maps.allowed),
        legend=legend,
        pick=pick,
        ramp=ramp,
        name=name,
        value_title="rollout",
        legend_title=legend_title,
        title=f"Rollout after block {layer}",
        subtitle=f"residual share {residual:g} · {rows_note(rollout)}",
        max_px=max_px,
    )


def flow_panel(
    flow: np.ndarray,
    queries: list[int],
    maps: AttentionMaps,
    residual: float,
    name: str,
    max_px: float = PANEL_PX,
    legend: bool = True,
    pick: str | None = None,
    ramp: Ramp = MIX,
    legend_title: str | None = None,
) -> dict:
    """Flow after the last block, one row per query in `queries` ([len(queries), T])."""
    return _mixing_panel(
        flow,
        maps,
        reachable(maps.allowed)[queries],  # [Q, T]
        queries=queries,
        legend=legend,
        pick=pick,
        ramp=ramp,
        name=name,
        value_title="max flow",
        legend_title=legend_title,
        title=f"Flow after block {maps.n_layers - 1}",
        subtitle=f"residual share {residual:g} · each cell its own max flow, not a share",
        max_px=max_px,
    )


def mix_colours(
    maps: list[np.ndarray], allowed: list[np.ndarray], stretch: bool, what: str = "values"
) -> tuple[Ramp, str | None]:
    """A board's one colour scale and what its first map's subtitle says of it, as the attention maps' (weight_ramp,
    scale_note): white = 0 to darkest blue = 1, or stretched, darkest blue from the 99th percentile of the board's
    unmasked values up: a long text spreads each row over hundreds of tokens (about 1/T each), white on 0-to-1."""
    shown = np.concatenate([np.asarray(m)[shown_cells(m, a)] for m, a in zip(maps, allowed, strict=True)])  # not grey
    top = top_of(shown)
    return weight_ramp(top if stretch else None), scale_note(top, stretch, what)


def last_block_board(
    maps: AttentionMaps, rollout: np.ndarray, flow: np.ndarray | None, residual: float, stretch: bool = False
) -> dict:
    """One board: the last layer's raw average of heads, rollout after the last block ([L, T, T]: its last entry) and
    flow of every position ([T, T]; None: not computed), all on 0 to 1 with the last map's legend; `stretch`ed
    (mix_colours), raw and rollout share the stretched scale and flow keeps 0 to 1 with its own legend. A click on a
    cell sends back its {"row", "col"}."""
    last = maps.n_layers - 1
    side = PANEL_PX if flow is not None else LAYER_PX  # two maps have room to be larger
    what = "values" if flow is None else "raw and rollout values"
    ramp, note = mix_colours(
        [head_average(maps, last), rollout[last]], [maps.allowed, reachable(maps.allowed)], stretch, what
    )
    own_scale = flow is not None and stretch  # flow's legend apart from the stretched one
    if own_scale:
        note = noted(note, FLOW_KEEPS_SCALE)
    panels = [
        average_panel(maps, last, "mix_raw", side, pick="cell", ramp=ramp),
        rollout_panel(
            rollout[last],
            maps,
            last,
            residual,
            "mix_rollout",
            side,
            legend=flow is None or own_scale,
            pick="cell",
            ramp=ramp,
            legend_title=BOTH_MAPS,
        ),
    ]
    if flow is not None:
        rows = list(range(flow.shape[0]))
        title = BAR_TITLES["flow"] if own_scale else ALL_THREE_MAPS
        panels.append(flow_panel(flow, rows, maps, residual, "mix_flow", pick="cell", legend_title=title))
    return noted_board(panels, note)


def layer_board(maps: AttentionMaps, rollout: np.ndarray, layer: int, residual: float, stretch: bool = False) -> dict:
    """One board: that layer's raw average of heads beside rollout after block `layer`, on one colour scale
    (`stretch`: mix_colours)."""
    ramp, note = mix_colours(
        [head_average(maps, layer), rollout[layer]], [maps.allowed, reachable(maps.allowed)], stretch
    )
    return noted_board(
        [
            average_panel(maps, layer, "mix_layer_raw", LAYER_PX, ramp=ramp),
            rollout_panel(
                rollout[layer],
                maps,
                layer,
                residual,
                "mix_layer_rollout",
                LAYER_PX,
                legend=True,
                ramp=ramp,
                legend_title=BOTH_MAPS,
            ),
        ],
        note,
    )


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
    figure.update_layout(figure_layout(title, noted(subtitle, note), side + 60, width=side * len(panels) + 160))
    figure.update_yaxes(autorange="reversed", type="category")  # the first position on top, as on the pages
    figure.update_xaxes(tickangle=-45, type="category")
    return figure.update_annotations(font=PANEL_TITLE_FONT)


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

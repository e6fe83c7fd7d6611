"""The Mixing page's tokens x tokens maps (attention rollout and flow, explorer.analysis.mixing) as matrix-view
panels and boards (pictures/boards.py says why they are not Plotly heatmaps). No Streamlit here."""

from __future__ import annotations

import numpy as np

from explorer.analysis.stats import head_average
from explorer.mixing_text import rows_note
from explorer.trace import AttentionMaps
from pictures.attention_panels import scale_note, token_hover_names, token_labels, top_of, weight_ramp
from pictures.boards import matrix_panel, noted_board
from pictures.style import (
    BLUES,
    Ramp,
    noted,
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
TEXT_PX = 28.0  # values are written in cells at least this wide: "0.37" fits, and smaller would not read
# The one legend of a board whose maps share its colour scale names them all, not the map that draws it
BOTH_MAPS, ALL_THREE_MAPS = "value, both maps", "value, all 3 maps"


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

"""Mixing page: attention rollout and attention flow (Abnar & Zuidema 2020) beside the raw weights, after the last
block and block by block, and which input tokens reach one position."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer.ablation import Head, heads_text
from explorer.analysis.mixing import DEFAULT_RESIDUAL, mean_reaches_hidden, mixed_maps
from explorer.analysis.stats import head_average
from explorer.config import CheckpointConfig, ModelConfig
from explorer.mixing_export import last_block_label, mixing_table
from explorer.mixing_text import (
    board_caption,
    explanation,
    first_stack_note,
    flow_offered,
    flow_too_big,
    one_token_note,
    opening_query,
    piled_up_note,
    predicts_next,
    reach_sentence,
    removal_note,
    residual_help,
)
from explorer.trace import AttentionMaps, Trace
from pictures.attention_panels import token_labels
from pictures.mixing_boards import last_block_board, layer_board
from pictures.mixing_charts import flow_maps_figure, flow_row_figure, rollout_maps_figure
from views.matrix_view import picked_value, show_board
from views.query_params import URL_BOOLEAN, warn_junk_url
from views.state import sidebar_run, trace_maker, weights_note
from views.trace_caches import flow_of, rollout_later, rollout_of
from views.widgets import (
    clamp_view,
    code_text,
    download,
    model_line,
    plain,
    plotly_chart,
    stretch_toggle,
    view_download,
)

RESIDUALS = [round(0.1 * i, 1) for i in range(11)]  # the residual share's steps, 0 to 1
POSITION_PX = 160  # the position selector holds numbers only
RESIDUAL_PX = 320
BLOCK_PX = 480


def summary(cfg: ModelConfig, trace: Trace) -> str:
    return f"{model_line(cfg, trace)}. Eval mode, {weights_note()}."


def residual_choice(where: DeltaGenerator) -> float:
    """The residual share (in the URL as mix_residual), 0.5 unless changed."""
    return float(
        where.select_slider(
            "Residual share",
            options=RESIDUALS,
            value=DEFAULT_RESIDUAL,
            key="mix_residual",
            bind="query-params",
            help=residual_help(),
            width=RESIDUAL_PX,
        )
    )


def pick_query() -> None:
    """on_pick callback of the last block's maps: show the row of the cell clicked."""
    picked = picked_value("mix_last")
    if picked is not None:
        st.session_state["mix_query"] = int(picked["row"])


def csv_download(
    label: str,
    maps: AttentionMaps,
    queries: list[int],
    columns: dict,
    residual: float,
    name: str,
    key: str,
    removal: tuple[tuple[Head, ...], str],
    where: DeltaGenerator | None = None,
) -> None:
    """A CSV of mixing_table, built only when clicked: on copies of the `columns` ([T, T] each at most), since a
    view would keep the rollout it reads alive for as long as the button (views/state.py). `removal`: the run's
    (trace.ablated, trace.ablate_with), which the table names."""
    kept = {name: None if values is None else np.array(values) for name, values in columns.items()}
    table = partial(mixing_table, list(maps.key_tokens), queries, kept, residual, *removal)
    download(label, partial(mixing_csv, table, maps.kind), name, "text/csv", key, where)


def mixing_csv(table: Callable[[], pd.DataFrame], kind: str) -> str:
    """The CSV of `table()`; for an encoder-decoder (`kind` "encoder self-attention", not "self-attention") with a
    first column saying which attention rollout and flow follow, as the page says above the maps."""
    frame = table()
    if kind != "self-attention":
        frame.insert(0, "attention", kind)
    return frame.to_csv(index=False)


def last_block(
    maps: AttentionMaps, trace: Trace, rollout: np.ndarray, residual: float, unit: str, stretch: bool
) -> np.ndarray | None:
    """The last block's raw average, rollout and (when cheap enough) flow of every position, as one board (colours
    stretched or not); returns that flow ([T, T]) or None."""
    n_layers, n_tokens = maps.n_layers, len(maps.key_tokens)
    st.subheader("After the last block")
    flow = None
    if flow_offered(n_layers, n_tokens, None):
        flow = flow_of(trace, residual, tuple(range(n_tokens)))  # [T, T]
    st.caption(board_caption(flow is not None))
    show_board(last_block_board(maps, rollout, flow, residual, stretch), key="mix_last", on_pick=pick_query)
    labels = [code_text(t) for t in token_labels(maps.key_labels)]
    piled = (
        one_token_note(labels[0], float(rollout[-1, 0, 0]))
        if n_tokens == 1
        else piled_up_note(labels, rollout[-1], n_layers, flow)
    )
    if piled:
        st.caption(piled)
    if flow is None:
        st.info(flow_too_big(n_layers, n_tokens, unit, every_row=True), icon=":material/hourglass:")
    return flow


def reach(maps: AttentionMaps, trace: Trace, rollout: np.ndarray, flow: np.ndarray | None, residual: float, unit: str):
    """One position's rows as bars: raw, rollout and flow (its own row of flow when every row was too costly);
    returns (the position, its flow row or None)."""
    n_tokens = len(maps.key_tokens)
    positions = list(range(n_tokens))
    predicts = predicts_next([s.name for s in trace.stacks])
    st.subheader("Which input tokens reach the prediction" if predicts else "One position's row")
    clamp_view("mix_query", positions, "position")
    query = st.selectbox(
        "Position",
        positions,
        index=opening_query(n_tokens, predicts),
        key="mix_query",
        bind="query-params",
        help="The position whose row is drawn: 0 is the first token. Clicking a cell of the maps above picks its row.",
        width=POSITION_PX,
    )
    row = None
    if flow is not None:
        row = flow[query]
    elif flow_offered(maps.n_layers, n_tokens, 1):
        row = flow_of(trace, residual, (query,))[0]  # [T]
    else:
        st.info(flow_too_big(maps.n_layers, n_tokens, unit, every_row=False), icon=":material/hourglass:")
    raw = head_average(maps, maps.n_layers - 1)[query]  # [T]
    st.markdown(
        reach_sentence([code_text(t) for t in token_labels(maps.key_labels)], query, raw, rollout[-1, query], row)
    )
    plotly_chart(flow_row_figure(maps, rollout, row, query, residual, predicts), "mix_reach")
    return query, row


def block_caption(layer: int) -> str:
    """What rollout after block `layer` is: block 0's is its own mixing alone, with nothing yet to multiply."""
    raw_map = "The map titled Raw is the average of that block's heads alone."  # beside it, or above it on a phone
    if layer == 0:
        return (
            "Rollout after block 0 is block 0's own mixing matrix Ã, with no block before it to multiply: by this "
            f"estimate, how the input tokens spread through the positions in one block. {raw_map}"
        )
    return (
        f"Rollout after block {layer} multiplies the mixing of blocks 0 to {layer}: by this estimate, how the input "
        f"tokens spread through the positions as the blocks stack up. {raw_map}"
    )


def block_by_block(
    maps: AttentionMaps, rollout: np.ndarray, residual: float, stretch: bool, removal: tuple[tuple[Head, ...], str]
) -> int:
    """A block slider (mix_layer in the URL) and rollout after that block beside its raw average; returns the block.
    `removal` as csv_download takes it."""
    st.subheader("Block by block")
    blocks = list(range(maps.n_layers))
    clamp_view("mix_layer", blocks, "block")
    if len(blocks) == 1:
        layer = 0
    else:
        layer = st.slider("Block", 0, blocks[-1], blocks[-1], key="mix_layer", bind="query-params", width=BLOCK_PX)
    st.caption(block_caption(layer))
    show_board(layer_board(maps, rollout, layer, residual, stretch), key="mix_layer_board")
    everyone = list(range(len(maps.key_tokens)))
    csv_download(
        f"Rollout after block {layer} (CSV)",
        maps,
        everyone,
        {"raw_average": head_average(maps, layer), "rollout": rollout[layer]},
        residual,
        f"rollout_block{layer}.csv",
        "mix_csv_layer",
        removal,
    )
    return layer


def mixing_figures(
    make_trace: Callable[[], Trace],
    make_rollout: Callable[[], np.ndarray],
    flow: np.ndarray | None,
    layer: int,
    query: int,
    row: np.ndarray | None,
    residual: float,
    stretch: bool,
) -> list:
    """The view as Plotly figures (pictures.mixing_charts' notebook builders), made on the click: the maps and the
    rollout from their makers, `flow` ([T, T], this session's copy) and its `row` ([T]) as computed, the maps'
    colours `stretch`ed as the page's."""
    trace = make_trace()
    maps, rollout = mixed_maps(trace), make_rollout()
    predicts = predicts_next([s.name for s in trace.stacks])
    figures = [rollout_maps_figure(maps, rollout, None, residual, stretch)]
    if flow is not None:
        figures.append(flow_maps_figure(maps, rollout, flow, residual, stretch))
    figures.append(flow_row_figure(maps, rollout, row, query, residual, predicts))
    if layer != maps.n_layers - 1:
        figures.append(rollout_maps_figure(maps, rollout, layer, residual, stretch))
    return figures


def main() -> None:
    st.title("Mixing: rollout and flow")
    run = sidebar_run("Fix the setting named above (in the sidebar) to see how tokens mix.")
    if run is None:
        return
    cfg, trace = run
    st.caption(summary(cfg, trace))
    allowed = {
        "mix_residual": [str(r) for r in RESIDUALS],
        "mix_layer": None,
        "mix_query": None,
        "stretch": URL_BOOLEAN,
    }
    warn_junk_url(allowed)
    maps = mixed_maps(trace)  # a removed head as it acted: the A of rollout and flow, in the raw maps too
    unit = "piece" if isinstance(cfg, CheckpointConfig) else "token"
    controls = st.container(horizontal=True, vertical_alignment="bottom")
    residual = residual_choice(controls)
    stretch = stretch_toggle(controls)
    st.markdown(explanation(residual))
    if trace.ablated:
        note = removal_note(heads_text(trace.ablated), trace.ablate_with, residual, mean_reaches_hidden(trace))
        st.info(note, icon=":material/content_cut:")
    stack_note = first_stack_note([s.name for s in trace.stacks])
    if stack_note:
        st.info(stack_note, icon=":material/layers:")
    rollout = rollout_of(trace, residual)  # [L, T, T]
    flow = last_block(maps, trace, rollout, residual, unit, stretch)
    query, row = reach(maps, trace, rollout, flow, residual, unit)
    removal = (trace.ablated, trace.ablate_with)
    layer = block_by_block(maps, rollout, residual, stretch, removal)
    last = maps.n_layers - 1
    everyone = list(range(len(maps.key_tokens)))
    csv_download(
        last_block_label(flow is not None),
        maps,
        everyone,
        {"raw_average": head_average(maps, last), "rollout": rollout[last], "flow": flow},
        residual,
        "mixing_last_block.csv",
        "mix_csv",
        removal,
        controls,
    )
    view_download(
        "Mixing",
        [plain(summary(cfg, trace)), f"Residual share {residual:g}."] + ([plain(stack_note)] if stack_note else []),
        partial(mixing_figures, trace_maker(), rollout_later(residual), flow, layer, query, row, residual, stretch),
        "mixing",
        controls,
    )


main()

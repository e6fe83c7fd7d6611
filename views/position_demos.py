"""The Positional encodings page's two demonstrations below its first screen, each drawn in its own section: one
head's scores when a token fills every position (does a score depend on the offset alone?), and a reordering of the
typed tokens (does the model see order, or do its maps only move?)."""

from __future__ import annotations

import streamlit as st

from explorer.analysis.position_analysis import REORDERINGS, offset_scores, offset_token, reorder
from explorer.config import ModelConfig
from explorer.numbers import readable_share
from explorer.positional_text import order_finding, token_line
from explorer.trace import byte_level_pieces, token_axis_labels
from pictures.position_demo_charts import (
    offset_profile_figure,
    offset_scores_panel,
    offset_verdict,
    permutation_figure,
    permutation_verdict,
)
from views.caches import cached_permutation, cached_repeated_scores, from_model
from views.matrix_view import show_board
from views.state import app_state, session_model, trained_weights
from views.widgets import clamp_view, plotly_chart, stretch_toggle

OFFSET_POSITIONS = 48  # positions in the offset demonstration (a repeated token)


def layer_head(cfg: ModelConfig, prefix: str) -> tuple[int, int]:
    left, right, _ = st.columns([1, 1, 2])
    layers, heads = list(range(cfg.n_layers)), list(range(cfg.n_heads))
    clamp_view(f"{prefix}_layer", layers, "layer")
    clamp_view(f"{prefix}_head", heads, "head")
    layer = left.selectbox("Layer", layers, key=f"{prefix}_layer", bind="query-params")
    head = right.selectbox("Head", heads, key=f"{prefix}_head", bind="query-params")
    return int(layer), int(head)


def offset_demo(cfg: ModelConfig, typed: tuple[str, ...]) -> None:
    """The scores of one head when the same token fills every position (the first `typed` token that is not
    padding): only position can make them differ."""
    model = session_model()
    tokenizer = model.tokenizer
    token = offset_token(typed, tokenizer.special_pieces if tokenizer is not None else ())
    [label] = token_axis_labels([token], byte_level_pieces(model))  # SmolLM2's "Ġthe" as the maps write it: "␣the"
    layer, head = layer_head(cfg, "pos_offset")
    n = min(OFFSET_POSITIONS, cfg.max_tokens)
    result = offset_scores(cfg, token, n, layer, head, scores=from_model(cached_repeated_scores, cfg, token, n))
    st.markdown(f"**{offset_verdict(result, cfg.positional, label)}**")
    # One under the other: side by side, on a 1024 px screen, the map was drawn at half its size (6 px labels)
    show_board(offset_scores_panel(result), key="pos_offset_scores")
    plotly_chart(offset_profile_figure(result), "pos_offset_profile")
    explanation = {
        "rope": "With rope every diagonal (a fixed offset between query and key) holds one value, up to float32 "
        "rounding: shifting both tokens by the same number of positions leaves their score alone.",
        "sinusoidal": "With added sinusoids the score mixes content and absolute position (q·k expands into "
        "token·token, token·position and position·position terms), so the diagonals are not constant.",
        "learned": f"With learned (here: {'trained' if trained_weights(cfg) else 'random'}) rows added, the score "
        "depends on the exact positions of both tokens, so the diagonals are not constant.",
        "none": "Without positions every query and key is the same vector: all scores are equal, whatever the offset.",
    }[cfg.positional]
    st.caption(
        f"The typed token `{label.replace('`', '')[:30]}` repeated {n} times, so the content is identical. "
        + explanation
    )


def order_demo(cfg: ModelConfig, typed: tuple[str, ...], target: tuple[str, ...] | None) -> None:
    """Run the `typed` tokens (with an encoder-decoder's `target`) and a reordering of them: with no position
    anywhere, the maps only move."""
    tokens = list(typed)
    controls = st.container(horizontal=True, vertical_alignment="bottom")
    how = controls.radio(
        "Reordering",
        REORDERINGS,
        key="pos_order",
        bind="query-params",
        horizontal=True,
        help="shuffled uses the sidebar's seed.",
    )
    stretch = stretch_toggle(controls, key="pos_order_stretch")  # the table's switch is in another section
    if len(tokens) < 2:
        st.info("Type at least two tokens to reorder them.")
        return
    order = reorder(len(tokens), how, cfg.seed)
    # The page's own run, when it has every head: then only the reordered tokens are run here. With heads removed
    # the demo runs the typed tokens itself (its model has every head), rather than holding a second trace.
    state = app_state()
    typed_maps = state.trace.first.self_attention if state.base_run is None and state.trace is not None else None
    demo = from_model(cached_permutation, cfg, tuple(tokens), tuple(order), target, _typed=typed_maps)
    st.markdown(
        f"Typed: `{token_line(demo.labels).replace('`', '')}`  →  reordered: "  # as the maps' axes write them
        f"`{token_line(demo.shuffled_labels).replace('`', '')}`"
        + (" (the encoder's input; the decoder keeps its target)" if target else "")
    )
    layer, head = layer_head(cfg, "pos_perm")
    st.markdown(f"**{permutation_verdict(demo, layer, head)}**")
    show_board(permutation_figure(demo, layer, head, stretch), key="pos_permutation")
    row = st.container(horizontal=True)  # the metric as wide as its label, which a column cut on a projector
    row.metric(
        "Largest |② − ③|, all heads",
        readable_share(demo.max_difference),
        help="The maximum absolute difference between the map of the reordered run (③) and the original map "
        "moved along with its tokens (②), over every layer, head, query and key.",
        width="content",
    )
    kind, finding = order_finding(cfg, demo)
    if kind == "moved":
        row.success(finding, icon=":material/check_circle:")
    elif kind == "blind":
        row.info(finding, icon=":material/info:")
    else:
        row.warning(finding, icon=":material/swap_horiz:")

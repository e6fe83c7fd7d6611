"""Activations page, per token: where the stream's energy sits, and the heads' share of the token with the massive
(or largest) activation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from explorer.activations_text import energy_text
from explorer.analysis.stream_energy import MEASURES, focus_token, largest_activation, massive_activation, token_energy
from explorer.config import ModelConfig
from explorer.trace import StackTrace, Trace
from pictures.activation_charts import shares_of, token_norm_heatmap, token_share_figure
from pictures.attention_panels import spelled_names
from views.matrix_view import show_board
from views.trace_caches import norm_attention_of
from views.widgets import csv_button, markdown_literal, plotly_chart, stretch_toggle

STRETCH_HELP = (
    "Off: the brightest colour = the largest value of the table. On: brightest = the top 1 % of values, so a massive "
    "activation (one token far larger than the rest, as in SmolLM2) does not leave every other cell dark."
)


def energy_choice() -> str:
    """How the per-token heatmap measures each token's residual vector: "norm" or "max" (URL key act_energy)."""
    return st.radio(
        "Measure each token's residual vector by",
        MEASURES,
        key="act_energy",
        bind="query-params",
        horizontal=True,
        captions=["its length, ‖x‖₂", "its largest value, max |x|"],
        help="max |x| shows a massive activation (one huge value in one unit) that the norm spreads over the whole "
        "vector.",
    )


def per_token(cfg: ModelConfig, trace: Trace, stack: StackTrace) -> tuple[str, bool]:
    """The per-token heatmap (returns the measure picked for it and whether its colours are stretched), then the
    massive activation section."""
    measure = energy_choice()
    stretch = stretch_toggle(st, STRETCH_HELP)
    norms, peaks = token_energy(stack, "norm"), token_energy(stack, "max")  # [L + 1, T] each
    shown = norms if measure == "norm" else peaks
    hover = spelled_names(stack.tokens, stack.self_attention.byte_level)
    heatmap = token_norm_heatmap(shown, stack.labels, stack.name, cfg.positional, measure, stretch, hover)
    show_board(heatmap, key="act_token_norms")
    frame = pd.DataFrame(
        {
            "layer": np.repeat(np.arange(-1, norms.shape[0] - 1), norms.shape[1]),
            "token_index": np.tile(np.arange(norms.shape[1]), norms.shape[0]),
            "token": np.tile(np.asarray(stack.tokens, dtype=object), norms.shape[0]),
            "norm": norms.ravel(),
            "max_abs": peaks.ravel(),
        }
    )
    csv_button("Token norms and max |x| (CSV)", frame, f"activations_{stack.name}_token_norms.csv", "act_csv_norms")
    massive_section(cfg, trace, stack)
    return measure, stretch


def massive_section(cfg: ModelConfig, trace: Trace, stack: StackTrace) -> None:
    """The token with a massive activation (or why there is none) and, per layer, its share of the heads' weight
    and of what they add."""
    position, block = focus_token(stack)
    shares, averaged = shares_of(trace, stack, position, norm_attention_of(trace, stack.self_attention.kind))
    literal = [markdown_literal(label) for label in stack.labels]  # a token "$ab$" is text, not math
    text = energy_text(cfg.norm, massive_activation(stack), largest_activation(stack), literal, shares)
    st.info(text, icon=":material/bolt:")
    if np.isfinite(shares["weights"]).any():  # else no query may see the token, as the text says: no line to draw
        figure = token_share_figure(shares, position, stack.labels[position], block, stack.name, averaged)
        plotly_chart(figure, "act_massive_shares")
    name = f"activations_{stack.name}_token_shares.csv"
    csv_button("Shares per layer (CSV)", shares_file(shares, stack, position), name, "act_csv_shares")


def shares_file(shares: pd.DataFrame, stack: StackTrace, position: int) -> pd.DataFrame:
    """token_shares as its CSV: which token the shares are of, and columns named by what they measure (the file had
    said only "weights" and "norms")."""
    named = shares.rename(columns={"weights": "share_of_attention_weight", "norms": "share_of_what_heads_add"})
    named.insert(1, "position", position)
    named.insert(2, "token", stack.tokens[position])
    return named

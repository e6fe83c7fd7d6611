"""Activations page, the values themselves: their histogram at one point of one block, and the feed-forward units
that are exactly zero."""

from __future__ import annotations

import numpy as np
import streamlit as st

from explorer.activations_text import pad_words, sublayer_outputs_text
from explorer.analysis.activations import activation_values, ffn_zero_fraction, points, value_histogram
from explorer.config import ModelConfig
from explorer.config_words import count
from explorer.numbers import percent, readable
from explorer.trace import StackTrace
from pictures.activation_histograms import histogram_figure, zero_fraction_figure
from views.widgets import NUMBER_SELECT_PX, clamp_view, csv_button, plotly_chart, settle_choice

POINT_SELECT_PX = 230  # the histogram's point selector: "cross-attention output" whole


def histogram(cfg: ModelConfig, stack: StackTrace) -> None:
    options = points(stack)
    controls = st.container(horizontal=True, vertical_alignment="bottom")  # wraps: no label is cut at 1024 px
    blocks = list(range(cfg.n_layers))
    clamp_view("act_layer", blocks, "block")
    layer = controls.selectbox("Block", blocks, key="act_layer", bind="query-params", width=NUMBER_SELECT_PX)
    outputs = sublayer_outputs_text("blocks.0.attn.out_ln_out" in stack.activations)  # res-post, peri: f(x) first
    settle_choice("act_point", options)  # the points differ between an encoder-decoder's two stacks
    point = controls.selectbox(
        "Point",
        options,
        key="act_point",
        bind="query-params",
        width=POINT_SELECT_PX,
        help=f"residual: the stream after the block. {outputs[0].upper()}{outputs[1:]}. FFN hidden: after the "
        "activation function, inside the feed-forward sub-layer.",
    )
    log_count = controls.toggle("Log count axis", key="act_log", bind="query-params")
    values = activation_values(stack, int(layer), point)  # [T, width]
    bins = value_histogram(values)
    zeros = int(bins["exact_zeros"].iloc[0])
    summary_text = (
        f"{values.size:,} values ({count(values.shape[0], 'token')}{pad_words(stack.tokens)} × "
        f"{count(values.shape[1], 'unit')}) · "
        f"mean {readable(float(values.mean(dtype=np.float64)))} · "
        f"std {readable(float(values.std(dtype=np.float64)))} · "
        f"{percent(zeros / values.size)} exactly 0"
    )
    what = f"{point}, block {layer} ({stack.name} stack)"
    plotly_chart(histogram_figure(bins, what, summary_text, log_count), "act_histogram")
    csv_button(
        "Histogram bins (CSV)",
        bins,
        f"activations_{stack.name}_L{layer}_{point.replace(' ', '-')}.csv",
        "act_csv_histogram",
    )


def relu_zeros(cfg: ModelConfig, stack: StackTrace) -> None:
    zeros = ffn_zero_fraction(stack)
    plotly_chart(zero_fraction_figure(zeros, stack.name, cfg.activation), "act_zeros")
    csv_button("Zero fractions (CSV)", zeros, f"activations_{stack.name}_ffn_zeros.csv", "act_csv_zeros")

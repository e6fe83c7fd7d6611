"""Activations page: statistics per layer, per token and per head, a histogram at one point, and gradient norms.
The statistics over depth are the first screen; every other section is an expander built when opened (its URL
parameter, act_open_<section>=true, opens it in a link: views/lazy_sections.py). Each section is drawn by a
views/activation_*.py of its own; this file lays the page out and builds its download."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial

import streamlit as st

from explorer.analysis.activations import points
from explorer.analysis.stream_energy import MEASURES
from explorer.config import ConfigError, ModelConfig
from explorer.config_words import count
from explorer.model import Transformer
from explorer.trace import StackTrace, Trace
from pictures import notebook_figures
from pictures.activation_charts import massive_share_figure, token_norm_figure
from views.activation_depth import depth
from views.activation_gradients import gradients
from views.activation_heads import per_head
from views.activation_tokens import per_token
from views.activation_values import histogram, relu_zeros
from views.lazy_sections import lazy_section
from views.query_params import URL_BOOLEAN, warn_junk_url
from views.state import session_model, shown_run, sidebar_run, trace_maker, weights_note
from views.widgets import model_line, plain, view_download

# The sections below the first screen: each one's URL parameter (=true opens it in a link) and the URL parameters of
# its own controls, any of which opens it too (views/lazy_sections.py).
SECTIONS = {
    "act_open_norms": (),
    "act_open_tokens": ("act_energy",),
    "act_open_histogram": ("act_layer", "act_point", "act_log"),
    "act_open_zeros": (),
    "act_open_heads": ("act_heads_table",),
    "act_open_gradients": ("act_grads_table",),
}


def summary(cfg: ModelConfig, trace: Trace) -> str:
    return f"{model_line(cfg, trace, bold=('norm',))}. Eval mode, {weights_note()}."


def pick_stack(trace: Trace) -> StackTrace:
    """The encoder or the decoder of an encoder-decoder (a radio bound to the URL); the only stack otherwise."""
    if len(trace.stacks) == 1:
        return trace.first
    names = [s.name for s in trace.stacks]
    name = st.radio(
        "Stack shown",
        names,
        key="act_stack",
        bind="query-params",
        horizontal=True,
        help="An encoder-decoder has two stacks of blocks; every chart below shows the one picked here.",
    )
    return trace.stacks[names.index(name)]


def shown_stack(name: str) -> StackTrace:
    """The shown trace's stack `name`, read when a section draws (views/state.shown_run)."""
    return next(stack for stack in shown_run()[1].stacks if stack.name == name)


def activation_figures(make_trace: Callable[[], Trace], model: Transformer, measure: str, stretch: bool) -> list:
    """The view as Plotly figures, made on the click from the trace's maker: statistics over depth, each token's
    norm or max |x| (colours stretched as on the page) and the shares on the token with the massive (or largest)
    activation, and the gradient norms when there are tokens to predict."""
    trace = make_trace()
    figures = []
    for i in range(len(trace.stacks)):
        figures += [
            notebook_figures.depth_figure(trace, i),
            token_norm_figure(trace, measure, i, stretch),
            massive_share_figure(model, trace, i),
        ]
    with contextlib.suppress(ConfigError):  # too few tokens to predict: the page says so in its own section
        figures.append(notebook_figures.gradient_figure(model, list(trace.tokens), trace.target_tokens))
    return figures


def main() -> None:
    st.title("Activations")
    run = sidebar_run("Fix the setting named above (in the sidebar) to see the activations.")
    if run is None:
        return
    cfg, trace = run
    st.caption(summary(cfg, trace))
    allowed = {
        "act_layer": None,  # a whole number out of range shows the nearest block, and says so (histogram)
        "act_point": list(points(trace.last)),  # the decoder's points include the encoder's
        "act_log": ["true", "false"],
        "act_energy": list(MEASURES),
        **dict.fromkeys(("act_stats_table", "act_heads_table", "act_grads_table"), URL_BOOLEAN),
        "stretch": URL_BOOLEAN,
        **dict.fromkeys(SECTIONS, URL_BOOLEAN),
    }
    if len(trace.stacks) > 1:
        allowed["act_stack"] = [s.name for s in trace.stacks]
    warn_junk_url(allowed)
    stack = pick_stack(trace)
    if len(trace.stacks) > 1:
        st.caption(f"Every chart below shows the **{stack.name}** stack ({count(len(stack.tokens), 'token')}).")
    download_slot = st.container()  # at the top, filled once the per-token measure is known
    depth(cfg, stack)
    picked = lazy_section(
        "**Per token: where the stream's energy sits**, and the heads' share of the token with the largest value",
        "act_open_tokens",
        partial(per_token, cfg, trace, stack),
        SECTIONS["act_open_tokens"],
        fragment=False,  # the download above takes the measure and the colours picked in it
    )
    view_download(
        "Activations",
        [plain(summary(cfg, trace))],
        partial(activation_figures, trace_maker(), session_model(), *(picked or (MEASURES[0], False))),
        "activations",
        download_slot,
    )
    name = stack.name  # each section finds its stack when it draws (views/state.py: fragments hold no trace)
    sections = {
        "act_open_histogram": (
            "**Distribution of values at one point**: a histogram",
            lambda: histogram(cfg, shown_stack(name)),
        ),
        "act_open_zeros": (
            "**Feed-forward units that are exactly zero**, block by block",
            lambda: relu_zeros(cfg, shown_stack(name)),
        ),
        "act_open_heads": (
            "**Per head**: entropy, mean distance and sparsity of every head",
            lambda: per_head(shown_stack(name)),
        ),
        "act_open_gradients": (
            "**Gradient norms per layer**: how much each block's weights would change",
            lambda: gradients(cfg, shown_run()[1], shown_stack(name)),
        ),
    }
    for key, (label, draw) in sections.items():
        lazy_section(label, key, draw, SECTIONS[key])


main()

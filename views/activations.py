"""Activations page: statistics per layer, per token and per head, a histogram at one point, and gradient norms.
The statistics over depth are the first screen; every other section is an expander built when opened (its URL
parameter, act_open_<section>=true, opens it in a link: views/lazy_sections.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

from explorer.ablation import heads_text
from explorer.activations_text import (
    energy_text,
    head_stats_caption,
    pad_words,
    sublayer_outputs_text,
)
from explorer.analysis.activations import (
    activation_values,
    depth_story,
    ffn_zero_fraction,
    layer_statistics,
    points,
    value_histogram,
)
from explorer.analysis.gradients import layer_gradient_totals, objective_text
from explorer.analysis.stats import COVERED_MASS, head_entropy, head_grid, head_mean_distance, head_sparsity
from explorer.analysis.stream_energy import (
    MEASURES,
    focus_token,
    largest_activation,
    massive_activation,
    padding_queries_counted,
    token_energy,
)
from explorer.anatomy import norm_name
from explorer.config import PAD_TOKEN, CheckpointConfig, ConfigError, ModelConfig
from explorer.config_words import count
from explorer.model import Transformer
from explorer.numbers import percent, readable
from explorer.positional import input_text
from explorer.trace import StackTrace, Trace
from pictures import notebook_figures
from pictures.activation_boards import CIVIDIS, gradient_heatmap, head_grid_panel
from pictures.activation_charts import (
    NORM_POINT,
    depth_figure,
    gradient_totals_figure,
    massive_share_figure,
    norm_figure,
    shares_of,
    token_norm_figure,
    token_norm_heatmap,
    token_share_figure,
)
from pictures.activation_histograms import histogram_figure, zero_fraction_figure
from pictures.attention_panels import spelled_names
from pictures.boards import board
from pictures.style import VIRIDIS
from views.caches import cached_gradients, from_model
from views.lazy_sections import lazy_section
from views.matrix_view import show_board
from views.query_params import URL_BOOLEAN, warn_junk_url
from views.state import session_model, shown_run, sidebar_run, trace_maker, trained_label, weights_note
from views.trace_caches import norm_attention_of
from views.widgets import (
    ENTROPY_COLUMNS,
    NUMBER_SELECT_PX,
    clamp_view,
    csv_button,
    markdown_literal,
    model_line,
    plain,
    plotly_chart,
    settle_choice,
    stretch_toggle,
    view_download,
)

NUMBER = st.column_config.NumberColumn(format="%.5g")
POINT_SELECT_PX = 230  # the histogram's point selector: "cross-attention output" whole
# The sections below the first screen: each one's URL parameter (=true opens it in a link) and the URL parameters of
# its own controls, any of which opens it too (views/lazy_sections.py).
STRETCH_HELP = (
    "Off: the brightest colour = the largest value of the table. On: brightest = the top 1 % of values, so a massive "
    "activation (one token far larger than the rest, as in SmolLM2) does not leave every other cell dark."
)
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


def named_norms(stats: pd.DataFrame, name: str) -> pd.DataFrame:
    """layer_statistics with each norm's points named for the model's norm ("attn RMSNorm in" for a Llama)."""
    return stats.assign(point=stats["point"].str.replace(NORM_POINT, name, regex=False))


def depth(cfg: ModelConfig, stack: StackTrace) -> None:
    st.subheader("Over depth: the residual stream and each sub-layer")
    stats = layer_statistics(stack)
    st.info(depth_story(stats, cfg.norm, norm_name(cfg)), icon=":material/insights:")
    family = getattr(cfg, "family", None)  # a BERT checkpoint's input row is normalised (input_text)
    padded = PAD_TOKEN in stack.tokens  # their rows are in the statistics, and the subtitle says so
    plotly_chart(depth_figure(stats, stack.name, cfg.positional, family, padded), "act_depth")
    named = named_norms(stats, norm_name(cfg))
    if st.toggle(
        f"Show the statistics table (layer -1 is the input: {input_text(cfg.positional, family)})",
        key="act_stats_table",
        bind="query-params",
    ):
        st.dataframe(
            named,
            hide_index=True,
            column_config={c: NUMBER for c in ("mean", "std", "rms", "max_abs")},
            height=min(420, 38 + 35 * len(named)),
        )
    csv_button("Statistics (CSV)", named, f"activations_{stack.name}_statistics.csv", "act_csv_stats")
    name = stack.name  # not the stack: a fragment's arguments must not hold the trace (views/state.py)
    lazy_section(
        "**What each norm receives and returns**, block by block",  # one label for every model (lazy_sections)
        "act_open_norms",
        lambda: plotly_chart(norm_figure(stats, name, cfg.norm, norm_name(cfg)), "act_norms"),
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


def per_head(stack: StackTrace) -> None:
    maps = stack.self_attention
    if not maps.allowed.any():  # every token [PAD] with a padding mask: no query may attend, nothing to average
        st.info(f"No query of the {stack.name} stack has an allowed key: there is no attention to describe.")
        return
    entropy, distance, sparsity = head_entropy(maps), head_mean_distance(maps), head_sparsity(maps)
    uniform_entropy = float(entropy["max_entropy"].iloc[0])
    uniform_distance = float(distance["uniform_distance"].iloc[0])
    padded = padding_queries_counted(maps)
    st.caption(head_stats_caption(maps.kind, stack.name, uniform_entropy, uniform_distance, padded))
    entropy_note = f"uniform = {uniform_entropy:.2f}" if uniform_entropy > 0 else "one key per query: all 0"
    grids = [
        (entropy, "entropy", "Entropy (nats)", entropy_note, "nats", uniform_entropy, VIRIDIS),
        (
            distance,
            "distance",
            "Mean distance (positions)",
            f"uniform = {uniform_distance:.2f}",
            "positions",
            None,
            VIRIDIS,
        ),
        (sparsity, "sparsity", "Sparsity", f"keys dropped keeping {COVERED_MASS:.0%}", "sparsity", 1.0, CIVIDIS),
    ]
    panels = []
    for frame, name, title, subtitle, unit, top, colours in grids:
        grid = head_grid(frame, name)
        if top is None or not np.isfinite(top):
            top = max(float(np.nanmax(grid)) if np.isfinite(grid).any() else 1.0, uniform_distance)
        panels.append(head_grid_panel(grid, title, subtitle, unit, 0.0, top, colours=colours, name=f"act_{name}"))
    show_board(board(panels), key="act_heads")
    table = entropy.merge(distance, on=["layer", "head"]).merge(sparsity, on=["layer", "head"])
    if st.toggle(
        "Show the per-head table",
        key="act_heads_table",
        bind="query-params",
        help="Every statistic of every head, sortable.",
    ):
        st.dataframe(
            table,
            hide_index=True,
            column_config={
                **ENTROPY_COLUMNS,
                "distance": st.column_config.NumberColumn("mean distance", format="%.3f"),
                "uniform_distance": st.column_config.NumberColumn("uniform distance", format="%.3f"),
                "keys_for_mass": st.column_config.NumberColumn(f"keys for {COVERED_MASS:.0%}", format="%.2f"),
                "allowed_keys": st.column_config.NumberColumn("allowed keys", format="%.2f"),
                "sparsity": st.column_config.NumberColumn("sparsity", format="%.3f"),
            },
        )
    csv_button("Per-head statistics (CSV)", table, f"activations_{stack.name}_heads.csv", "act_csv_heads")


def gradients(cfg: ModelConfig, trace: Trace, stack: StackTrace) -> None:
    st.info(objective_text(session_model()), icon=":material/function:")
    if trace.ablated:  # the backward pass runs the model whole (cached_gradients takes no removal)
        st.caption(
            f"These gradients are the whole model's: the {'encoder ' if cfg.reads_target else ''}heads "
            f"removed elsewhere on this page ({heads_text(trace.ablated)}) take part in this backward pass."
        )
    target = trace.target_tokens
    try:
        norms = from_model(cached_gradients, cfg, tuple(trace.tokens), target)
    except ConfigError as e:
        st.warning(str(e), icon=":material/warning:")
        return
    totals = layer_gradient_totals(norms)
    plotly_chart(gradient_totals_figure(totals, cfg.norm), "act_grad_totals")
    trend = "; ".join(
        f"{name} blocks: {part['norm'].iloc[0]:.3g} (block 0) → {part['norm'].iloc[-1]:.3g} (block "
        f"{int(part['layer'].iloc[-1])})"
        for name, part in totals.groupby("stack", sort=False)
    )
    if isinstance(cfg, CheckpointConfig):
        st.caption(
            f"Here, {cfg.norm}-norm: {trend}. These are real pretrained weights, so Xiong et al.'s (2020) finding "
            "about post- and pre-norm at initialisation does not apply to them. To see a real post-norm and a real "
            "pre-norm stream side by side, open Compare with B = the other checkpoint."
        )
    elif trained_label() is None:
        st.caption(
            f"Here, {cfg.norm}-norm: {trend}. Xiong et al. (2020) found that at initialisation, with "
            "Xavier-initialised weights, a post-norm transformer's gradients grow towards the output layers (one "
            "reason it needs a learning-rate warm-up) while pre-norm keeps them level or shrinking. This model uses "
            "PyTorch's default initialisation and a toy objective, so it need not reproduce their figure: switch the "
            "norm setting in the sidebar to compare the placements on the same weights and tokens (Compare draws all "
            "four at once)."
        )
    else:
        st.caption(
            f"Here, {cfg.norm}-norm: {trend}. These are trained weights, not an initialisation, so Xiong et al.'s "
            "(2020) finding about post-norm and pre-norm at initialisation does not apply to them; the sidebar's norm "
            "setting does not change this model. Train the placements together on the Train page to compare them."
        )
    show_board(gradient_heatmap(norms, stack.name), key="act_grad_heatmap")
    outside = norms[norms["layer"].isna()]
    if len(outside):
        names = ", ".join(f"{p} ({n:.3g})" for p, n in zip(outside["parameter"], outside["norm"], strict=True))
        st.caption(f"Outside the blocks: {names}.")
    if st.toggle("Show the gradient table (every parameter tensor)", key="act_grads_table", bind="query-params"):
        st.dataframe(norms, hide_index=True, column_config={"norm": NUMBER})
    with st.container(horizontal=True):  # each button as wide as its label, which columns cut on a projector
        csv_button("Every parameter (CSV)", norms, "gradients_parameters.csv", "act_csv_grads")
        csv_button("Block totals (CSV)", totals, "gradients_blocks.csv", "act_csv_grad_totals")


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

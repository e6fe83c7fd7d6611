"""Anatomy page: every step from tokens to output with its shape, parameter counts, multiply-adds, a block diagram."""

from __future__ import annotations

from functools import partial

import streamlit as st

from explorer.anatomy import block_diagram, forward_steps, kv_heads, multiply_adds, norm_name, parameter_groups
from explorer.config import CheckpointConfig, ModelConfig
from explorer.config_words import count
from explorer.model import Transformer
from explorer.norm_words import placement_sentence
from explorer.numbers import percent
from explorer.pretrained import pretrained_title
from explorer.trace import Trace
from pictures import notebook_figures
from views.caches import cached_parameter_counts, from_model
from views.state import session_model, sidebar_run
from views.widgets import csv_button, model_line, plain, static_table, view_download


def lengths(trace: Trace) -> tuple[int, int | None]:
    """(source or input length, target length for an encoder-decoder)."""
    target = trace.target_tokens
    return len(trace.tokens), (None if target is None else len(target))


def read_out_size(model: Transformer) -> int | None:
    """The size of the vocabulary the model's read-out to logits covers, or None without a read-out."""
    return None if model.head is None else int(model.head.out_features)


def steps(cfg: ModelConfig, trace: Trace) -> None:
    st.subheader("From tokens to output, step by step")
    n_source, n_target = lengths(trace)
    if n_target is None:
        letters = f"T = {count(n_source, 'token')}"
    else:
        letters = f"S = {count(n_source, 'source token')}, T = {count(n_target, 'target token')}"
    grouped = f", kv_heads = {kv_heads(cfg)}" if kv_heads(cfg) != cfg.n_heads else ""
    st.caption(
        f"Shapes in letters and in numbers for this input ({letters}, d_model = {cfg.d_model}, heads = "
        f"{cfg.n_heads}{grouped}, d_head = {cfg.d_head}, d_ff = {cfg.d_ff}). Rows marked “block × {cfg.n_layers}” "
        "run once in each block."
    )
    table = forward_steps(cfg, n_source, n_target, read_out_size(session_model()))
    static_table(table, labels={"size": "size for this input"})
    csv_button("Steps (CSV)", table, "anatomy_steps.csv", "ana_csv_steps")


def embedding_note(cfg: ModelConfig) -> str:
    """Which of the numbers that turn tokens into vectors are parameters, and so counted."""
    if isinstance(cfg, CheckpointConfig):
        if cfg.family == "bert":
            read_out = (
                "the checkpoint's pooler (d_model² + d_model, for sentence classification) is not loaded, as no page "
                "uses it"
            )
        elif cfg.tie_embeddings:
            read_out = "its read-out to token logits is that same table (tied), counted once"
        else:
            read_out = "its read-out to token logits is a table of its own (lm_head, vocabulary × d_model), counted"
        positions = "the learned position table is counted" if cfg.positional == "learned" else "rope is computed"
        title = pretrained_title(cfg.checkpoint)
        return f"{title}'s own weights: its token embedding table is counted; {read_out}; {positions}."
    if session_model().embedding is not None:
        tokens = "This trained model's token embedding and its read-out to token logits are learned: both are counted"
    else:
        tokens = "Token embeddings are fixed hashed vectors here, not parameters"
    positions = {
        "learned": "the learned position table is counted",
        "sinusoidal": "the sinusoidal table is computed, not learned",
        "rope": "rope's rotations are computed, not learned",
        "none": "there are no positions",
    }[cfg.positional]
    return f"{tokens}; {positions}."


def parameter_summary(cfg: ModelConfig) -> None:
    """Totals and the parameters by kind of module."""
    st.subheader("Parameters")
    counts = from_model(cached_parameter_counts, cfg)
    groups = parameter_groups(counts, norm_name(cfg))
    stacks = ["encoder", "decoder"] if cfg.reads_target else [cfg.arch]
    metrics = [("Total parameters", int(counts["parameters"].sum()), "Every trainable number in the model.")]
    for stack in stacks:
        block = int(counts[counts["module"].str.startswith(f"{stack}.layers.0.")]["parameters"].sum())
        metrics.append((f"In one {stack} block", block, f"Each of the {cfg.n_layers} {stack} blocks has as many."))
    row = st.container(horizontal=True, gap="large")  # each as wide as its label, which columns cut on a projector
    for label, value, help_text in metrics:
        row.metric(label, f"{value:,}", help=help_text, width="content")
    st.caption(embedding_note(cfg))
    static_table(groups, labels={"group": "kind of module"}, formats={"parameters": "{:,}", "share": percent})
    csv_button("By kind (CSV)", groups, "anatomy_parameter_groups.csv", "ana_csv_groups")


def parameter_table(cfg: ModelConfig) -> None:
    """Every module that owns parameters, with its count."""
    counts = from_model(cached_parameter_counts, cfg)
    with st.expander(f"Parameters of each of the {len(counts)} modules", key="ana_open_params", bind="query-params"):
        st.caption(
            "Each module's own parameters, not its children's: an attention module's row counts its Q, K and V "
            "projections, and its out_proj has a row of its own. The rows add up to the model's total."
        )
        st.dataframe(
            counts,
            hide_index=True,
            height=min(420, 38 + 35 * len(counts)),
            column_config={"parameters": st.column_config.NumberColumn("parameters", format="localized")},
        )
    csv_button("By module (CSV)", counts, "anatomy_parameters.csv", "ana_csv_params")


def compute(cfg: ModelConfig, trace: Trace) -> None:
    st.subheader("Multiply-adds for this input")
    n_source, n_target = lengths(trace)
    read_out = read_out_size(session_model())
    table = multiply_adds(cfg, n_source, n_target, read_out)
    total = int(table["multiply_adds"].sum())
    st.metric("Multiply-adds, one forward pass", f"{total:,}", help="About 2 × this many floating-point operations.")
    st.caption(
        f"An estimate that counts the matrix products only (all layers included); {norm_name(cfg)}, softmax, the "
        "activation function and the additions are left out. Attention's own products grow with the square of "
        "the length; the projections and the feed-forward grow linearly."
        + (
            " The read-out is counted at every position, as training reads it out; a next-token prediction needs "
            "the last position's alone."
            if read_out is not None
            else ""
        )
    )
    static_table(table, labels={"multiply_adds": "multiply-adds"}, formats={"multiply_adds": "{:,}"})
    csv_button("Multiply-adds (CSV)", table, "anatomy_multiply_adds.csv", "ana_csv_macs")


def diagram(cfg: ModelConfig) -> None:
    st.subheader("One block as configured")
    st.caption(placement_sentence(cfg.norm) + " Dashed arrows are the residual connections. Read from the bottom up.")
    if cfg.reads_target:
        left, right = st.columns(2)
        with left:
            st.graphviz_chart(block_diagram(cfg.replace(arch="encoder"), length="S"))
        with right:
            st.graphviz_chart(block_diagram(cfg))
    else:
        st.graphviz_chart(block_diagram(cfg))


def parameter_figures(model: Transformer) -> list:
    """The view as a Plotly figure: the parameters by kind of module."""
    return [notebook_figures.parameters_figure(model)]


def main() -> None:
    st.title("Anatomy of the model")
    run = sidebar_run("Fix the setting named above (in the sidebar) to see the model's anatomy.")
    if run is None:
        return
    cfg, trace = run
    st.caption(f"{model_line(cfg, trace)}.")
    figures = partial(parameter_figures, session_model())
    view_download("Anatomy of the model", [plain(model_line(cfg, trace))], figures, "anatomy")
    if cfg.reads_target:  # two diagrams side by side need the page's width to stay readable
        diagram(cfg)
        parameter_summary(cfg)
    else:
        left, right = st.columns(2)
        with left:
            diagram(cfg)
        with right:
            parameter_summary(cfg)
    parameter_table(cfg)  # the page's width: in half of a projector's, a module's name left its count no room
    steps(cfg, trace)
    compute(cfg, trace)


main()

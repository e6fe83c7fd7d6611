"""Positional encodings page: what each option adds (or rotates), how positions compare, and why order matters.
The curves (or rotary angles) are the first screen; the sections below are expanders built when opened (their URL
parameters, pos_open_<section>=true, open them in a link: views/lazy_sections.py)."""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from explorer.analysis.position_analysis import (
    MAX_PLOTTED_POSITIONS,
    REORDERINGS,
    check_range,
    learned_rows,
    parse_dimensions,
    rope_angle_table,
    similarity_to,
    wavelengths,
)
from explorer.config import CheckpointConfig, ConfigError, ModelConfig
from explorer.config_words import count
from explorer.model import Transformer
from explorer.positional import ROPE_BASE
from explorer.positional_text import (
    NO_VECTORS,
    causal_order_note,
    explanation,
    formula,
    rope_base,
    table_frame,
    token_type_note,
)
from explorer.pretrained import pretrained_title
from explorer.trace import Trace
from pictures import notebook_figures
from pictures.positional_charts import (
    encoding_curves,
    encoding_heatmap,
    rope_angle_heatmap,
    similarity_heatmap,
    similarity_profile,
    wavelength_figure,
)
from views.caches import cached_similarity, cached_table, from_model
from views.lazy_sections import lazy_section
from views.matrix_view import show_board
from views.position_demos import offset_demo, order_demo
from views.query_params import URL_BOOLEAN, warn_junk_url
from views.state import session_model, sidebar_run, trained_label, trained_weights
from views.widgets import (
    csv_button,
    model_line,
    plain,
    plotly_chart,
    positions_text,
    stretch_toggle,
    view_download,
)

METRICS = ("cosine", "dot")
# The sections below the first screen, each an expander built only when open: its URL parameter (=true opens it in a
# link) and the URL parameters of its own controls, any of which opens it too (views/lazy_sections.py).
SECTIONS = {
    "pos_open_table": ("stretch",),
    "pos_open_wavelengths": (),
    "pos_open_similarity": ("pos_metric",),
    "pos_open_offset": ("pos_offset_layer", "pos_offset_head"),
    "pos_open_order": ("pos_order", "pos_order_stretch", "pos_perm_layer", "pos_perm_head"),
}
STRETCH_HELP = (
    "Off: darkest = the largest |value| of the table (±1 for sinusoids). On: darkest = the top 1 % of |values|, so "
    "one outlier (a trained table can have a few) does not leave every other cell white."
)


def summary(cfg: ModelConfig, trace: Trace) -> str:
    return f"{model_line(cfg, trace, bold=('positional',))}."


def position_figures(
    cfg: ModelConfig,
    n_positions: int,
    dims_text: str,
    metric: str,
    tokens: list[str],
    model: Transformer,
) -> list:
    """The view as Plotly figures: the added table's curves (the page's dimensions, the typed tokens marked),
    wavelengths and similarities, or rope's angles and wavelengths."""
    if cfg.positional == "rope":
        layout = rope_layout(model)
        return [
            notebook_figures.rope_angle_figure(n_positions, cfg.d_head, rope_base(cfg), layout),
            rope_wavelengths(cfg, n_positions, layout),
        ]
    if cfg.positional == "none":
        return []
    try:
        dims = parse_dimensions(dims_text, cfg.d_model)
    except ConfigError:
        dims = None  # the page says what is wrong with them; the file shows the usual spread of pairs
    figures = [notebook_figures.positional_figure(model, n_positions, dims, tokens)]
    if cfg.positional == "sinusoidal":
        figures.append(wavelength_figure(wavelengths(cfg.d_model), cfg.d_model, n_positions))
    return [*figures, notebook_figures.position_similarity_figure(model, n_positions, metric)]


def rope_layout(model: Transformer) -> str:
    """Which dimensions of a head the model's rotary encoding pairs: "interleaved" (2i, 2i+1) or "half" (i, i +
    d_head/2, Hugging Face Llama's, as SmolLM2 has it)."""
    return model.first_stack.spec.rope_layout


def rope_wavelengths(cfg: ModelConfig, n_positions: int, layout: str) -> go.Figure:
    """The wavelength of each rotary pair of one head, with this model's base and pairing."""
    base = rope_base(cfg)
    return wavelength_figure(wavelengths(cfg.d_head, base), cfg.d_head, n_positions, "d_head", base, layout)


def controls(cfg: ModelConfig) -> tuple[int, str, str]:
    left, middle, right = st.columns([1, 2, 1])
    n_positions = left.number_input(
        "Max position",
        value=64,
        step=8,
        key="pos_max",
        bind="query-params",
        help=f"How many positions (0 to this minus 1) to draw; 1 to {MAX_PLOTTED_POSITIONS:,}.",
        disabled=cfg.positional == "none",  # nothing here is drawn by position
    )
    dims = middle.text_input(
        "Dimensions to plot as curves",
        value="",
        key="pos_dims",
        bind="query-params",
        placeholder="e.g. 0, 1, 6-9 (empty: a spread of pairs)",
        help=f"Dimensions 0 to {cfg.d_model - 1}, separated by commas; a-b is a range. At most 16.",
        disabled=cfg.positional not in ("sinusoidal", "learned"),
    )
    metric = right.radio(
        "Similarity",
        METRICS,
        key="pos_metric",
        bind="query-params",
        horizontal=True,
        help="cosine: the angle between two position vectors (1 = same direction). dot: q·k-like raw product.",
        disabled=cfg.positional not in ("sinusoidal", "learned"),
    )
    if cfg.positional not in ("sinusoidal", "learned"):  # say why, rather than leave greyed controls unexplained
        unused = "None of these controls is" if cfg.positional == "none" else "Only Max position is"
        st.caption(
            f"{unused} used with {positions_text(cfg.positional)}: {NO_VECTORS[cfg.positional]}"
            + (causal_order_note(cfg) if cfg.positional == "none" else "")
            + (
                ""
                if isinstance(cfg, CheckpointConfig)
                else " Pick sinusoidal or learned in the sidebar for curves and similarities."
            )
        )
    return int(n_positions), dims, metric


def added_table(cfg: ModelConfig, trace: Trace, n_positions: int, dims_text: str, metric: str) -> None:
    """Sinusoidal or learned: curves, the whole matrix, wavelengths, similarities and the typed tokens' rows."""
    kind = cfg.positional
    tokens = trace.tokens
    try:
        table = from_model(cached_table, cfg, max(n_positions, len(tokens)))
    except ConfigError as e:
        st.error(str(e), icon=":material/error:")
        return
    shown = table[:n_positions]  # [P, D]
    trained = trained_weights(cfg)
    if kind == "learned" and isinstance(cfg, CheckpointConfig):
        st.info(
            f"These are {pretrained_title(cfg.checkpoint)}'s own learned position embeddings, {cfg.max_tokens:,} "
            "rows trained with the rest of the model: see below how alike neighbouring positions have become."
            + token_type_note(session_model())
        )
    elif kind == "learned" and trained_label() is not None:
        st.info(f"These learned position embeddings are those of the {trained_label()} model.")
    elif kind == "learned":
        st.warning(
            "**Untrained.** These learned position embeddings are the model's random initial values "
            f"(N(0, ½), seed {cfg.seed}): nothing in this dashboard's model has been trained. Each position still has "
            "a vector of its own, but they carry no pattern: their similarity below shows two positions alike only "
            "by chance. Training would shape them.",
            icon=":material/casino:",
        )
    if cfg.reads_target:
        st.caption(
            f"Red marks the source's {count(len(tokens), 'position')}; the decoder adds the same table to its "
            f"{count(len(trace.last.tokens), 'target token')}."
        )
    st.subheader("Value against position")
    try:
        dims = parse_dimensions(dims_text, cfg.d_model)
    except ConfigError as e:
        st.error(str(e), icon=":material/error:")
    else:
        if not dims_text.strip():
            st.caption(f"Showing dimensions {', '.join(map(str, dims))} (type others above).")
        plotly_chart(encoding_curves(shown, dims, tokens, kind, trained), "pos_curves")
    typed = table_frame(table[: len(tokens)], tokens)
    if st.toggle(
        f"Show what is added at the {len(tokens)} typed positions",
        key="pos_typed_table",
        bind="query-params",
        help="The rows of the table for the typed tokens, one column per dimension (also in the CSV below).",
    ):
        st.dataframe(typed, hide_index=True, height=min(400, 38 + 35 * len(tokens)))
    with st.container(horizontal=True):  # each button as wide as its label, which columns cut on a projector
        csv_button("Typed positions (CSV)", typed, f"positions_{kind}_typed.csv", "pos_csv_typed")
        csv_button(f"Table, {n_positions} positions (CSV)", table_frame(shown), f"positions_{kind}.csv", "pos_csv")
    lazy_section(
        "**The whole table**: every position and dimension as one map",
        "pos_open_table",
        partial(whole_table, shown, tokens, kind, trained),
        SECTIONS["pos_open_table"],
    )
    if kind == "sinusoidal":
        lazy_section(
            "**Wavelength of each pair**: how fast each sine turns",
            "pos_open_wavelengths",
            partial(sinusoid_wavelengths, cfg, n_positions),
        )
    else:
        st.caption("A learned table has no wavelengths: each row is free, not a sine of the position.")
    lazy_section(
        "**How alike are two positions?** The similarity of every two positions drawn",
        "pos_open_similarity",
        partial(similarities, cfg, shown, len(tokens), n_positions, metric, trained),
        SECTIONS["pos_open_similarity"],
    )


def whole_table(shown: np.ndarray, tokens: list[str], kind: str, trained: bool) -> None:
    """The [position, dimension] table as one map, with the Stretch colours switch of the attention maps."""
    stretch = stretch_toggle(st, STRETCH_HELP)
    show_board(encoding_heatmap(shown, tokens, kind, trained, stretch), key="pos_heatmap")


def sinusoid_wavelengths(cfg: ModelConfig, n_positions: int) -> None:
    """The period of each sin/cos pair, and its CSV."""
    lengths = wavelengths(cfg.d_model)
    plotly_chart(wavelength_figure(lengths, cfg.d_model, n_positions), "pos_wavelengths")
    frame = pd.DataFrame(
        {
            "pair": np.arange(len(lengths)),
            "sin_dimension": np.arange(0, cfg.d_model, 2),
            "wavelength_positions": lengths,
        }
    )
    csv_button("Wavelengths (CSV)", frame, "positions_wavelengths.csv", "pos_csv_wavelengths")


def similarities(
    cfg: ModelConfig, shown: np.ndarray, n_tokens: int, n_positions: int, metric: str, trained: bool
) -> None:
    """The similarity of every two positions drawn, and of the last typed token's position with each."""
    kind = cfg.positional
    positions, sim = from_model(cached_similarity, cfg, n_positions, metric)
    show_board(similarity_heatmap(sim, positions, metric, n_tokens, kind, trained), key="pos_similarity")
    reference = min(n_tokens, n_positions) - 1  # the last typed token's position, or the last one drawn
    row = similarity_to(shown, reference, metric)
    which = "the last typed token" if n_tokens <= n_positions else "the last position drawn"
    plotly_chart(similarity_profile(row, reference, metric, which), "pos_profile")
    if kind == "sinusoidal":
        st.caption(
            "Why nearby positions look alike: moving from p to p + k turns every sine/cosine pair by a fixed angle "
            "k·ω_i, so the dot product of two encodings depends only on the offset k and is largest at k = 0; the "
            "fast pairs decorrelate within a few positions, the slow ones stay alike for thousands."
            + (
                f" Here d_model {cfg.d_model} is odd: its last dimension is a sine without a cosine, so the dot "
                "product also depends a little on where the two positions are."
                if cfg.d_model % 2
                else ""
            )
        )
    frame = pd.DataFrame(sim, columns=[f"pos_{p}" for p in positions])
    frame.insert(0, "position", positions)
    csv_button(f"Similarity matrix ({metric}, CSV)", frame, f"positions_{kind}_{metric}_similarity.csv", "pos_csv_sim")


def rotary(cfg: ModelConfig, trace: Trace, n_positions: int) -> None:
    """Rope: the angle of each pair at each position, and the wavelengths of the pairs of one head."""
    st.subheader("Rotation angles")
    base = rope_base(cfg)
    if base != ROPE_BASE:
        st.caption(f"This model's rotary base θ is {base:,.0f} (the original paper's is {ROPE_BASE:,.0f}).")
    layout = rope_layout(session_model())
    angles = rope_angle_table(n_positions, cfg.d_head, base)  # [P, K/2]
    show_board(rope_angle_heatmap(angles, len(trace.tokens), base, layout), key="pos_rope_angles")
    frame = pd.DataFrame(angles, columns=[f"pair_{i}_radians" for i in range(angles.shape[1])])
    frame.insert(0, "position", np.arange(n_positions))
    csv_button("Angles (CSV)", frame, "positions_rope_angles.csv", "pos_csv_rope")
    lazy_section(
        "**Wavelength of each pair**: how fast each pair of a head turns",
        "pos_open_wavelengths",
        lambda: plotly_chart(rope_wavelengths(cfg, n_positions, layout), "pos_wavelengths"),
    )


def main() -> None:
    st.title("Positional encodings")
    run = sidebar_run("Fix the setting named above (in the sidebar) to see the positional encodings.")
    if run is None:
        return
    cfg, trace = run
    st.caption(summary(cfg, trace))
    st.markdown(explanation(cfg))
    if formula(cfg):
        st.latex(formula(cfg))
    warn_junk_url(
        {
            "pos_max": None,
            "pos_metric": list(METRICS),
            "pos_order": list(REORDERINGS),
            # a whole number out of range shows the nearest layer or head, and says so (position_demos.layer_head)
            "pos_offset_layer": None,
            "pos_offset_head": None,
            "pos_perm_layer": None,
            "pos_perm_head": None,
            "stretch": URL_BOOLEAN,
            "pos_order_stretch": URL_BOOLEAN,
            "pos_typed_table": URL_BOOLEAN,
            **dict.fromkeys(SECTIONS, URL_BOOLEAN),
        }
    )
    n_positions, dims_text, metric = controls(cfg)
    try:
        check_range(n_positions, [], cfg.d_model, learned_rows(session_model()))
    except ConfigError as e:
        st.error(str(e), icon=":material/error:")
    else:
        figures = partial(position_figures, cfg, n_positions, dims_text, metric, trace.tokens, session_model())
        view_download("Positional encodings", [plain(summary(cfg, trace))], figures, "positional")
        if cfg.positional in ("sinusoidal", "learned"):
            added_table(cfg, trace, n_positions, dims_text, metric)
        elif cfg.positional == "rope":
            rotary(cfg, trace, n_positions)
    st.divider()
    target = trace.target_tokens
    lazy_section(
        "**Does a score depend only on the offset?** One head's scores when one token fills every position",
        "pos_open_offset",
        partial(offset_demo, cfg, tuple(trace.tokens)),  # the tokens, not the trace: views/state.py
        SECTIONS["pos_open_offset"],
    )
    lazy_section(
        "**Why position matters: reorder the tokens**, and see whether the maps only move",
        "pos_open_order",
        partial(order_demo, cfg, tuple(trace.tokens), target),
        SECTIONS["pos_open_order"],
        expanded=cfg.positional == "none",  # with no encoding, this is what the page has to show (lazy_sections)
    )


main()

"""Compare's per-layer section: A's and B's statistics on the same axes (pictures.compare_charts.layer_lines), each
panel linear from 0 or logarithmic where the two differ by orders of magnitude (pictures.log_axes; ?axes=auto,
linear or log), with the notes under them."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from explorer.analysis.gradients import objective_text
from explorer.compare_text import b_objective_text, objectives_text, unequal_depth_note
from explorer.config import CheckpointConfig, ConfigError, ModelConfig
from explorer.trace import Trace
from pictures.compare_lines_chart import NOT_AVAILABLE, STATISTIC_TITLES, layer_lines
from pictures.log_axes import AXES, panel_scales, scales_note
from views.caches import gradient_totals, model_of
from views.state import model_key, session_model
from views.widgets import plotly_chart, settle_choice

KEY = "axes"  # the choice's key and URL parameter
GRADIENTS_KEY = "grads"  # the toggle that asks for a long text's gradient norms, and its URL parameter
# Above this many pieces a checkpoint's gradient norms wait to be asked for: the backward pass through SmolLM2 on 512
# pieces holds 2.2 GB beyond the model for tens of seconds, once for A and once for B (bench: README, Size limits).
GRADIENT_PIECES = 128
NOT_YET = "not computed yet:<br>turn on Gradient norms above"  # the gradient panel's text, toggle off
AXES_HELP = (
    "auto: a panel whose values (A's and B's together) span more than ×100 is drawn on a log scale, where the "
    "smaller model would otherwise be a line at zero; the others from 0. linear: every panel from 0. log: every "
    "panel on a log scale. A panel with a value of 0 or below stays linear, which a log axis cannot show."
)


def gradients_or_none(a: ModelConfig, b: ModelConfig, text: str, target: str | None) -> pd.DataFrame | None:
    """B's (or, with b = a, A's) gradient norms per block; None when the text is too short to have any."""
    try:
        return gradient_totals(a, b, text, target, model_key())
    except ConfigError:
        return None


def gradients_wanted(a: ModelConfig, n_pieces: int, notes: list[str]) -> bool:
    """Whether to take gradient norms: always for a configured model or a short text; for a checkpoint on more than
    GRADIENT_PIECES pieces only when the toggle drawn here is on (?grads=true), with a note under the lines when
    it is off."""
    if not isinstance(a, CheckpointConfig) or n_pieces <= GRADIENT_PIECES:
        return True
    wanted = st.toggle(
        f"Gradient norms on all {n_pieces} pieces",
        key=GRADIENTS_KEY,
        bind="query-params",
        help="A backward pass through A and through B: on a long text it takes tens of seconds and gigabytes of the "
        "server's memory, so it waits for you to ask.",
    )
    if not wanted:
        notes.append(
            f"No gradient norms yet: on more than {GRADIENT_PIECES} pieces a real model's backward pass is slow and "
            f'large. Turn on "Gradient norms on all {n_pieces} pieces" above to add them.'
        )
    return wanted


def gradient_objectives(a: ModelConfig, b: ModelConfig | None) -> str:
    """What the gradient norms of A and of B (None: B is not drawn) measure, B's read from B's own model."""
    model_a = session_model()
    if b is None:
        return objective_text(model_a)
    return objectives_text(objective_text(model_a), b_objective_text(model_a, model_of(a, b, model_key())))


def shown_axes() -> str:
    """The axes the per-layer lines are drawn with (the choice's value, auto before it is drawn)."""
    axes = st.session_state.get(KEY)
    return axes if axes in AXES else "auto"


@st.cache_data(max_entries=32, show_spinner=False)
def lines_chart(table: pd.DataFrame, axes: str, missing: str) -> go.Figure:
    return layer_lines(table, axes=axes, missing=missing)


def per_layer_section(
    tables: dict[str, pd.DataFrame],
    trace_a: Trace,
    trace_b: Trace | None,
    notes: list[str],
    objective: str,
    missing: str = NOT_AVAILABLE,
) -> pd.DataFrame:
    """The per-layer lines of the stack picked (and the notes under them, and `objective`: gradient_objectives), a
    panel with no values saying `missing`; returns the table they draw."""
    st.subheader(
        "Per layer: A and B on the same axes" if trace_b is not None else "Per layer: A alone (B is not drawn)"
    )
    names = list(tables)
    name = names[0]
    stack_column, axes_column = st.columns([3, 2]) if len(names) > 1 else (None, st.container())
    if stack_column is not None:
        settle_choice("stack", names)
        name = stack_column.radio("Stack", names, key="stack", bind="query-params", horizontal=True)
    settle_choice(KEY, list(AXES))
    axes = axes_column.radio("Y axes", AXES, key=KEY, bind="query-params", horizontal=True, help=AXES_HELP)
    table = tables[name]
    plotly_chart(lines_chart(table, axes, missing), key="layer_lines")
    if (said := scales_note(panel_scales(table, axes), axes, STATISTIC_TITLES)) is not None:
        st.caption(said)
    if (depths := unequal_depth_note(trace_a, trace_b, names.index(name))) is not None:
        st.info(depths, icon=":material/info:")
    for note in notes:
        st.caption(note)
    with st.expander("What the gradient norms measure", key="grads_help", bind="query-params"):  # open in a link too
        st.write(objective)
    return table

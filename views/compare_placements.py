"""Compare's "All four placements": A's very weights run with post-, pre-, res-post- and peri-norm, drawn as one
figure (pictures.placement_charts), said in words computed from the numbers (explorer.placements_text) and offered as
a CSV. The expander is lazy: nothing is computed until it is opened (?placements=true keeps it open in a link)."""

from __future__ import annotations

import re
from functools import partial

import streamlit as st

from explorer.analysis.placements import PlacementRun, table_csv
from explorer.anatomy import norm_name
from explorer.config import ConfigError, ModelConfig
from explorer.placements_text import placements_paragraphs
from explorer.pretrained import pretrained_title
from explorer.trace import Trace
from pictures.placement_charts import placements_chart
from views.caches import placements_of
from views.compare_words import removed_words
from views.state import app_state, current_source, model_key
from views.widgets import download, plotly_chart, settle_choice

KEY = "placements"  # the expander's key, and its URL parameter
STACK_KEY = "placements_stack"
LABEL = "**All four placements** on A's weights: residual RMS, gradient norms and attention entropy, side by side"


def whose_weights() -> tuple[str, bool]:
    """(whose weights, for the sentences; True when they are freshly initialised)."""
    source = current_source()
    if source.kind == "trained":
        return f"trained weights ({source.name})", False
    if source.kind == "pretrained":
        title = re.sub(r"\s*\(.*\)$", "", pretrained_title(source.name))  # without "(BERT, post-norm)": said next
        return f"pretrained weights of {title}", False
    return "untrained weights", True


def every_head_note(own: str) -> str | None:
    """When the sidebar removes heads: that every placement here runs with every head (A's trace lent is its run
    with every head), so that no one reads A's own placement (`own`) here as A without them."""
    state = app_state()
    if not state.ablated:
        return None
    removed = removed_words(state.ablated, state.ablate_with)
    return (
        f"Every placement here runs with every head: the sidebar removes {removed} from A above, not here, so "
        f"{own}-norm, A's own placement, is A with every head."
    )


def computed(
    a: ModelConfig, b: ModelConfig | None, text: str, target: str | None, trace_a: Trace
) -> PlacementRun | None:
    """The four placements' numbers (a progress bar while they are computed), or None after saying why not."""
    try:
        return placements_of(a, b, text, target, model_key(), trace_a)
    except ConfigError as e:
        st.error(str(e), icon=":material/error:")
        return None


def placements_section(a: ModelConfig, b: ModelConfig | None, text: str, target: str | None, trace_a: Trace) -> None:
    """The expander; opened, the figure, the sentences and the CSV of the table. `trace_a`: A's trace of `text`
    (and `target`), lent to the computation with B's (see views.caches.placements_of)."""
    box = st.expander(LABEL, key=KEY, bind="query-params", on_change="rerun", icon=":material/stacked_line_chart:")
    if not box.open:
        return
    with box:
        result = computed(a, b, text, target, trace_a)
        if result is None:
            return
        stacks = result.stacks
        stack = stacks[0]
        if len(stacks) > 1:
            settle_choice(STACK_KEY, stacks)
            stack = st.radio("Stack", stacks, key=STACK_KEY, bind="query-params", horizontal=True)
        plotly_chart(placements_chart(result, stack), key="placements_chart")
        if (note := every_head_note(a.norm)) is not None:
            st.caption(note)
        weights, untrained = whose_weights()
        for paragraph in placements_paragraphs(result, weights, untrained, stack, norm_name(a)):
            st.markdown(paragraph)
        download(
            "Four placements CSV",
            partial(table_csv, result),
            "placements.csv",
            "text/csv",
            "placements_csv",
            help="One row per placement, stack, layer and measure (layer -1: the input to the first block). resolved "
            "is False for gradient norms float32 does not resolve on these weights (drawn faint, not in the words).",
        )

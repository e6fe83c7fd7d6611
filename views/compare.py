"""Compare page: configuration A (the sidebar) next to B (set here), on A's very weights wherever B can share them.

B's controls (views.compare_controls) are keyed b_<field> and bound to the URL, so ?norm=post&b_mask=causal holds
both configurations. They default to default_b(A) (A with another norm placement) and follow A while the
user leaves them alone. "One configuration, two inputs" runs A's model on a second text (b_tokens) instead, and
"heads" runs A's very model without the heads of B's list (b_ablate). Heads the sidebar removes (ablate) are removed
from A, and from B too when B is A's own model.
"""

from __future__ import annotations

from functools import partial

import streamlit as st

from explorer.ablation import Head, heads_text
from explorer.analysis.gradients import unresolved_change
from explorer.compare import (
    CONFIGURATION,
    INPUT,
    can_share_weights,
    layer_difference,
    layers_and_heads,
    paired_attention,
    reversed_text,
    target_of_b,
    token_order,
)
from explorer.compare_link import comparison_query
from explorer.compare_text import (
    missing_side,
    unresolved_b_note,
    why_not_subtracted,
)
from explorer.config import PAD_TOKEN, ConfigError, ModelConfig
from explorer.limits import check_app_size
from explorer.trace import Trace
from pictures.attention_panels import scale_note
from pictures.boards import board
from pictures.compare_charts import (
    difference_fits_beside,
    difference_panel,
    pair_norm_note,
    pair_norm_top,
    pair_panels,
    pair_top,
)
from pictures.compare_lines_chart import NOT_AVAILABLE
from pictures.log_axes import AXES
from views.ablation_controls import Removal
from views.caches import ranking_key, ranking_of, stack_tables, trace_of
from views.compare_controls import B_ABLATE, B_ABLATE_WITH, HEADS, top_controls
from views.compare_downloads import ShownMaps, downloads
from views.compare_lines import (
    GRADIENTS_KEY,
    NOT_YET,
    gradient_objectives,
    gradients_or_none,
    gradients_wanted,
    per_layer_section,
)
from views.compare_lines import KEY as AXES_KEY
from views.compare_placements import KEY as PLACEMENTS_KEY
from views.compare_placements import placements_section
from views.compare_ranking import pick_head, ranking_section
from views.compare_runs import ComparedRuns
from views.compare_share import share_box
from views.compare_words import (
    heads_message,
    no_gradients_note,
    removed_map_notes,
    removed_words,
    say_what_differs,
    whose_stack,
)
from views.matrix_view import show_board
from views.query_params import URL_BOOLEAN, note_view_param, show_url_notes, warn_junk_url
from views.state import app_state, model_key, session_model, sidebar_run, trace_maker
from views.widgets import (
    MEASURES,
    NUMBER_SELECT_PX,
    carry_view,
    kind_choice,
    measure_choice,
    remember_view,
    stretch_toggle,
)

PAGE = "compare"  # for carry_view: the layer and head picked here go with the user to Attention
VIEW_NOTES_KEY = "_compare_view_notes"
DIFFERENT_WEIGHTS = (
    "A and B have different weights, so A − B mixes the settings you changed with the effect of other random "
    "weights, and head h of A has no special relation to head h of B."
)


# --- The attention section: one fragment, so picking a head does not rerun the models.


@st.fragment
def attention_section(
    runs: ComparedRuns,
    caveat: str | None = None,
    b_drawn: bool = True,
    measure: str = "weights",
    shown: ShownMaps | None = None,
) -> None:
    """The maps of `runs` (their pairs, read again on each rerun: the fragment's arguments hold no trace), with the
    head ranking of the pair shown. `caveat` is said under the maps (e.g. that A and B do not share weights).
    Without `b_drawn` (B is impossible) A's maps are shown alone, and said to be. With `measure` norms (picked
    outside the fragment, so that the view's download follows it) the maps show ‖α·f(x)‖ (runs.measured()); the
    head ranking stays on the weights. What it draws is written into `shown`, for the view's download."""
    pairs = runs.pairs()
    labels = [p.label for p in pairs]
    if len(pairs) > 1:
        note_view_param(VIEW_NOTES_KEY, "kind", labels)
    pair = pairs[0]
    layers, heads = layers_and_heads(pair)
    note_view_param(VIEW_NOTES_KEY, "layer", layers)
    note_view_param(VIEW_NOTES_KEY, "head", heads)
    notes = st.container()  # filled once the selectors exist
    if len(pairs) > 1:
        by_role = "Paired by role: the stack that reads your tokens, then the decoder of an encoder-decoder."
        label = kind_choice(labels, by_role)
        pair = pairs[labels.index(label)]
        layers, heads = layers_and_heads(pair)
    ranking = None
    if pair.same_shape:
        trace_a, trace_b = runs.traces()
        assert trace_b is not None  # both sides are drawn: the pair has their maps
        ranking = ranking_of(pair, ranking_key(trace_a, trace_b, runs.order, pair.label))
    controls = st.container(horizontal=True, vertical_alignment="bottom")  # wraps: no label is cut on a projector
    carry_view(PAGE, "layer", layers)
    carry_view(PAGE, "head", heads)
    layer = controls.selectbox("Layer", layers, key="layer", bind="query-params", width=NUMBER_SELECT_PX)
    head = controls.selectbox("Head", heads, key="head", bind="query-params", width=NUMBER_SELECT_PX)
    remember_view(PAGE, "layer", layer)
    remember_view(PAGE, "head", head)
    index = labels.index(pair.label)
    removed = dict(zip("AB", runs.removals(index, layer, head), strict=True))  # side: "zero", "mean" or None
    if measure == "norms":
        pair = runs.measured_head(index, layer, head)  # the same maps, carrying ‖α·f(x)‖
    with notes:
        show_url_notes(VIEW_NOTES_KEY)
    if ranking is not None:
        top = ranking.iloc[0]
        controls.button(
            "Show the most changed head",
            on_click=pick_head,
            args=(int(top["layer"]), int(top["head"])),
            icon=":material/target:",
            key="most_changed",
            help=f"Layer {int(top['layer'])}, head {int(top['head'])}: the highest Jensen-Shannon divergence.",
        )
    missing_b = missing_side("B", pair.b, pair.label, layer, head) if b_drawn else "not drawn until fixed"
    missing = (missing_side("A", pair.a, pair.label, layer, head), missing_b)
    stretch = stretch_toggle(controls)
    drawn = {name: m for name, m in (("A", pair.a), ("B", pair.b if b_drawn else None)) if m is not None}
    sides = list(drawn.values())
    top = pair_top(sides, layer, head)
    if measure == "norms":
        top = top if stretch else pair_norm_top(sides, layer, head)
        note = pair_norm_note(top, stretch)
    else:
        note = scale_note(top, stretch)
    if shown is not None:
        shown.kind, shown.layer, shown.head, shown.stretch, shown.top = pair.label, layer, head, stretch, top
        shown.query = st.query_params.to_dict()
    if note is not None:
        st.caption(f"{' and '.join(drawn)}: {note}.")  # the maps drawn: with B not drawn, the scale is A's alone
    for note in removed_map_notes(removed, (layer, head), measure):
        st.caption(note)
    if pair.a is not None and difference_fits_beside(pair.a, measure):
        # A − B beside A and B where the window leaves it room (from about 1366 px wide with the sidebar open), under
        # them at its own size where not: columns would have shrunk it, labels and all, on a 1024 px projector. Each
        # box is as wide as its board's panels (A − B's subtitle wraps to its map: wrap_subtitle)
        row = st.container(horizontal=True, gap="small")
        maps_column, difference_column = row.container(width="content"), row.container(width="content")
    else:  # a long text's maps: A − B under A and B, not shrunk to its column
        maps_column, difference_column = st.container(), st.container()
    panels, left_out = pair_panels(
        pair.a,
        pair.b,
        layer,
        head,
        missing=missing,
        top=top if stretch or measure == "norms" else None,
        measure=measure,
    )
    for panel in panels:
        if removed.get(panel["name"]) is not None:
            panel["title"] += " · removed"
    with maps_column:
        for note in left_out:
            st.info(note)
        if panels:
            show_board(board(panels), key="pair_maps", width="content")
    with difference_column:
        if not b_drawn:
            st.info("No A − B map while B is not drawn.")
        elif pair.a is None or pair.b is None:
            st.info(f"No A − B map: only {'B' if pair.a is None else 'A'} has {pair.label}.")
        elif (difference := layer_difference(pair, layer, head)) is None:  # [Tq, Tk]
            st.info(why_not_subtracted(pair))
        else:
            panel = difference_panel(pair.a, pair.b, difference, layer, head, measure, stretch)
            show_board(board([panel]), key="difference_map", width="content")
            if not pair.same_shape:
                st.caption(why_not_subtracted(pair, ranked_only=True))
    if caveat and pair.same_shape:
        st.caption(caveat)
    if ranking is not None:
        if measure == "norms":
            st.caption(
                "The ranking below compares the weights α (how far each head's attention distribution moved), "
                "whichever measure the maps show."
            )
        padded = any(m is not None and PAD_TOKEN in m.query_tokens for m in (pair.a, pair.b))  # rows averaged too
        trace_a, trace_b = runs.traces()
        removed_by_side = {"A": trace_a.ablated, "B": () if trace_b is None else trace_b.ablated}
        ranking_section(ranking, layer, head, padded, removed_by_side if index == 0 else {})  # first stack only


# --- The page.


def lined_up(trace_a: Trace, trace_b: Trace) -> tuple[int, ...] | None:
    """Two inputs with the same words in another order: offer to reorder B's maps to A's tokens; the order to use
    (token_order, which ComparedRuns applies to the maps it draws), or None when B's maps keep their own."""
    order = token_order(trace_a.tokens, trace_b.tokens)
    if order is None or order == list(range(len(order))):
        return None
    aligned = st.toggle(
        "Line up B's tokens with A's",
        value=True,
        key="align",
        bind="query-params",
        help="B's tokens are A's in another order. On: B's rows and columns are reordered to A's tokens, so "
        "A − B compares each word with itself and shows what position changes (with no positional "
        "encoding and no mask it is 0, up to float rounding). Off: position by position.",
    )
    if not aligned:
        return None
    st.caption("B's maps are shown in A's token order (a repeated word is matched by its occurrence).")
    return tuple(order)


def main() -> None:
    st.title("Compare A and B")
    run = sidebar_run("Fix configuration A (the sidebar; the problem is named above) to compare it with B.")
    if run is None:
        return
    a, trace_a = run
    state = app_state()
    text_a: str = st.session_state.get("tokens") or " ".join(trace_a.tokens)
    target_a: str | None = st.session_state.get("target") if a.reads_target else None
    st.caption(
        "**A** is the model of the sidebar, **B** the one set below. By default B is A with another norm placement "
        "(pre-norm, or post-norm for a pre-norm A), on A's very weights, so the only difference is the norm. The "
        "address bar holds both."
    )
    warn_junk_url(
        {
            "compare": [CONFIGURATION, INPUT, HEADS],
            "align": URL_BOOLEAN,
            "stretch": URL_BOOLEAN,
            "measure": list(MEASURES),
            PLACEMENTS_KEY: URL_BOOLEAN,
            AXES_KEY: list(AXES),
            GRADIENTS_KEY: URL_BOOLEAN,
            "ranking_table": URL_BOOLEAN,
        }
    )
    mode, b, text_b, b_heads = top_controls(a, text_a, state.ablated)
    target_b = None if b is None else target_of_b(b, target_a)
    b_run = b_removal(mode, b_heads, state.ablated, state.ablate_with)

    trace_b: Trace | None = None
    if b is not None:
        try:
            check_app_size(b, len(text_b.split()), None if target_b is None else len(target_b.split()))
            trace_b = trace_of(a, b, text_b, target_b, model_key(), b_run.heads, b_run.mode)
        except ConfigError as e:
            st.error(f"B: {e}", icon=":material/error:")
    if mode == HEADS:
        heads_message(a, b_run, state.ablated)
    else:
        say_what_differs(a, b, mode, text_a, text_b, trace_b is not None)
    if state.ablated and mode == CONFIGURATION:
        st.caption(
            f"The sidebar removes {removed_words(state.ablated, state.ablate_with)} from A{whose_stack(a)} only: B is "
            "another configuration, run with every head."
        )

    pairs = paired_attention(trace_a, trace_b)  # their kinds and shapes: lining B's tokens up changes neither
    order = lined_up(trace_a, trace_b) if mode == INPUT and trace_b is not None else None
    aligned = order is not None
    make_b = None
    if trace_b is not None:
        make_b = partial(trace_of, a, b, text_b, target_b, model_key(), b_run.heads, b_run.mode)
    # B run without heads is A's own model: its norms are the session model's; another B's are its own model's
    b_norms = None if b_run.heads or b is None else (a, b, text_b, target_b)
    runs = ComparedRuns(trace_maker(), make_b, order, model_key(), session_model(), b_norms)
    caveat = DIFFERENT_WEIGHTS if b is not None and mode == CONFIGURATION and not can_share_weights(a, b)[0] else None
    own = tuple(h for h in b_run.heads if h not in state.ablated)
    if mode == HEADS and own:
        caveat = (
            f"B is A's very weights without {removed_words(own, b_run.mode)}: A − B and the ranking below show "
            "which heads attend differently downstream of them."
        )
    removals = (state.ablated, state.ablate_with, b_run.heads, b_run.mode)
    st.subheader("Attention in A and B" if trace_b is not None else "Attention in A (B is not drawn)")
    measure = measure_choice()
    shown = ShownMaps()
    attention_section(runs, caveat, b_drawn=trace_b is not None, measure=measure, shown=shown)

    notes: list[str] = []
    longest = max(len(trace_a.tokens), len(trace_b.tokens) if trace_b is not None else 0)
    wanted = gradients_wanted(a, longest, notes)
    grads_a = gradients_or_none(a, a, text_a, target_a) if wanted else None
    grads_b = gradients_or_none(a, b, text_b, target_b) if wanted and trace_b is not None and b is not None else None
    if wanted and grads_a is None:
        notes.append(no_gradients_note(a))
    if mode == HEADS:
        grads_b = None
        notes.append("No gradient norms for B: gradients are taken with every head, so B's would be A's.")
    elif state.ablated and (grads_a is not None or grads_b is not None):  # said of norms the charts draw
        notes.append("The gradient norms are the model's with every head: they do not take removed heads.")
    if grads_b is not None and (change := unresolved_change(grads_b)) is not None:
        notes.append(unresolved_b_note(change))
    tables_key = (a, b, text_a, text_b, target_a, target_b, model_key(), removals, mode, wanted)  # heads: B: none
    tables = stack_tables(trace_a, trace_b, grads_a, grads_b, tables_key)
    missing = NOT_AVAILABLE if wanted else NOT_YET  # what an empty gradient panel says
    objective = gradient_objectives(a, b if trace_b is not None else None)
    lines = per_layer_section(tables, trace_a, trace_b, notes, objective, missing)
    # Every placement runs with every head: lend A's run with every head.
    placements_section(a, b if mode == CONFIGURATION else None, text_a, target_a, state.base_trace or trace_a)

    if b is None or trace_b is None:
        return
    sharing = "A and B are the same model" if mode in (INPUT, HEADS) else can_share_weights(a, b)[1]
    inputs = {"mode": mode, "a_tokens": trace_a.tokens, "b_tokens": trace_b.tokens}
    inputs |= {"a_target": target_a, "b_target": target_b}
    inputs |= {"a_removed": heads_text(trace_a.ablated), "b_removed": heads_text(trace_b.ablated)}
    inputs |= {"a_removed_with": trace_a.ablate_with, "b_removed_with": trace_b.ablate_with}
    downloads(a, b, inputs, sharing, runs, pairs, tables, aligned, lines, shown, missing, objective)
    share_box(link_query(a, b, text_a, target_a, mode, text_b, b_heads), [p.label for p in pairs])


def b_removal(mode: str, b_heads: Removal, removed_in_a: tuple[Head, ...], a_mode: str) -> Removal:
    """The heads B's run removes: in the mode heads, the sidebar's and B's own (B's mode for all of them); for two
    inputs, the sidebar's, since B is A's very model; for another configuration, none."""
    if mode == HEADS:
        return Removal(tuple(sorted({*removed_in_a, *b_heads.heads})), b_heads.mode)
    if mode == INPUT:
        return Removal(removed_in_a, a_mode)
    return Removal()


def link_query(
    a: ModelConfig, b: ModelConfig, text_a: str, target_a: str | None, mode: str, text_b: str, b_heads: Removal
) -> dict[str, str]:
    """comparison_query, with the heads the sidebar removes and, in the mode heads, B's own list."""
    if mode != HEADS:
        return comparison_query(a, b, text_a, target_a, mode, text_b) | app_removal_query()
    query = comparison_query(a, a, text_a, target_a, INPUT, reversed_text(text_a)) | {"compare": HEADS}
    if b_heads.heads:
        query[B_ABLATE] = heads_text(b_heads.heads)
        if b_heads.mode != "zero":
            query[B_ABLATE_WITH] = b_heads.mode
    return query | app_removal_query()


def app_removal_query() -> dict[str, str]:
    """The sidebar's removed heads as the URL holds them."""
    state = app_state()
    return Removal(state.ablated, state.ablate_with).query


main()

"""Attention page: one map large beside per-head entropy, every layer x head small below, and downloads."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer.ablation import Head, head_name
from explorer.analysis.ablation_effects import mean_is_own_output
from explorer.analysis.head_roles import BROAD, ROLES
from explorer.analysis.norm_attention import removal, removed_heads
from explorer.attention_text import (
    decoder_removal_text,
    no_clear_role_text,
    norms_line,
    removed_roles_words,
    role_shift_text,
)
from explorer.config import PAD_TOKEN, CheckpointConfig, ModelConfig
from explorer.export import attention_csv, attention_json, export_name
from explorer.norm_export import norm_attention_csv, norm_attention_json
from explorer.prediction import can_predict, next_token
from explorer.text_reading import quoted
from explorer.trace import AttentionMaps, Trace, byte_level_pieces
from pictures import notebook_figures
from pictures.attention_panels import GRID_MAX_CELLS, attention_map_panel, entropy_panel, grid_cells
from pictures.boards import board
from pictures.head_role_panels import BREADTH, clear_roles, role_name, roles_panel
from pictures.norm_figures import norm_maps_figure
from views.ablation_controls import removed_head_text, toggle_head
from views.matrix_view import picked_value, show_board
from views.query_params import URL_BOOLEAN, screen_view_params, show_url_notes, warn_junk_url
from views.state import session_model, shown_run, sidebar_run, trace_maker
from views.text_notes import part_character_note
from views.trace_caches import entropy_of, grid_of, norm_attention_later, norm_attention_of, roles_of
from views.widgets import (
    ENTROPY_COLUMNS,
    MEASURES,
    NUMBER_SELECT_PX,
    carry_view,
    clamp_view,
    code_text,
    download,
    kind_choice,
    measure_choice,
    model_line,
    plain,
    remember_view,
    static_table,
    stretch_toggle,
    view_download,
)

PAGE = "attention"  # for carry_view: the layer and head picked here go with the user to Compare
AVERAGE = "average of heads"
ZOOM_FROM = 128  # a map of more than ZOOM_FROM x ZOOM_FROM cells (a pixel or two each) offers a zoom window
ZOOM_SIDE = 40  # tokens a side of that window: few enough for every one to be labelled (MAX_TICKS is 45)
VIEW_NOTES_KEY = "_view_notes"
SELECTOR_PX = 200  # the head selector: wide enough for "average of heads"


def summary(cfg: ModelConfig, trace: Trace) -> str:
    """One line saying which model produced the maps."""
    return f"{model_line(cfg, trace)}. Weights are post-softmax, eval mode, per head."


def pick_from_grid() -> None:
    """on_pick callback of the maps: show the small map clicked in the big heatmap."""
    picked = picked_value("maps")
    if picked is not None:
        st.session_state["layer"], st.session_state["head"] = int(picked["layer"]), int(picked["head"])


def shown_head(n_layers: int, n_heads: int) -> tuple[int, int] | None:
    """(layer, head) the maps below this run show, as far as is known above them: the selectors' values, or in a
    session's first run the link's (layer=2&head=4) or their first options, L0 H0; None for the head average or a value
    they will not keep."""
    values = [st.session_state.get(key, st.query_params.get(key, "0")) for key in ("layer", "head")]
    try:
        layer, head = (int(str(v)) for v in values)
    except ValueError:
        return None
    return (layer, head) if 0 <= layer < n_layers and 0 <= head < n_heads else None


def zoom_window(maps: AttentionMaps) -> tuple[int, int, int, int] | None:
    """For a big map: an optional window of at most ZOOM_SIDE x ZOOM_SIDE cells, drawn with bigger cells and every
    label."""
    tq, tk = maps.weights.shape[-2:]  # [L, H, Tq, Tk]
    if tq * tk <= ZOOM_FROM * ZOOM_FROM:
        return None
    zoom = st.toggle(
        f"Zoom into {min(ZOOM_SIDE, tq)} × {min(ZOOM_SIDE, tk)} tokens",
        key="zoom",
        bind="query-params",
        help=f"This map has {tq} × {tk} cells, each only a pixel or two wide, and labels only every few tokens. "
        "A window draws bigger cells with every token labelled; the downloads always hold the whole map.",
    )
    if not zoom:
        return None
    left, right = st.columns(2)
    q0 = left.slider("First query", 0, max(0, tq - ZOOM_SIDE), 0, key="zoom_query", bind="query-params")
    k0 = right.slider("First key", 0, max(0, tk - ZOOM_SIDE), 0, key="zoom_key", bind="query-params")
    return q0, min(tq, q0 + ZOOM_SIDE), k0, min(tk, k0 + ZOOM_SIDE)


def view_options(maps: AttentionMaps) -> tuple[list[int], list]:
    """Options of the layer and head selectors (the head average last)."""
    return list(range(maps.n_layers)), [*range(maps.n_heads), AVERAGE]


@st.fragment
def roles_and_maps(kind: str, with_norms: bool) -> None:
    """A checkpoint's head-roles board, then the maps (map_viewer), rerun together when a selector changes the head
    or a map or role is clicked, so the board frames the head the maps show (a student's link to it included);
    `with_norms`: both measure ‖α·f(x)‖. Reads the trace from the shared cache: a fragment's arguments must not hold
    it (views/state.py)."""
    cfg, trace = shown_run()
    maps = trace.maps(kind)
    norms = norm_attention_of(trace, kind) if with_norms else None  # [L, H, Tq, Tk]
    layers, heads = view_options(maps)
    carry_view(PAGE, "layer", layers)  # before the board reads the head it frames (shown_head)
    carry_view(PAGE, "head", heads)
    clamp_view("layer", layers, "layer")  # here, in the fragment: its sentence goes when another layer is picked
    clamp_view("head", heads, "head")
    head_roles_section(trace, maps, cfg, norms)  # above the maps: a head clicked here opens just below
    map_viewer(cfg, trace, maps, norms)


def map_viewer(cfg: ModelConfig, trace: Trace, maps: AttentionMaps, norms: np.ndarray | None) -> None:
    """Layer and head selectors with the downloads of the map they pick, then one board: that map large, each head's
    entropy (head_entropy of the maps, one kind of `trace`'s attention), and every layer x head small; with `norms`
    ([L, H, Tq, Tk]), the map and the grid show ‖α·f(x)‖."""
    kind, with_norms = maps.kind, norms is not None
    entropy = entropy_of(trace, kind)
    layers, heads = view_options(maps)
    controls = st.container(horizontal=True, vertical_alignment="bottom")  # one block: fewer elements to lay out
    layer = controls.selectbox("Layer", layers, key="layer", bind="query-params", width=NUMBER_SELECT_PX)
    head = controls.selectbox(
        "Head",
        heads,
        key="head",
        bind="query-params",
        width=SELECTOR_PX,
        help=f'"{AVERAGE}" is the plain mean of the {maps.n_heads} heads: a summary, not something the model computes.',
    )
    remember_view(PAGE, "layer", layer)
    remember_view(PAGE, "head", head)
    head_index = None if head == AVERAGE else int(head)
    removed = removed_heads(trace, maps)
    if head_index is not None and maps is trace.first.self_attention:
        is_removed = (layer, head_index) in removed
        controls.button(
            "Put it back" if is_removed else "Remove this head",
            key="toggle_head",
            on_click=toggle_head,
            args=((layer, head_index),),
            icon=":material/undo:" if is_removed else ":material/block:",
            help="Every page then shows the model without this head (or with it again): its output, the weighted "
            "sum of values before the output projection, is set to zero or to its mean (sidebar).",
        )
    stretch = stretch_toggle(controls)
    make_trace, make_norms = trace_maker(), norm_attention_later(kind) if with_norms else None  # for the downloads
    downloads(controls, make_trace, kind, cfg, layer, head_index, make_norms)
    view_download(
        "Attention",
        [plain(summary(cfg, trace))] + ([norms_line(cfg.norm)] if with_norms else []),
        partial(attention_figures, make_trace, kind, layer, head_index, make_norms, stretch),
        "attention",
        controls,
    )
    if head_index is None:
        st.info(f"Showing the **average** of all {maps.n_heads} heads of layer {layer}, not a single head.")
    removal_caption(trace, removed, layer, head_index, norms is not None)
    decoder_removal_caption(trace, maps, layer)
    window = zoom_window(maps)
    entropy_note = None if norms is None else "Of the weights α, whichever measure is shown"
    removed_as = removal(trace, maps, layer, head_index)
    big = attention_map_panel(maps, layer, head_index, window=window, stretch=stretch, norms=norms, removed=removed_as)
    if (layer, head_index) in removed:
        big["title"] += " · removed"
    top = [big, entropy_panel(entropy, entropy_note)]
    picked = (layer, head_index) if head_index is not None else None  # the grid's maps come at their drawn size
    grid = mark_removed(grid_of(trace, maps.kind, stretch, norms, picked), removed, maps.n_heads)
    show_board(board(top, [grid]), key="maps", on_pick=pick_from_grid)
    empty_rows_warning(maps)


def attention_figures(
    make_trace: Callable[[], Trace],
    kind: str,
    layer: int,
    head: int | None,
    make_norms: Callable[[], np.ndarray] | None,
    stretch: bool,
) -> list:
    """The figures of "Download this view": the map shown, what the head adds beside it (with `make_norms`), and
    the grid of every map when it is small enough to draw, of what the page's grid shows (with `make_norms`, what
    each head adds); made on the click from the trace's maker, the colours `stretch`ed as the page's."""
    trace = make_trace()
    maps = trace.maps(kind)
    norms = None if make_norms is None else make_norms()  # [L, H, Tq, Tk]
    figures = [notebook_figures.maps_figure(maps, layer, head, stretch=stretch)]
    if norms is not None:
        removed = removal(trace, maps, layer, head)
        figures.append(norm_maps_figure(maps, norms, layer, head, stretch=stretch, removed=removed))
    if grid_cells(maps) <= GRID_MAX_CELLS:
        figures.append(notebook_figures.attention_grid_figure(trace, kind, stretch=stretch, norms=norms))
    return figures


def removal_caption(trace: Trace, removed: tuple[Head, ...], layer: int, head: int | None, norms: bool) -> None:
    """What removal means for the map shown: a removed head still computes these weights but adds nothing (or its
    mean); a layer above a removed head attends differently from the full model."""
    if not removed:
        return
    if head is not None and (layer, head) in removed:
        st.caption(f"**{head_name((layer, head))} is removed.** " + removed_head_text(trace.ablate_with, norms))
    elif layer > removed[0][0]:
        below = [head_name(h) for h in removed if h[0] < layer]
        which = f"removed head {below[0]}" if len(below) == 1 else f"removed heads ({', '.join(below)})"
        st.caption(
            f"Layer {layer} comes after the {which}: its attention differs from the full model's, since its input "
            f"lacks what {'it' if len(below) == 1 else 'they'} added. The page What heads do shows the differences."
        )


def decoder_removal_caption(trace: Trace, maps: AttentionMaps, layer: int) -> None:
    """For a decoder map of an encoder-decoder whose encoder lost heads: that the decoder keeps its heads but reads the
    changed encoder output (all but layer 0's self-attention). Nothing when the removal changes nothing (a mean that is
    each head's own output)."""
    if not trace.ablated or maps is trace.first.self_attention:
        return
    if trace.ablate_with == "mean" and mean_is_own_output(trace.first.self_attention.allowed):
        return
    st.caption(decoder_removal_text(maps.kind, layer, trace.ablated))


def mark_removed(grid: dict, removed: tuple[Head, ...], n_heads: int) -> dict:
    """The grid panel with each removed head's small map titled "L1 H3 · off" (and said so on hover)."""
    for layer, head in removed:
        i = layer * n_heads + head
        grid["titles"][i] += " · off"
        grid["hovers"][i] = f"L{layer} H{head}, removed: " + grid["hovers"][i].split(": ", 1)[-1]
    return grid


def downloads(
    where: DeltaGenerator,
    make_trace: Callable[[], Trace],
    kind: str,
    cfg: ModelConfig,
    layer: int,
    head: int | None,
    make_norms: Callable[[], np.ndarray] | None = None,
) -> None:
    """The weights of the map shown, as CSV and as JSON (with the model's settings); with `make_norms`, what the head
    adds beside them (a norm column, a norms field). Each file is made on the click, from the makers."""
    for file, mime in (("csv", "text/csv"), ("json", "application/json")):
        name = export_name(kind, layer, head, file)
        if make_norms is not None:
            name = name.removesuffix(f".{file}") + f"_with-norms.{file}"
        data = partial(map_file, file, make_trace, kind, layer, head, cfg, make_norms)
        download(f"Download {file.upper()}", data, name, mime, f"download_{file}", where)


def map_file(
    file: str,
    make_trace: Callable[[], Trace],
    kind: str,
    layer: int,
    head: int | None,
    cfg: ModelConfig,
    make_norms: Callable[[], np.ndarray] | None,
) -> str:
    """One map's CSV or JSON ("csv" or "json" `file`), with what the head adds when `make_norms` is given; the JSON
    names the heads the run removed (the config does not hold them)."""
    trace = make_trace()
    maps, removal = trace.maps(kind), (trace.ablated, trace.ablate_with)
    if make_norms is None:
        return attention_csv(maps, layer, head) if file == "csv" else attention_json(maps, layer, head, cfg, *removal)
    norms = make_norms()
    if file == "csv":
        return norm_attention_csv(maps, norms, layer, head)
    return norm_attention_json(maps, norms, layer, head, cfg, *removal)


def empty_rows_warning(maps: AttentionMaps) -> None:
    """Say which queries have no key to attend to: their rows are zeros, not distributions."""
    empty = maps.empty_rows
    if not empty.any():
        return
    n_empty = int(empty.sum())
    names = ", ".join(f"`{code_text(maps.query_labels[i])}` (position {i})" for i in empty.nonzero()[0][:10])
    st.warning(
        f"{n_empty} {'query has' if n_empty == 1 else 'queries have'} no key to attend to: {names}. "
        f"{'Its row is' if n_empty == 1 else 'Their rows are'} all zeros (marked ⊘), not a probability "
        "distribution.",
        icon=":material/block:",
    )


def entropy_table(entropy: pd.DataFrame) -> None:
    """On request, the entropy and peakedness of every head as a sortable table."""
    if st.toggle(
        "Show the entropy table",
        key="entropy_table",
        bind="query-params",  # a link to the page with its table shown opens with it
        help="Entropy and peakedness of every head, sortable.",
    ):
        st.dataframe(
            entropy,
            hide_index=True,
            column_config=ENTROPY_COLUMNS,
        )


def next_token_section(trace: Trace) -> None:
    """A causal model with a read-out: the pieces it finds likeliest after the text, from the run drawn here."""
    model = session_model()
    if not can_predict(model):
        return
    table = next_token(model, trace, k=10)
    st.subheader("What comes next")
    likeliest = "ten" if len(table) == 10 else str(len(table))  # a trained model's vocabulary may hold fewer
    st.caption(
        f"After `{code_text(trace.labels[-1])}`, the last piece, the model's output goes through its read-out and a "
        f"softmax over its whole vocabulary: its {likeliest} likeliest next pieces, from the same run as the maps "
        "below." + part_character_note(model.tokenizer, table["piece"])
    )
    spelled = "vocabulary piece (Ġ = a space)" if byte_level_pieces(model) else "vocabulary piece"
    shown = table[["rank", "text", "piece", "probability", "logit"]].rename(
        columns={"text": "next piece", "piece": spelled}
    )
    shown["next piece"] = shown["next piece"].map(quoted)  # so a leading space shows: ' Paris'
    static_table(shown, formats={"probability": "{:.3f}", "logit": "{:.3f}"})  # a piece "-" or "#" as itself


def few_heads(names: str, most: int = 16) -> str:
    """ "head (L0 H1)" or "heads (L0 H1, …)", naming at most `most` of them."""
    heads = names.split(", ")
    listed = ", ".join(heads[:most]) + (f" and {len(heads) - most} more" if len(heads) > most else "")
    return f"{'head' if len(heads) == 1 else 'heads'} ({listed})"


def pick_role_head() -> None:
    """on_pick callback of the head-roles matrix: open the head clicked."""
    picked = picked_value("roles")
    if picked is not None:
        st.session_state["layer"], st.session_state["head"] = int(picked["row"]), int(picked["col"])


def head_roles_section(trace: Trace, maps: AttentionMaps, cfg: ModelConfig, norms: np.ndarray | None) -> None:
    """What every head does on this sentence (`maps`, of `trace`), as Clark et al. (2019) chart BERT's heads, for a
    real checkpoint; with `norms` ([L, H, T, T] ‖α·f(x)‖), measured on the shares of what each head adds, and a
    sentence on what changes."""
    if not isinstance(cfg, CheckpointConfig) or maps.kind != "self-attention":
        return
    tokens = maps.key_labels
    by_weights = roles_of(trace, maps.kind, None)
    roles = by_weights if norms is None else roles_of(trace, maps.kind, norms)
    st.subheader("Head roles")
    first = code_text(tokens[0])
    where = ", where causal models park attention they do not need" if cfg.family != "bert" else ""
    share = "attention" if norms is None else "what it adds (‖α·f(x)‖, each query's row divided by its sum)"
    whole = "its attention" if norms is None else "what it adds"
    with_sep = cfg.family == "bert"  # a Llama has no separator token: its "sep" share is 0 for every head
    padded = PAD_TOKEN in maps.query_tokens  # roles_of leaves their rows out (head_roles.text_queries)
    sep = "on [SEP], " if with_sep else ""
    st.caption(
        f"For this sentence, each head's mean share of {share} on the first token (`{first}`{where}), {sep}"
        f"on punctuation, on the previous, the next or the same token, and how broad {whole} is — "
        "as Clark et al. (2019, “What Does BERT Look At?”, Fig. 1–2) chart BERT. A head clearly has a role when "
        f"at least half of {whole} goes there, 0.2 more than to any other; broad = within about 10 % of uniform."
        + (" The rows of [PAD] queries are left out: padding is no part of the sentence." if padded else "")
        + removed_roles_words(removed_heads(trace, maps), trace.ablate_with, norms is not None)
    )
    options = [r for r in (*ROLES, BREADTH) if with_sep or r != "sep"]
    warn_junk_url({"role": options})
    role = st.radio(
        "Colour the heads by",
        options,
        index=options.index("previous"),
        key="role",
        bind="query-params",
        horizontal=True,
        help=f"first: the first token; {'sep: [SEP]; ' if with_sep else ''}punct: punctuation; previous, next, self: "
        "the token just before, just after, the query itself; breadth: 1 when attention is uniform. (No labels on "
        "the options: a link holds the role as it is written here.)",
    )
    picked = shown_head(maps.n_layers, maps.n_heads)
    board_panel = roles_panel(roles, role, first, picked, norms=norms is not None)
    show_board(board([board_panel]), key="roles", on_pick=pick_role_head)
    table = clear_roles(roles, first)
    if table.empty:
        st.caption(no_clear_role_text(roles))
    else:  # text, not a data grid: the grid's script would slow every load of the page
        st.markdown("\n".join(f"- **{row.role}**: {row.count} {few_heads(row.heads)}" for row in table.itertuples()))
    if norms is not None:
        names = {r: role_name(r, first) for r in (*ROLES, BROAD)}
        st.markdown(role_shift_text(by_weights, roles, names, removed_heads(trace, maps)))
    else:
        st.caption("Show **norms** above to see how many heads keep their role when measured by what they add.")


def main() -> None:
    st.title("Attention")
    run = sidebar_run("Fix the setting named above (in the sidebar) to see the attention maps.")
    if run is None:
        return
    cfg, trace = run
    st.caption(summary(cfg, trace))
    all_maps = trace.attention_maps()
    kinds = list(all_maps)
    screen_view_params(VIEW_NOTES_KEY, kinds, *view_options(all_maps[kinds[0]]))
    warn_junk_url({"stretch": URL_BOOLEAN, "measure": list(MEASURES), "entropy_table": URL_BOOLEAN})
    notes = st.container()
    kind = kinds[0]
    if len(kinds) > 1:
        kind = kind_choice(kinds, "cross-attention: each target token (query) looks at the source tokens (keys).")
    with_norms = measure_choice() == "norms"
    if with_norms:
        st.caption(norms_line(cfg.norm))
    next_token_section(trace)
    roles_and_maps(kind, with_norms)
    entropy_table(entropy_of(trace, kind))  # the same table the board beside the map shows, made once a trace
    with notes:
        show_url_notes(VIEW_NOTES_KEY)


main()

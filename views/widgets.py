"""Small Streamlit pieces the pages share."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import quote, urlencode

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.errors import StreamlitAPIException
from streamlit.runtime.state.session_state_proxy import get_session_state

from explorer.ablation import Head
from explorer.config import CheckpointConfig, ModelConfig
from explorer.config_words import count, mask_text, positions_text
from explorer.pretrained import pretrained_title
from explorer.trace import Trace
from views.state import app_state

MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~^$])")  # what CommonMark (and $ for math) may read


def markdown_literal(text: str) -> str:
    """`text` as Markdown that shows it as written: every punctuation mark Markdown could read is escaped (a step
    "+ sinusoidal positions" would otherwise be a bullet)."""
    return MARKDOWN_PUNCTUATION.sub(r"\\\1", text)


def static_table(
    frame: pd.DataFrame,
    labels: dict[str, str] | None = None,
    formats: dict[str, str | Callable[[Any], str]] | None = None,
) -> None:
    """A small table whose every column stays in view on a 1024 px projector: its cells wrap (st.table), where
    st.dataframe keeps each on one line and scrolls sideways past the numbers, and loads the data grid's heavy
    script. Text cells read as written: st.table reads each as Markdown, where a vocabulary piece "-", "*" or "1."
    is an empty list, "#" a heading and "---" a rule. `labels`: column headers by column name; `formats`:
    str.format patterns or functions by column name."""
    text = frame.map(lambda value: markdown_literal(value) if isinstance(value, str) else value)
    labels = labels or {}
    shown = text.rename(columns=labels).style.format({labels.get(k, k): f for k, f in (formats or {}).items()})
    st.table(shown, hide_index=True)


def model_line(cfg: ModelConfig, trace: Trace, bold: tuple[str, ...] = ()) -> str:
    """The one line every page puts under its title: the model's settings (the fields in `bold` in bold), the mask
    it applies, and the length of each stack's input."""
    parts = {
        "arch": cfg.arch,
        "n_layers": f"{count(cfg.n_layers, 'layer')} × {count(cfg.n_heads, 'head')}",
        "d_model": f"d_model {cfg.d_model} (d_head {cfg.d_head}) · d_ff {cfg.d_ff}",
        "norm": f"{cfg.norm}-norm",
        "positional": positions_text(cfg.positional),
        "mask": mask_text(cfg),
        "activation": cfg.activation,
        "seed": f"seed {cfg.seed}",
    }
    if isinstance(cfg, CheckpointConfig):  # a real checkpoint: its name and where its weights come from, no seed
        parts = {"checkpoint": f"**{pretrained_title(cfg.checkpoint)}**", **parts, "seed": cfg.weights_note}
        if cfg.n_kv_heads != cfg.n_heads:
            parts["n_layers"] += f" sharing {cfg.n_kv_heads} key/value heads"
    shown = [f"**{text}**" if field in bold else text for field, text in parts.items()]
    unit = "piece" if isinstance(cfg, CheckpointConfig) else "token"
    shown += [f"{stack.name} {count(len(stack.tokens), unit)}" for stack in trace.stacks]
    return " · ".join(shown)


WEIGHTS_STRETCH_HELP = (
    "Off: white = 0, darkest blue = 1, the same on every map. On: darkest blue = the top 1 % of the weights shown, "
    "for long inputs whose weights are all small (about 1/T when attention is spread evenly)."
)


def stretch_toggle(where: DeltaGenerator, help_text: str = WEIGHTS_STRETCH_HELP, key: str = "stretch") -> bool:
    """The Stretch colours switch: one URL parameter, stretch, on every page that has it (`key`: another, for a
    second switch on one page); `help_text` says what it does to that page's maps (the attention maps' by default)."""
    return where.toggle("Stretch colours", key=key, bind="query-params", help=help_text)


NUMBER_SELECT_PX = 110  # a layer or head selector: its options are numbers only
MEASURES = ("weights", "norms")  # the values of the measure URL parameter, shown as they are written (see below)
MEASURE_HELP = (
    "weights: α_ij, how much query i looks at key j. norms: ‖α_ij·f_h(x_j)‖, how much head h actually adds to query "
    "i from key j — the weight times the size of key j's value vector f_h(x_j) projected by the head's slice of the "
    "output projection (Kobayashi et al. 2020, “Attention is Not Only a Weight”). A head can look hard at a token "
    "whose vector is tiny, and add almost nothing from it."
)


def measure_choice(where: DeltaGenerator | None = None) -> str:
    """The Show radio: "weights" (α) or "norms" (what each head adds, ‖α·f(x)‖); one URL parameter, measure. The
    options carry no labels, as Streamlit would write a label into the URL; captions say what each is."""
    return (where or st).radio(
        "Show",
        MEASURES,
        key="measure",
        bind="query-params",
        horizontal=True,
        captions=["where each head looks (α)", "what the head adds (‖α·f(x)‖)"],
        help=MEASURE_HELP,
    )


def download(
    label: str,
    data: Callable[[], str | bytes],
    file_name: str,
    mime: str,
    key: str,
    where: DeltaGenerator | None = None,
    **more: Any,
) -> None:
    """A download button whose file is built only when clicked, and whose click does not rerun the page; into
    `where` (a column, say) or the page. `more`: other st.download_button arguments (disabled, help)."""
    (where or st).download_button(
        label, data=data, file_name=file_name, mime=mime, on_click="ignore", icon=":material/download:", key=key, **more
    )


def plain(markdown: str) -> str:
    """A summary line without its Markdown bold marks, for a file."""
    return markdown.replace("**", "")


# The views whose figures are of the sidebar's run, so of the model without the heads it removes: their file says
# which heads (What heads do and Compare write their own lines; Anatomy, Positional and Train draw no run's numbers).
RUN_VIEWS = ("attention", "mixing", "activations")


def removal_line(heads: tuple[Head, ...], mode: str, reads_target: bool = False) -> str | None:
    """The line a view's file adds when the run has heads removed: which (of the encoder's self-attention for an
    encoder-decoder, whose config `reads_target`: removal reaches the first stack only), and what their output
    became."""
    if not heads:
        return None
    from views.ablation_controls import Removal  # it imports this module

    where = " from the encoder's self-attention" if reads_target else ""
    return f"Heads removed{where}: {Removal(heads, mode).words}. Every figure is of the model without them."


def view_download(
    title: str,
    lines: list[str],
    figures: Callable[[], list],
    key: str,
    where: DeltaGenerator | None = None,
    query: Callable[[], dict[str, str]] | None = None,
) -> None:
    """ "Download this view (HTML)": the page's figures as Plotly, in one offline file, built only when clicked.
    `figures()` makes them (with pictures.notebook_figures, the page's own builders); it runs outside the script
    run, so it must get everything it needs from the session (the model, the layer shown) as arguments, not read it
    then. The file links to the page with the URL's query of this run, or `query()`'s on the click (a fragment that
    reruns alone may change the URL after this button was drawn; a section's fragment updates the query held for the
    link itself: note_link_query). A view of the sidebar's run (RUN_VIEWS) says which
    heads the run removed: the link alone had said it, as ablate=L0H1."""

    base, now = (st.context.url or "").split("?")[0], note_link_query()
    state = app_state()
    reads_target = state.config is not None and state.config.reads_target
    removed = removal_line(tuple(state.ablated), state.ablate_with, reads_target) if key in RUN_VIEWS else None
    lines = lines if removed is None else [*lines, removed]

    def build() -> bytes:  # runs on the click, outside the script run: it may not read st.session_state
        from pictures.html_export import view_html

        link = base + "?" + urlencode(dict(now) if query is None else query(), quote_via=quote)
        return view_html(title, [*lines, f"Link to this view: {link}"], figures())

    download(
        "Download this view (HTML)",
        build,
        f"attention_explorer_{key}.html",
        "text/html",
        f"view_html_{key}",
        where,
        help="One file with this view's figures (plotly.js inside): it opens in any browser, with no server and no "
        "network. The link in it reopens the page.",
    )


LINK_QUERY = "_link_query"  # the address bar's query at the end of the last run or fragment run, for view_download


def note_link_query() -> dict[str, str]:
    """Keep the address bar's query now in this session's one dict, and return that dict (the same object every
    time): a view's file links to what it holds when clicked. A section drawn in a fragment (views/lazy_sections.py)
    changes the URL without redrawing the page's download, whose link then left out the section's switches
    (stretch=true on Positional's table): it calls this after each of its runs."""
    held: dict[str, str] = st.session_state.setdefault(LINK_QUERY, {})
    held.clear()
    held.update(st.query_params.to_dict())
    return held


def csv_button(label: str, frame: pd.DataFrame, file_name: str, key: str) -> None:
    """A download button for a table as CSV, built only when clicked."""
    download(label, partial(frame.to_csv, index=False), file_name, "text/csv", key)


# How a table of explorer.analysis.stats.head_entropy shows its columns (Attention and Activations)
ENTROPY_COLUMNS = {
    "entropy": st.column_config.NumberColumn("entropy (nats)", format="%.4f"),
    "max_entropy": st.column_config.NumberColumn("uniform entropy (nats)", format="%.4f"),
    "peakedness": st.column_config.NumberColumn("peakedness (0 uniform, 1 one-hot)", format="%.3f"),
}


def code_text(text: str, limit: int = 40) -> str:
    """User text made safe inside a Markdown code span (no backtick, no line break), cut to `limit` characters."""
    text = text.replace("`", "'").replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "…"


CLAMPED = "_clamped_view"  # {key: value} clamp_view set in this run, for write_clamped_to_url
CARRIED = "_carried_view"  # the layer and head last picked, and on which page: {"page": "attention", "layer": 1, ...}


def carry_view(page: str, key: str, options: list) -> None:
    """Before the selector `key` ("layer" or "head") exists on `page`: when the last pick was on another page,
    start it there, unless the URL says otherwise or the value is not one of its options. Streamlit keeps a page's
    widgets to that page, so without this a teacher going from Attention to Compare loses the head being discussed."""
    carried = st.session_state.get(CARRIED, {})
    if carried.get("page") not in (None, page) and key not in st.query_params and carried.get(key) in options:
        st.session_state[key] = carried[key]
        # The address bar then reproduces the view, as a link would. Streamlit refuses while a widget still holds
        # the binding (as in AppTest), and that widget shows the value anyway.
        with contextlib.suppress(StreamlitAPIException):
            st.query_params[key] = str(carried[key])


def write_clamped_to_url() -> None:
    """After the page's widgets exist: put in the address bar each value clamp_view set in this run. Opened from a
    link (?layer=99), Streamlit drops the value its widget cannot take from the address bar and, on a first run,
    writes nothing in its place, so a copied link showed layer 0 where the page showed the last. Streamlit's own
    setter refuses a parameter bound to a widget; this is the call Streamlit makes when it corrects one itself."""
    clamped = st.session_state.pop(CLAMPED, None)
    if not clamped:  # nearly every run: no lock taken on the session's query parameters
        return
    for key, value in clamped.items():
        if st.session_state.get(key) == value:
            write_bound_param(key, str(value))


def write_bound_param(key: str, text: str) -> None:
    """Put `key`=`text` in the address bar, though a widget holds the binding of `key`: the call Streamlit makes when
    it corrects a bound value itself (its own setter refuses). Nothing when no widget binds `key` in this run, or the
    URL already says so."""
    with get_session_state().query_params() as params:
        binding = params.get_binding_for_param(key)
        if binding is not None and params.get(key) != text:
            params.set_corrected_value(key, text, binding.value_type)


def clamp_view(key: str, options: list, what: str) -> bool:
    """Before the selector `key` exists: when its value (kept from before the sidebar took layers or heads away, or
    from a link) is a whole number beyond its whole-number options, make it the nearest one (the last, mostly) rather
    than let Streamlit jump to the first in silence, and say so here, for this run. Set this way, Streamlit writes
    the new value to the address bar too. True when it did."""
    numbers = [o for o in options if isinstance(o, int)]
    raw = st.session_state.get(key, st.query_params.get(key))
    try:
        value = int(str(raw))
    except ValueError:
        return False
    if not numbers or numbers[0] <= value <= numbers[-1]:
        return False
    nearest, which = (numbers[-1], "last") if value > numbers[-1] else (numbers[0], "first")
    st.session_state[key] = nearest
    st.session_state.setdefault(CLAMPED, {})[key] = nearest
    st.warning(
        f"There is no {what} {value} here ({count(len(numbers), what)}): showing the {which}, {nearest}.",
        icon=":material/info:",
    )
    return True


def opening_kind(kinds: list[str]) -> str:
    """The kind of attention a page opens on: cross-attention when there is one (what an encoder-decoder adds),
    else the first. Attention and Compare open on the same one."""
    return "cross-attention" if "cross-attention" in kinds else kinds[0]


def settle_choice(key: str, options: list, default: Any = None) -> None:
    """Before the selector `key` exists: a value kept from an earlier run that is no longer one of its options
    becomes `default` (the first option if None), as Streamlit would show it, but set so that Streamlit also takes
    the old value out of the address bar, where a copied link would have shown something else."""
    if key in st.session_state and st.session_state[key] not in options:
        st.session_state[key] = options[0] if default is None else default


def remember_view(page: str, key: str, value: Any) -> None:
    """After the selector `key` on `page`: its value, for carry_view on the next page."""
    st.session_state.setdefault(CARRIED, {}).update({"page": page, key: value})


# Plotly's toolbar: the PNG download stays (the "PNG from each chart's own toolbar"); no Plotly logo link,
# which would lead off this machine.
PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def plotly_chart(figure: Any, key: str, where: DeltaGenerator | None = None) -> None:
    """One Plotly figure, as wide as its column, with its own colours (Streamlit's theme off, so the page draws what
    a notebook and the HTML download draw); into `where` (a placeholder, say) or the page."""
    (where or st).plotly_chart(figure, key=key, theme=None, width="stretch", config=PLOTLY_CONFIG)


def kind_choice(kinds: list[str], help_text: str) -> str:
    """The radio that picks which attention a page shows (self- or cross-attention), kept in the URL as `kind`; it
    opens on opening_kind, as on every page."""
    settle_choice("kind", kinds, opening_kind(kinds))
    return st.radio(
        "Attention",
        kinds,
        index=kinds.index(opening_kind(kinds)),
        key="kind",
        bind="query-params",
        horizontal=True,
        help=help_text,
    )

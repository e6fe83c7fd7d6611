"""Heads removed from the model every page shows: read from the URL (ablate=L1H3,L2H5, ablate_with=zero|mean), picked
in the sidebar, switched by clicks on the pages (toggle_head), and said above every page.

A link writes the heads as one text, "L1H3,L2H5" (explorer.ablation), which a bound multiselect cannot hold: it
writes a list as repeated parameters (?ablate=L1H3&ablate=L2H5) and drops a value that is not one of its options.
So the URL is bound to a text input that the page hides (HIDDEN_CSS), and the multiselect a person uses is kept in
step with it: the text decides the heads, the multiselect's changes rewrite the text. Compare's B keeps its own list
the same way (b_ablate).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer.ablation import ABLATE_WITH, Head, head_name, head_names, heads_text, parse_heads
from explorer.analysis.ablation_effects import mean_is_own_output
from explorer.config import ConfigError
from views.state import app_state
from views.widgets import code_text

ABLATE_KEY = "ablate"  # the URL's text of the heads every page removes
ABLATE_WITH_KEY = "ablate_with"  # what their output becomes: zero or mean
PICKER_BUTTON = "Pick heads from a list"
PICKER_PLACEHOLDER = "none, or e.g. L0H1, L2H3"
NEXT_KEY = "_ablate_next"  # toggle_head's new text, written to ABLATE_KEY before the next run draws it
MODE_WORDS = {"zero": "output set to zero", "mean": "output set to its mean over the positions"}
MODE_HELP = (
    "zero: a removed head adds nothing to the stream. mean: it adds its own output averaged over every position, "
    "[PAD] included (mean ablation), so the stream keeps its usual size but loses what the head did at each position; "
    "with a causal mask that mean holds the later positions' outputs too, so each position receives a little of the "
    "tokens after it. "
    "Either way the head still computes its attention weights: the maps show them."
)


@dataclass(frozen=True)
class Removal:
    """The heads removed in this run (sorted, checked against the model) and what their output becomes; `ignored`:
    what the URL's text held that could not be used, one phrase each."""

    heads: tuple[Head, ...] = ()
    mode: str = "zero"
    ignored: tuple[str, ...] = field(default=())

    @property
    def query(self) -> dict[str, str]:
        """The URL parameters that hold this removal (none when no head is removed)."""
        if not self.heads:
            return {}
        return {ABLATE_KEY: heads_text(self.heads)} | ({ABLATE_WITH_KEY: self.mode} if self.mode != "zero" else {})

    @property
    def words(self) -> str:
        """ "L1H3, L2H5 (output set to zero)"."""
        return f"{head_names(self.heads)} ({MODE_WORDS[self.mode]})"


def head_options(n_layers: int, n_heads: int) -> list[str]:
    """Every head's name, layer by layer: "L0H0", "L0H1", …"""
    return [head_name((layer, head)) for layer in range(n_layers) for head in range(n_heads)]


def read_heads(text: str, n_layers: int, n_heads: int) -> tuple[tuple[Head, ...], tuple[str, ...]]:
    """The heads a URL's text names that the model has, sorted and once each, and a phrase for every part left
    out (junk, out of range, repeated). Never raises: a link is read as far as it makes sense."""
    kept: list[Head] = []
    ignored: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        shown = f"`{code_text(part, 40)}`"
        try:
            (head,) = parse_heads(part)
        except ConfigError:
            ignored.append(f"{shown} (not a head: write L<layer>H<head>)")
            continue
        layer, index = head
        if not (0 <= layer < n_layers and 0 <= index < n_heads):
            ignored.append(f"{shown} (the model has layers 0 to {n_layers - 1}, heads 0 to {n_heads - 1})")
        elif head in kept:
            ignored.append(f"{shown} (listed twice)")
        else:
            kept.append(head)
    return tuple(sorted(kept)), tuple(ignored)


def ignored_note(key: str, ignored: tuple[str, ...]) -> str:
    """The sentence for the parts of the URL's list of heads that were left out."""
    listed = "; ".join(ignored[:6]) + (f"; and {len(ignored) - 6} more" if len(ignored) > 6 else "")
    return f"URL parameter `{key}`: ignored {listed}. The other heads listed are removed."


def _sync_text(text_key: str, pick_key: str) -> None:
    """on_change of a multiselect of heads: its picks, in layer order, become the bound text."""
    st.session_state[text_key] = heads_text(sorted(parse_heads(",".join(st.session_state.get(pick_key) or []))))


def heads_picker(
    where: DeltaGenerator,
    label: str,
    text_key: str,
    n_layers: int,
    n_heads: int,
    help_text: str,
) -> tuple[tuple[Head, ...], tuple[str, ...]]:
    """The heads as text (L1H3, L2H5), bound to the URL parameter `text_key`, and below it a popover with a
    multiselect of the model's heads kept in step with it; (heads removed, what the text held that was left out).
    The multiselect sits in a popover because Streamlit sends it to the browser only when the popover is opened:
    on every page load it cost the Attention page about 4 %."""
    pick_key = f"_{text_key}_pick"
    text = where.text_input(
        label, value="", key=text_key, bind="query-params", placeholder=PICKER_PLACEHOLDER, help=help_text
    )
    heads, ignored = read_heads(text, n_layers, n_heads)
    st.session_state[pick_key] = [head_name(h) for h in heads]  # before the multiselect exists: it shows the text
    where.popover(PICKER_BUTTON, icon=":material/checklist:", width="stretch").multiselect(
        f"{label} (Lℓ Hh: layer ℓ, head h)",
        head_options(n_layers, n_heads),
        key=pick_key,
        on_change=_sync_text,
        args=(text_key, pick_key),
        placeholder="none",
    )
    return heads, ignored


def ablation_sidebar(shape: tuple[int, int] | None, notes_key: str) -> Removal:
    """The sidebar's "Heads removed" and, while some are, "Removed heads' output", below the model controls, for a
    model of `shape` (layers, heads of the stack that reads the input); None: no model to remove heads from. A
    note into `notes_key` (views.query_params.show_url_notes) names what the URL's list held that was left out."""
    if NEXT_KEY in st.session_state:  # toggle_head's change, before the bound text is drawn
        st.session_state[ABLATE_KEY] = st.session_state.pop(NEXT_KEY)
    notes: dict = st.session_state.setdefault(notes_key, {})
    if shape is None:
        return Removal()
    sb = st.sidebar
    heads, ignored = heads_picker(
        sb,
        "Heads removed",
        ABLATE_KEY,
        *shape,
        "Switch heads off in every page's model: a removed head still computes its attention weights, but adds "
        "nothing to the stream (or only its mean). Layers below the first removed head are unchanged. A link holds "
        "them as ablate=L1H3,L2H5 (layers and heads count from 0).",
    )
    if ignored:
        notes[ABLATE_KEY] = (ignored_note(ABLATE_KEY, ignored), st.session_state.get(ABLATE_KEY))
    else:
        notes.pop(ABLATE_KEY, None)
    if not heads:
        return Removal(ignored=ignored)
    raw = st.query_params.get(ABLATE_WITH_KEY)
    if raw is not None and raw not in ABLATE_WITH:
        why = f"it is not one of {', '.join(ABLATE_WITH)}. Using zero (the default) instead."
        notes[ABLATE_WITH_KEY] = (f"URL parameter `{ABLATE_WITH_KEY}={code_text(raw)}` was ignored: {why}", "zero")
    mode = sb.radio(
        "Removed heads' output",
        list(ABLATE_WITH),
        key=ABLATE_WITH_KEY,
        bind="query-params",
        horizontal=True,
        help=MODE_HELP,
    )
    return Removal(heads, mode, ignored)


def toggle_head(head: Head) -> None:
    """Remove `head` from every page's model, or put it back if it is removed, and rerun the whole app (a click
    inside a fragment would otherwise rerun the fragment alone). Works as a callback and in a script run."""
    removed = set(app_state().ablated)
    removed ^= {(int(head[0]), int(head[1]))}
    st.session_state[NEXT_KEY] = heads_text(sorted(removed))
    st.rerun()


def put_all_back() -> None:
    """Callback: every head back."""
    st.session_state[ABLATE_KEY] = ""


def downstream_words(heads: tuple[Head, ...], encoder_decoder: bool = False) -> str:
    """What removing `heads` changes: everything from the first one's layer output on, nothing below it. In an
    encoder-decoder they are the encoder's: every decoder layer's cross-attention reads the encoder's output, so of the
    decoder only layer 0's self-attention, which reads the target alone, stays as it was."""
    first = heads[0][0]
    stack, stream = ("encoder ", "the encoder's stream") if encoder_decoder else ("", "the stream")
    below = f"{stack}layers below {first} are unchanged; from" if first > 0 else "from"
    said = (
        f"{below} {stack}layer {first}'s output on, {stream} differs, and so does the attention of every {stack}layer "
        "above it."
    )
    if encoder_decoder:
        said += (
            " The decoder keeps all its heads, but its cross-attention reads the encoder's output in every layer, so "
            "the decoder's stream differs from layer 0 on: only its layer 0 self-attention, which reads the target "
            "alone, is unchanged."
        )
    return said[0].upper() + said[1:]


def whose_heads(heads: tuple[Head, ...], encoder_decoder: bool) -> str:
    """ "Head" or "Heads", "Encoder head" or "Encoder heads" in an encoder-decoder, whose decoder keeps every head."""
    noun = "heads" if len(heads) > 1 else "head"
    return f"Encoder {noun}" if encoder_decoder else noun.capitalize()


def removed_head_text(mode: str, norms: bool) -> str:
    """What the map of a head removed with `mode` ("zero" or "mean") shows, drawn by its weights or, with `norms`,
    by what it adds."""
    if not norms:
        adds = "nothing" if mode == "zero" else "only its mean over the positions"
        return (
            "This map shows the weights it still computes: the head still looks where it did, but its output is "
            f"replaced, so it adds {adds} to the stream."
        )
    if mode == "zero":
        return (
            "This map shows what it adds: zero everywhere, since its output is replaced by zero. Hover still gives "
            "the weights α it computes, which no longer mix anything."
        )
    return (
        "This map shows what it adds: its output is replaced by its mean over the positions, so every query gets the "
        "same row, ᾱ·f(x), each key's weight averaged over the queries times the size of its value vector, from "
        "every key, even the ones a query may not see (no cell is grey). Hover gives ᾱ, the weights α it still "
        "computes and ‖f(x)‖."
    )


def unchanged_words(heads: tuple[Head, ...], n_tokens: int) -> str:
    """Why removing `heads` by their mean changes nothing here (mean_is_own_output), said instead of
    downstream_words."""
    what = "each head's" if len(heads) > 1 else "the head's"
    why = (
        "there is one position"
        if n_tokens == 1
        else "every query may attend only to the same one key, so every position receives the same output"
    )
    return (
        f"Here {why}: {what} mean over the positions is what it already writes, so nothing changes and every page "
        "shows the same numbers as with every head (to float rounding)."
    )


def removal_banner(removal: Removal) -> None:
    """While heads are removed: one sentence above the page saying which and how, with a button to put them back."""
    if not removal.heads:
        return
    many = len(removal.heads) > 1
    row = st.container(horizontal=True, vertical_alignment="center")  # the button as wide as its label: never cut
    trace = app_state().trace if removal.mode == "mean" else None
    config = app_state().config
    encoder_decoder = config is not None and config.reads_target
    if trace is not None and mean_is_own_output(trace.first.self_attention.allowed):
        effect = unchanged_words(removal.heads, len(trace.first.tokens))
    else:
        effect = downstream_words(removal.heads, encoder_decoder)
    row.info(
        f"{whose_heads(removal.heads, encoder_decoder)} {removal.words} removed: every page shows the model without "
        f"{'them' if many else 'it'}. {effect}",
        icon=":material/block:",
    )
    row.button(
        "Put them all back" if many else "Put it back",
        key="put_heads_back",
        on_click=put_all_back,
        icon=":material/undo:",
    )

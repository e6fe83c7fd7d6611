"""B's controls on the Compare page: defaults derived from A, kept in the URL, screened for junk like the sidebar's.

B's fields are keyed b_<field> and bound to the URL. A control the user leaves alone follows A (follow_a); "Swap A
and B" and "Reset B" rewrite the controls' state in callbacks, before they are drawn. In the mode "heads" B is A's
very model with the heads of its own list removed (b_ablate=L1H3,L2H5, b_ablate_with=zero|mean).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from explorer.ablation import head_name
from explorer.anatomy import norm_name
from explorer.compare import B_FIELDS, B_PREFIX, CONFIGURATION, INPUT, default_b, reversed_text
from explorer.compare_link import FLIPPED
from explorer.compare_text import identity_values
from explorer.config import NORMS, CheckpointConfig, ConfigError, ModelConfig
from explorer.norm_words import placement_help
from explorer.pretrained import pretrained_title
from views.ablation_controls import MODE_HELP, Removal, heads_picker, ignored_note
from views.caches import installed_checkpoints, pretrained_model
from views.fields import FIELD, field_control
from views.query_params import b_url_value, screen_b_params, show_url_notes

HEADS = "heads"  # ?compare=heads: B is A's very model with heads removed (b_ablate, b_ablate_with)
B_ABLATE, B_ABLATE_WITH = "b_ablate", "b_ablate_with"
DRAWN_KEY = "_compare_defaults"  # the default each of B's controls was last drawn with
NOTES_KEY = "_compare_url_notes"
FIXED_KEY = "_compare_fixed_params"
# Three a row for the choices: five across a 1024 px screen left each box 90 px, "encoder-decoder" read "encode"
# and "res-post" "res-pos", and a label with its "≠ A" took three lines.
GRID = (("arch", "norm", "positional"), ("mask", "activation", "seed"), ("n_layers", "n_heads", "d_model", "d_ff"))


def follow_a(defaults: dict[str, Any]) -> None:
    """A control of B still at the default it was last drawn with follows A's new default; one the user changed
    keeps its value. Must run before the controls are drawn."""
    drawn = st.session_state.setdefault(DRAWN_KEY, {})
    for key, default in defaults.items():
        old = drawn.get(key)
        if old is not None and old != default and key in st.session_state and st.session_state[key] == old:
            st.session_state[key] = default
        drawn[key] = default


def pending_value(field: str, default: Any) -> Any:
    """The value B's control will show this run (its state, else a usable URL value, else its default)."""
    key = B_PREFIX + field
    if key in st.session_state:
        return st.session_state[key]
    from_url = b_url_value(field)
    return default if from_url is None else from_url


def b_controls(a: ModelConfig) -> ModelConfig | None:
    """B's ten controls in a box; B, or None (with the reason shown) when B is impossible."""
    reference = default_b(a)
    defaults = {B_PREFIX + f: getattr(reference, f) for f in B_FIELDS}
    follow_a(defaults)
    screen_b_params(defaults, NOTES_KEY, FIXED_KEY)
    pending = {f: pending_value(f, getattr(reference, f)) for f in B_FIELDS}
    different = [f for f in B_FIELDS if pending[f] != getattr(a, f)]
    summary = ", ".join(f"{f} {pending[f]}" for f in different) if different else "the same as A"
    # Bound to the URL (b_box=true): a teacher who projects B's controls shares a link that shows them too
    label = f"**Configuration B**: {summary} · change B here"
    box = st.expander(label, icon=":material/tune:", key="b_box", bind="query-params")
    box.caption("A field where B differs from A is marked ≠ A; its help (?) gives A's value.")
    values: dict[str, Any] = {}
    for row in GRID:
        for column, field in zip(box.columns(len(row)), row, strict=True):
            a_value = getattr(a, field)
            label = FIELD[field].short
            if pending[field] != a_value:
                label += " ≠ A"  # plain text: a screen reader reads the label as it is
            help_text = f"B's {field}; A's (in the sidebar) is {a_value}."
            values[field] = field_control(
                FIELD[field], column, getattr(reference, field), B_PREFIX, label=label, help_text=help_text
            )
    if values["arch"] == "decoder" and "causal" not in values["mask"]:
        box.caption("A decoder is always causal: each token sees only itself and earlier tokens.")
    try:
        return a.replace(**values)
    except ConfigError as e:
        st.error(f"B: {e}", icon=":material/error:")
        return None


def checkpoint_b_control(a: CheckpointConfig) -> CheckpointConfig:
    """For a real checkpoint A, B is A on its own weights with another norm placement (the usual flip first), or
    another checkpoint."""
    usual = default_b(a).norm
    flips = {FLIPPED.format(norm=norm): norm for norm in (usual, *NORMS) if norm != a.norm}
    others = [name for name in installed_checkpoints() if name != a.checkpoint]
    choice = st.radio(
        "B is",
        [*flips, *others],
        key="b_model",
        bind="query-params",
        horizontal=True,
        help=f"A with another placement: {pretrained_title(a.checkpoint)}'s very weights run with a norm placement it "
        "was not trained with. The norms A has keep their trained weights; a norm that placement has and A has not "
        f"starts as the identity ({identity_values(norm_name(a))}). "
        f"{placement_help()} Another checkpoint: a second real model on the same text, side by side.",
    )
    if choice in flips:
        return a.replace(norm=flips[choice])
    return pretrained_model(choice).config


def b_tokens_control(text_a: str) -> str:
    """The second input, defaulting to A's tokens in reverse order (and following A's text until edited)."""
    default = reversed_text(text_a)
    follow_a({"b_tokens": default})
    return st.text_input(
        "Tokens of B",
        value=default,
        key="b_tokens",
        bind="query-params",
        help="B is A's very model on this text. Words separated by spaces; the default is A's tokens reversed, "
        "so only their positions differ.",
    )


def b_heads_control(a: ModelConfig, removed_in_a: tuple) -> Removal:
    """The heads B removes from A's very model (its own list: b_ablate=L1H3,L2H5 in the URL), on top of any the
    sidebar removes from A, and what their output becomes (b_ablate_with)."""
    also = (
        f" The sidebar already removes {', '.join(map(head_name, removed_in_a))} from A and B." if removed_in_a else ""
    )
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    heads, ignored = heads_picker(
        left,
        "Heads B removes",
        B_ABLATE,
        a.n_layers,
        a.n_heads,
        "B is A's very model (the same weights, not a copy) run without these heads: each one's output is set to "
        f"zero or to its mean. The maps, A − B and the ranking then show what changes downstream.{also}",
    )
    notes = st.session_state.setdefault(NOTES_KEY, {})
    if ignored:
        notes[B_ABLATE] = (ignored_note(B_ABLATE, ignored), st.session_state.get(B_ABLATE))
    else:
        notes.pop(B_ABLATE, None)
    mode = right.radio(
        "Their output", ["zero", "mean"], key=B_ABLATE_WITH, bind="query-params", horizontal=True, help=MODE_HELP
    )
    return Removal(heads, mode, ignored)


def swap(a: ModelConfig, b: ModelConfig, text_a: str, text_b: str, mode: str) -> None:
    """Callback of "Swap A and B": rewrite the sidebar's controls and B's before either is drawn."""
    state = st.session_state
    drawn = state.setdefault(DRAWN_KEY, {})
    if mode == INPUT:
        state["tokens"], state["b_tokens"] = text_b, text_a
        drawn["b_tokens"] = reversed_text(text_b)
        return
    reference = default_b(b)
    for field in B_FIELDS:
        state[field], state[B_PREFIX + field] = getattr(b, field), getattr(a, field)
        drawn[B_PREFIX + field] = getattr(reference, field)


def reset_b(a: ModelConfig, text_a: str, mode: str) -> None:
    """Callback of "Reset B": B back to its default (A with the norm flipped, or A's tokens reversed)."""
    if mode == INPUT:
        st.session_state["b_tokens"] = reversed_text(text_a)
        return
    if mode == HEADS:
        st.session_state[B_ABLATE] = ""
        return
    if isinstance(a, CheckpointConfig):
        st.session_state["b_model"] = FLIPPED.format(norm=default_b(a).norm)  # the first choice, as B's radio names it
        return
    reference = default_b(a)
    for field in B_FIELDS:
        st.session_state[B_PREFIX + field] = getattr(reference, field)


def top_controls(a: ModelConfig, text_a: str, removed_in_a: tuple = ()) -> tuple[str, ModelConfig | None, str, Removal]:
    """The mode, B's controls (B's tokens, or the heads B removes), and the swap and reset buttons: (mode, B or None,
    B's text, the heads B removes besides the sidebar's `removed_in_a`)."""
    notes = st.container()
    top = st.container(horizontal=True, vertical_alignment="bottom")  # wraps: no label is cut on a 1024 px projector
    mode = top.radio(
        "B differs from A in its",
        [CONFIGURATION, INPUT, HEADS],
        key="compare",
        bind="query-params",
        horizontal=True,
        help="configuration: B is another model on the same tokens. input: B is A's very model on other tokens. "
        "heads: B is A's very model with heads removed.",
    )
    removal = Removal()
    if mode == CONFIGURATION and isinstance(a, CheckpointConfig):
        b, text_b = checkpoint_b_control(a), text_a
    elif mode == CONFIGURATION:
        b, text_b = b_controls(a), text_a
    elif mode == HEADS:
        b, text_b = a, text_a
        removal = b_heads_control(a, removed_in_a)
    else:
        b, text_b = a, b_tokens_control(text_a)
    top.button(
        "Swap A and B",
        on_click=swap,
        args=(a, b, text_a, text_b, mode),
        disabled=b is None or isinstance(a, CheckpointConfig) or mode == HEADS,
        icon=":material/swap_horiz:",
        key="swap",
        help="A takes B's settings (in the sidebar) and B takes A's.",
    )
    top.button(
        "Reset B",
        on_click=reset_b,
        args=(a, text_a, mode),
        icon=":material/restart_alt:",
        key="reset_b",
        help="B back to A with the norm flipped (or, for two inputs, A's tokens reversed; for heads, none removed).",
    )
    with notes:
        show_url_notes(NOTES_KEY)
    return mode, b, text_b, removal

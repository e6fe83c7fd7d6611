"""A model trained on the Train page, in links: while one is in use the address bar names it (its weights cannot
travel) and the sidebar says which of its settings a link would carry wrongly; a student whose link names one is told
so on every page, with a button that opens Train set to train the same weights again."""

from __future__ import annotations

from typing import Any

import streamlit as st

from explorer.pretrained import pretrained_title
from views.fields import FIELD
from views.state import CONFIGURED, app_state, use_trained
from views.train_settings import control_value
from views.training_run import train_again_params

TRAINED_PARAM = "trained"  # in a link made while a trained model was shown: what it was (its weights cannot travel)
LINKED_TRAINED_KEY = "_linked_trained"  # the TRAINED_PARAM this session's link came with, kept from page to page
TRAIN_AGAIN_KEY = "_train_again"  # Train's settings from that label, for the run after its button was clicked


def name_in_link(label: str) -> None:
    """The address bar names the trained model `label` (a Streamlit menu link leaves the parameter out: each page
    writes it back)."""
    if st.query_params.get(TRAINED_PARAM) != label:
        st.query_params[TRAINED_PARAM] = label


def forget_linked_label() -> None:
    """No trained model named in the link, nor kept from the one this session came with."""
    st.query_params.pop(TRAINED_PARAM, None)
    st.session_state.pop(LINKED_TRAINED_KEY, None)


def back_to_random() -> None:
    """on_click of "Back to the random model": the random model again, and no trained model named in the link."""
    use_trained(None)
    forget_linked_label()


def trained_banner(on_train: bool) -> None:
    """While a model from the Train page is in use: say so, name it in the link (a fresh session then says what the
    link was made with), and offer the way back to the random model. Without one, a link that names one says so."""
    trained = app_state().trained
    if trained is None:
        linked_trained_note(on_train)
        return
    st.session_state.pop(LINKED_TRAINED_KEY, None)  # the session's own trained model: the link's is behind it
    name_in_link(trained.label)
    box = st.sidebar.container(border=True)
    box.markdown(
        f"**Trained model in use**: {trained.label}. The model settings below do not change it; it reads "
        f"only the tokens {' '.join(trained.model.vocabulary)}. A shared link carries the settings, not it."
    )
    box.button("Back to the random model", key="back_to_random", on_click=back_to_random, icon=":material/undo:")
    st.info(f"Showing the trained model ({trained.label}), not a random one.", icon=":material/school:")


def train_again(again: dict[str, str], on_train: bool) -> None:
    """on_click of the note's way to the Train page: the sidebar's model and placement as the link's trained model
    had them, the note dropped (acted on), and Train's settings set: in its controls where they are drawn (a control
    bound to the address bar takes no value from it), else in the address bar this run sends the Train page."""
    st.session_state["model"] = CONFIGURED  # a trained model is a configured one, whatever the link's sidebar says
    st.session_state["norm"] = again["norm"]
    forget_linked_label()  # acted on: Train does not need the note
    settings = {key: value for key, value in again.items() if key != "norm"}
    drawn = [key for key in settings if key in st.session_state]  # clicked on Train: its controls hold the address bar
    for key in drawn:
        st.session_state[key] = control_value(key, settings.pop(key))
    if not on_train:  # else this click's run shows Train again, as it is
        st.session_state[TRAIN_AGAIN_KEY] = settings


def linked_trained_note(on_train: bool) -> None:
    """A link made while a trained model was shown opens the random model of its settings: say so, and how to see
    the trained one (training is deterministic: the same settings and seed give the same weights). The note stays
    on every page the student opens, and in their address bar, until they act on it or drop it: a page's menu link
    leaves the parameter out."""
    settings = st.session_state.pop(TRAIN_AGAIN_KEY, None)
    if settings is not None:  # Train's widgets were not drawn on this page, so they take the address bar's values
        st.switch_page("views/train.py", query_params=settings)
    label = st.query_params.get(TRAINED_PARAM) or st.session_state.get(LINKED_TRAINED_KEY)
    if not label:
        return
    st.session_state[LINKED_TRAINED_KEY] = label
    name_in_link(label)
    again = train_again_params(label)
    how = (
        "the button below sets the Train page to them; press Train there"
        if again is not None
        else "set the Train page to the same task and settings and train"
    )
    st.warning(
        f"This link was made while a model trained on the Train page was shown ({label}). Trained weights do not "
        "travel in a link: this page shows the random model of the same settings. To see the trained one, train it "
        f"again (on one machine the same settings and seed give the same weights): {how}, then use it on the other "
        "pages.",
        icon=":material/school:",
    )
    if again is not None:
        st.button(
            "Set this page to train it again" if on_train else "Open the Train page set to train it again",
            key="train_again",
            on_click=train_again,
            args=(again, on_train),
            icon=":material/school:",
            help=f"The sidebar keeps this link's settings, with the norm placement {again['norm']}-norm; Train's task, "
            "length, steps, learning rate, warmup and batch size are the trained model's. Then press Train.",
        )
    st.button("Show the random model without this note", key="drop_trained_note", on_click=back_to_random)


# The sidebar's settings that decide a trained model's weights with the Train page's (the task fixes the
# architecture and the mask, the label names the norm placement)
TRAINED_FIELDS = ("n_layers", "n_heads", "d_model", "d_ff", "positional", "activation", "seed")


def trained_link_note(values: dict[str, Any]) -> None:
    """While a trained model is in use, the sidebar's settings it was not trained with, if any: a link carries the
    sidebar's, and a student trains again with those, which gives other weights."""
    trained = app_state().trained
    if trained is None:
        return
    cfg = trained.model.config
    differ = [
        f"{FIELD[name].label} {getattr(cfg, name)} (the sidebar: {values[name]})"
        for name in TRAINED_FIELDS
        if name in values and values[name] != getattr(cfg, name)
    ]
    if values.get("model", CONFIGURED) != CONFIGURED:
        differ.insert(0, f"a configured model (the sidebar: {pretrained_title(values['model'])})")
    if differ:
        st.sidebar.warning(
            f"The trained model in use was made with {', '.join(differ)}. A shared link carries the sidebar's "
            "settings, and a student who trains again with them gets other weights: set them back before sharing.",
            icon=":material/link_off:",
        )
